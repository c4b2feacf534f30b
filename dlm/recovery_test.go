package dlm

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// kill crashes node i: the network drops everything to and from it, and
// its goroutines stop without releasing anything, as if the process died.
func (c *cluster) kill(i int) {
	c.t.Helper()
	if err := c.net.Crash(c.nodes[i].Name()); err != nil {
		c.t.Fatal(err)
	}
	c.nodes[i].Halt()
	c.nodes[i] = nil
}

// waitView waits (fake time) until every live node serves in a view with
// n members.
func (c *cluster) waitView(members int, within time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	for {
		ok := true
		var epoch uint64
		for _, nd := range c.nodes {
			if nd == nil {
				continue
			}
			v := nd.rec.View()
			if len(v.Members) != members || !nd.rec.Serving() || (epoch != 0 && v.Epoch != epoch) {
				ok = false
				break
			}
			epoch = v.Epoch
		}
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > within {
			c.t.Fatalf("no common view of %d members within %v", members, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRecoveryKillHolder(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		res := c.resourceOn(1, "kh")
		held := mustLock(t, c.ls[0], res, modes.EX)
		got := make(chan *Lock, 1)
		go func() { got <- mustLock(t, c.ls[2], res, modes.EX) }()
		synctestWait()
		start := time.Now()
		c.kill(0)
		lk := <-got
		took := time.Since(start)
		t.Logf("waiter granted %v after the holder died (token %d > %d)", took, lk.Token(), held.Token())
		if lk.Token() <= held.Token() {
			t.Fatalf("token went back: %d after %d", lk.Token(), held.Token())
		}
		if cfg := c.nodes[1].rec.Config(); took < cfg.LockDelay() {
			t.Fatalf("granted after %v, before the lock-delay %v", took, cfg.LockDelay())
		}
		c.waitView(2, 10*time.Second)
		mustUnlock(t, lk)
	})
}

func TestRecoveryKillMaster(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		res := c.resourceOn(1, "km")
		keep := mustLock(t, c.ls[2], res, modes.NL)
		held := mustLock(t, c.ls[0], res, modes.EX)
		_ = held.SetValue([]byte("v1"))
		if err := held.Convert(bg, modes.PW); err != nil { // writes v1
			t.Fatal(err)
		}
		got := make(chan *Lock, 1)
		go func() { got <- mustLock(t, c.ls[2], res, modes.PR) }()
		synctestWait()
		c.kill(1)
		c.waitView(2, 10*time.Second)
		select {
		case <-got:
			t.Fatal("PR granted while the PW holder still holds")
		default:
		}
		if held.Mode() != modes.PW || held.Err() != nil {
			t.Fatalf("holder after its master died: %v %v", held.Mode(), held.Err())
		}
		if err := held.Convert(bg, modes.NL); err != nil { // lets the PR in
			t.Fatal(err)
		}
		lk := <-got
		if v, ok := lk.Value(); string(v) != "v1" || !ok {
			t.Fatalf("value after remastering: %q valid=%v", v, ok)
		}
		if lk.Token() <= held.Token() {
			t.Fatalf("token %d not above %d", lk.Token(), held.Token())
		}
		mustUnlock(t, lk)
		mustUnlock(t, held)
		mustUnlock(t, keep)
	})
}

func TestRecoveryPartitionedNodeLosesLease(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		res := c.resourceOn(1, "part")
		held := mustLock(t, c.ls[0], res, modes.EX)
		c.net.Isolate(c.nodes[0].Name())
		start := time.Now()
		<-held.Lost()
		lostAt := time.Since(start)
		if !errors.Is(held.Err(), ErrNoQuorum) {
			t.Fatalf("lost: %v", held.Err())
		}
		got := make(chan *Lock, 1)
		go func() { got <- mustLock(t, c.ls[2], res, modes.EX) }()
		lk := <-got
		grantedAt := time.Since(start)
		t.Logf("isolated holder lost its lock after %v; another was granted after %v", lostAt, grantedAt)
		if grantedAt <= lostAt {
			t.Fatal("the lock was granted again before its holder knew it had lost it")
		}
		if _, err := c.ls[0].Lock(bg, "other", modes.NL, FailFast()); !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("lock on a node without quorum: %v", err)
		}
		c.net.Heal()
		c.waitView(3, 30*time.Second)
		lk2, err := c.ls[0].Lock(bg, "after-heal", modes.EX)
		if err != nil {
			t.Fatalf("after the heal: %v", err)
		}
		mustUnlock(t, lk2)
		mustUnlock(t, lk)
	})
}

func TestRecoveryFastRestartIsANewMember(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		res := c.resourceOn(1, "fr")
		held := mustLock(t, c.ls[0], res, modes.EX)
		oldBoot := c.nodes[0].bootID
		c.kill(0)
		nd := c.startNode(0) // at once: memberlist sees only an update
		if nd.bootID == oldBoot {
			t.Fatal("restart kept its boot id")
		}
		c.waitView(3, 30*time.Second)
		// The old boot's lock is gone: the restarted node (or anyone) gets it.
		lk := mustLock(t, c.ls[2], res, modes.EX)
		if lk.Token() <= held.Token() {
			t.Fatalf("token %d after %d", lk.Token(), held.Token())
		}
		mustUnlock(t, lk)
	})
}

func TestRecoveryJoinMovesResources(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMemOf(t, 4, 3, nil)
		defer c.close()
		// Locks on resources that will move to the new node, and some that
		// will not; the value block of one of them.
		var held []*Lock
		for i := range 40 {
			lk := mustLock(t, c.ls[i%3], fmt.Sprintf("j-%d", i), modes.PR)
			held = append(held, lk)
		}
		w := mustLock(t, c.ls[0], "j-value", modes.EX)
		_ = w.SetValue([]byte("kept"))
		if err := w.Convert(bg, modes.NL); err != nil {
			t.Fatal(err)
		}
		c.startNode(3)
		c.waitView(4, 30*time.Second)
		moved := 0
		for i, lk := range held {
			if c.ls[0].MasterOf(lk.Resource()) == c.nodes[3].Name() {
				moved++
			}
			// An EX request from the new node must wait for the PR holder.
			if _, err := c.ls[3].TryLock(bg, lk.Resource(), modes.EX); !errors.Is(err, ErrNotQueued) {
				t.Fatalf("lock %d: EX over a PR holder after the join: %v", i, err)
			}
		}
		if moved == 0 {
			t.Fatal("no resource moved to the new node")
		}
		r := mustLock(t, c.ls[3], "j-value", modes.PR)
		if v, ok := r.Value(); string(v) != "kept" || !ok {
			t.Fatalf("value after the join: %q %v", v, ok)
		}
		mustUnlock(t, r)
		for _, lk := range held {
			mustUnlock(t, lk)
		}
		mustUnlock(t, w)
		t.Logf("%d of %d resources moved to the new node", moved, len(held))
	})
}

// TestRecoveryBigResource: a resource with more locks than one report
// entry holds, with long names and full value blocks, survives the loss
// of its master in queue order.
func TestRecoveryBigResource(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, func(cfg *Config) {
			cfg.MaxLocks = 0
			cfg.DefaultLockspace.MaxWaitersPerResource = 0
			cfg.DefaultLockspace.MaxLocksPerNode = 0
		})
		defer c.close()
		res := c.resourceOn(1, strings.Repeat("r", 200))
		const holders = 5000
		var locks []*Lock
		for i := range holders {
			locks = append(locks, mustLock(t, c.ls[i%2*2], res, modes.CR))
		}
		w := mustLock(t, c.ls[0], res+"-v", modes.EX)
		_ = w.SetValue(make([]byte, 64))
		if err := w.Convert(bg, modes.PR); err != nil {
			t.Fatal(err)
		}
		waiting := make(chan *Lock, 1)
		go func() { waiting <- mustLock(t, c.ls[2], res, modes.EX) }()
		synctestWait()
		c.kill(1)
		c.waitView(2, 30*time.Second)
		rs, ok := c.ls[0].masterState(res)
		if !ok {
			rs, ok = c.ls[2].masterState(res)
		}
		if !ok || len(rs.Locks) != holders+1 {
			t.Fatalf("rebuilt resource has %d locks, want %d", len(rs.Locks), holders+1)
		}
		for _, lk := range locks {
			mustUnlock(t, lk)
		}
		mustUnlock(t, <-waiting)
		mustUnlock(t, w)
	})
}

// TestRecoveryValuesAcrossManyReports: the holders of more locks than one
// report carries (value blocks copied per report, not per lock) report
// each its own value, and every moved resource comes back with it.
func TestRecoveryValuesAcrossManyReports(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, func(cfg *Config) { cfg.MaxLocks = 0 })
		defer c.close()
		const n = 3 * reportLocks / 2 // per holder: more than one report each
		var names []string
		var locks []*Lock
		for i := 0; len(names) < 2*n; i++ {
			name := fmt.Sprintf("many-%d", i)
			if c.ls[0].MasterOf(name) != c.nodes[1].Name() {
				continue
			}
			lk := mustLock(t, c.ls[len(names)%2*2], name, modes.EX)
			if err := lk.SetValue([]byte(strings.Repeat(name, 1+len(names)%3))); err != nil {
				t.Fatal(err)
			}
			if err := lk.Convert(bg, modes.PR); err != nil { // writes the value, keeps a copy above CR
				t.Fatal(err)
			}
			names, locks = append(names, name), append(locks, lk)
		}
		c.kill(1)
		c.waitView(2, 30*time.Second)
		for i, name := range names {
			rs, ok := c.ls[0].masterState(name)
			if !ok {
				rs, ok = c.ls[2].masterState(name)
			}
			want := strings.Repeat(name, 1+i%3)
			if !ok || len(rs.Locks) != 1 || string(rs.LVB.Data) != want || !rs.LVB.Valid {
				t.Fatalf("%s rebuilt as %+v (found %v), want one lock and the value %q, valid", name, rs, ok, want)
			}
		}
		for _, lk := range locks {
			mustUnlock(t, lk)
		}
	})
}

// TestTokensIncreaseAcrossWholeClusterRestart: no state survives a restart
// of every node, yet the tokens of a lock's and a semaphore's grants keep
// increasing, and stay below 2^53, because every table starts above the
// time-based floor of the moment it is made.
func TestTokensIncreaseAcrossWholeClusterRestart(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		var last, lastPermit uint64
		for run := range 3 {
			c := startMem(t, 3, nil)
			for i := range 50 {
				lk := mustLock(t, c.ls[i%3], "restarted", modes.EX)
				if lk.Token() <= last || lk.Token() >= 1<<53 {
					c.close()
					t.Fatalf("run %d: token %d after %d (must be above it and below 2^53)", run, lk.Token(), last)
				}
				last = lk.Token()
				mustUnlock(t, lk)
				p := mustPermits(t, mustSemaphore(t, c.ls[(i+1)%3], "restarted-sem", 2), 1+i%2)
				if p.Token() <= lastPermit || p.Token() >= 1<<53 {
					c.close()
					t.Fatalf("run %d: permit token %d after %d (must be above it and below 2^53)", run, p.Token(), lastPermit)
				}
				lastPermit = p.Token()
				if err := p.Release(); err != nil {
					t.Fatal(err)
				}
			}
			c.close() // every node goes; nothing is kept
		}
	})
}

func TestTokenFloorFollowsTheClock(t *testing.T) {
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	if a, b := tokenFloor(base), tokenFloor(base.Add(time.Millisecond)); b-a != 2000 {
		t.Fatalf("one millisecond moves the floor by %d, want 2000 (a token per 500 ns)", b-a)
	}
	if tokenFloor(time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC)) != 0 {
		t.Fatal("a clock before 2000 must give the zero floor")
	}
	if tokenFloor(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)) <= tokenFloor(base) {
		t.Fatal("the floor must keep growing")
	}
}

// TestTokenBound checks the bound the package documentation states: a
// table made at any time until 2076 (fifty years from now) that issues
// 100,000 tokens a second for fifty years stays below 2^53, and so does
// the floor until 2142; a table that keeps to two million a second (one per
// 500 ns) never runs ahead of the floor.
func TestTokenBound(t *testing.T) {
	const maxExact = 1 << 53
	fifty := 50 * 365.25 * 24 * time.Hour
	for year := 2026; year <= 2076; year++ {
		made := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC)
		issued := uint64(100_000 * fifty.Seconds())
		if tok := tokenFloor(made) + issued; tok >= maxExact {
			t.Fatalf("a table made in %d issuing 100,000 tokens a second reaches %d after fifty years, above 2^53", year, tok)
		}
	}
	if f := tokenFloor(time.Date(2142, 1, 1, 0, 0, 0, 0, time.UTC)); f >= maxExact {
		t.Fatalf("the floor is %d in 2142, above 2^53", f)
	}
	if f := tokenFloor(time.Date(2143, 1, 1, 0, 0, 0, 0, time.UTC)); f < maxExact {
		t.Fatalf("the floor is %d in 2143: the documented end (2142) is wrong", f)
	}
	made := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, d := range []time.Duration{time.Millisecond, time.Second, time.Hour, fifty} {
		if issued := uint64(2_000_000 * d.Seconds()); tokenFloor(made)+issued > tokenFloor(made.Add(d)) {
			t.Fatalf("two million tokens a second for %v run ahead of the floor", d)
		}
	}
}
