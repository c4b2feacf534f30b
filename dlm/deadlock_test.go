package dlm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Deadlock detection across resources and nodes, on clusters over the
// in-process network in synctest bubbles: fake time, so the waits below
// cost nothing and the timings logged are exact.

const testDeadlockWait = 2 * time.Second

// deadlockCluster starts a 3-node cluster with the given DeadlockWait and
// hooks.
func deadlockCluster(t *testing.T, n int, wait time.Duration, mut func(*Config)) *cluster {
	t.Helper()
	return deadlockClusterWith(t, n, wait, mut, testKnobs{})
}

// deadlockClusterWith is deadlockCluster with the nodes' test-only seams
// (the detector's hooks) set.
func deadlockClusterWith(t *testing.T, n int, wait time.Duration, mut func(*Config), knobs testKnobs) *cluster {
	t.Helper()
	return startMemWith(t, n, n, func(cfg *Config) {
		cfg.DeadlockWait = wait
		if mut != nil {
			mut(cfg)
		}
	}, knobs)
}

type lockResult struct {
	lk  *Lock
	err error
	at  time.Time
}

// lockAsync takes a lock for owner o in a goroutine and delivers the
// outcome.
func lockAsync(ctx context.Context, o *Owner, res string, mode modes.Mode) <-chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		lk, err := o.Lock(ctx, res, mode)
		ch <- lockResult{lk, err, time.Now()}
	}()
	return ch
}

// mustGrant waits for a lockAsync request and fails the test unless it was
// granted; what names the request in the failure.
func mustGrant(t *testing.T, w <-chan lockResult, what string) *Lock {
	t.Helper()
	got := <-w
	if got.err != nil {
		t.Fatalf("%s: %v", what, got.err)
	}
	return got.lk
}

// convertAsync converts lk in a goroutine and delivers the outcome.
func convertAsync(ctx context.Context, lk *Lock, mode modes.Mode) <-chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		err := lk.Convert(ctx, mode)
		ch <- lockResult{lk, err, time.Now()}
	}()
	return ch
}

// firstOf waits (fake time) for the first outcome of chans, and returns its
// index; -1 after within.
func firstOf(within time.Duration, chans ...<-chan lockResult) (int, lockResult) {
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(time.After(within))}}
	for _, ch := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	i, v, _ := reflect.Select(cases)
	if i == 0 {
		return -1, lockResult{}
	}
	return i - 1, v.Interface().(lockResult)
}

// pending reports whether ch has delivered nothing yet (and consumes what
// it delivered, if anything: the callers only ask about requests that must
// still wait).
func pending(ch <-chan lockResult) bool {
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// cycleDeadlocks sums dlm_deadlocks_total{kind="cycle"} over the nodes.
func (c *cluster) cycleDeadlocks() (n float64) {
	for _, nd := range c.nodes {
		if nd == nil {
			continue
		}
		var m dto.Metric
		if err := nd.met.deadlocks[deadlockCycle].Write(&m); err != nil {
			c.t.Fatal(err)
		}
		n += m.GetCounter().GetValue()
	}
	return n
}

func (c *cluster) detectorStats() deadlockStats {
	for _, nd := range c.nodes {
		if nd != nil && detectorOf(nd.view.Load()) == nd.Name() {
			return nd.deadlocks.snapshot()
		}
	}
	c.t.Fatal("no detector")
	return deadlockStats{}
}

// The interval after DeadlockWait within which a cycle must be broken:
// reports go out every DeadlockWait/4, and a search may miss the report of
// the last node by one interval.
const deadlockSlack = testDeadlockWait // four report intervals

// Two owners on two nodes, each holding EX on a resource mastered on its
// own node and asking for the other's: exactly one is failed with
// ErrDeadlock, keeps what it holds, and once it lets go the other is
// granted.
func TestDeadlockTwoOwnersTwoNodes(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := deadlockCluster(t, 3, testDeadlockWait, nil)
		defer c.close()
		rA, rB := c.resourceOn(0, "two-a"), c.resourceOn(1, "two-b")
		oA, oB := c.ls[0].NewOwner(), c.ls[1].NewOwner()
		hA, hB := mustOwnerLock(t, oA, rA, modes.EX), mustOwnerLock(t, oB, rB, modes.EX)
		wA := lockAsync(bg, oA, rB, modes.EX)
		wB := lockAsync(bg, oB, rA, modes.EX)
		c.settle(func() bool { return c.queued(rA, 1)() && c.queued(rB, 1)() })
		formed := time.Now()

		i, r := firstOf(testDeadlockWait+deadlockSlack, wA, wB)
		if i < 0 {
			t.Fatalf("no victim within %v", testDeadlockWait+deadlockSlack)
		}
		took := r.at.Sub(formed)
		t.Logf("victim: owner %x, %v after the cycle formed (DeadlockWait %v): %v", []*Owner{oA, oB}[i].ID(), took, testDeadlockWait, r.err)
		if !errors.Is(r.err, ErrDeadlock) || !strings.Contains(r.err.Error(), "cycle") {
			t.Fatalf("first outcome: %v, want a cycle's ErrDeadlock", r.err)
		}
		if took < testDeadlockWait {
			t.Fatalf("victim after %v, before DeadlockWait", took)
		}
		// The victim is the owner with the larger id.
		if want := map[bool]int{true: 0, false: 1}[oA.ID() > oB.ID()]; i != want {
			t.Fatalf("victim %d, want the larger owner id (%d)", i, want)
		}
		other := []<-chan lockResult{wA, wB}[1-i]
		time.Sleep(2 * deadlockSlack) // fake time: no second victim, however long
		if !pending(other) || c.cycleDeadlocks() != 1 {
			t.Fatalf("the other owner's request ended too, or %v cycles counted", c.cycleDeadlocks())
		}
		victimHeld := []*Lock{hA, hB}[i]
		if victimHeld.Mode() != modes.EX || victimHeld.Err() != nil {
			t.Fatalf("the victim's held lock: %v %v, want EX kept", victimHeld.Mode(), victimHeld.Err())
		}
		mustUnlock(t, victimHeld)
		got := <-other
		if got.err != nil {
			t.Fatalf("after the victim let go: %v", got.err)
		}
		mustUnlock(t, got.lk)
		mustUnlock(t, []*Lock{hA, hB}[1-i])
		if s := c.detectorStats(); s.victims != 1 {
			t.Fatalf("detector stats %+v, want one victim", s)
		}
	})
}

func mustOwnerLock(t *testing.T, o *Owner, res string, mode modes.Mode) *Lock {
	t.Helper()
	lk, err := o.Lock(bg, res, mode)
	if err != nil {
		t.Fatalf("lock %s %v: %v", res, mode, err)
	}
	return lk
}

// A cycle of three owners on three nodes over three resources, each
// mastered on another node: exactly one victim, and the others are
// granted in turn once it lets go.
func TestDeadlockThreeOwnersThreeNodes(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := deadlockCluster(t, 3, testDeadlockWait, nil)
		defer c.close()
		res := []string{c.resourceOn(1, "three-0"), c.resourceOn(2, "three-1"), c.resourceOn(0, "three-2")}
		owners := make([]*Owner, 3)
		held := make([]*Lock, 3)
		for i := range 3 {
			owners[i] = c.ls[i].NewOwner()
			held[i] = mustOwnerLock(t, owners[i], res[i], modes.EX)
		}
		waits := make([]<-chan lockResult, 3)
		for i := range 3 { // owner i waits for owner i+1
			waits[i] = lockAsync(bg, owners[i], res[(i+1)%3], modes.PW)
		}
		c.settle(func() bool { return c.queued(res[0], 1)() && c.queued(res[1], 1)() && c.queued(res[2], 1)() })
		formed := time.Now()
		i, r := firstOf(testDeadlockWait+deadlockSlack, waits...)
		if i < 0 || !errors.Is(r.err, ErrDeadlock) {
			t.Fatalf("first outcome: %d %v, want a deadlock within %v", i, r.err, testDeadlockWait+deadlockSlack)
		}
		t.Logf("victim %d after %v: %v", i, r.at.Sub(formed), r.err)
		for j, o := range owners {
			if o.ID() > owners[i].ID() {
				t.Fatalf("victim owner %x, but owner %d (%x) is larger", owners[i].ID(), j, o.ID())
			}
		}
		time.Sleep(2 * deadlockSlack)
		for j := range 3 {
			if j != i && !pending(waits[j]) {
				t.Fatalf("owner %d's wait ended", j)
			}
		}
		// The victim lets go; the owner waiting for it is granted, lets
		// go of everything, and so on round the cycle.
		mustUnlock(t, held[i])
		for k := 1; k < 3; k++ {
			j := (i - k + 3) % 3 // owner j waited for owner j+1
			mustUnlock(t, mustGrant(t, waits[j], fmt.Sprintf("owner %d", j)))
			mustUnlock(t, held[j])
		}
		if n := c.cycleDeadlocks(); n != 1 {
			t.Fatalf("%v cycles counted, want 1", n)
		}
	})
}

// A cycle of a conversion and a new request: A and B both hold PR on r1,
// B holds EX on r2; A asks for r2 (waits for B) and B converts r1 PR->EX
// (waits for A's PR; not a conversion deadlock, A converts nothing). The
// victim is the request of the larger owner; a conversion victim keeps PR.
func TestDeadlockConversionAndRequest(t *testing.T) {
	for _, convVictim := range []bool{true, false} {
		name := map[bool]string{true: "conversion-fails", false: "request-fails"}[convVictim]
		t.Run(name, func(t *testing.T) {
			synctestRun(t, func(t *testing.T) {
				c := deadlockCluster(t, 3, testDeadlockWait, nil)
				defer c.close()
				r1, r2 := c.resourceOn(0, "mix-1"), c.resourceOn(1, "mix-2")
				o1, o2 := c.ls[1].NewOwner(), c.ls[2].NewOwner()
				// B, the converter, is the larger owner when the
				// conversion is to fail.
				oA, oB := o1, o2
				if (o2.ID() > o1.ID()) != convVictim {
					oA, oB = o2, o1
				}
				aR1 := mustOwnerLock(t, oA, r1, modes.PR)
				bR1 := mustOwnerLock(t, oB, r1, modes.PR)
				bR2 := mustOwnerLock(t, oB, r2, modes.EX)
				wA := lockAsync(bg, oA, r2, modes.PR)
				c.settle(c.queued(r2, 1))
				wB := convertAsync(bg, bR1, modes.EX)
				c.settle(c.queued(r1, 1))
				i, r := firstOf(testDeadlockWait+deadlockSlack, wA, wB)
				if i < 0 || !errors.Is(r.err, ErrDeadlock) {
					t.Fatalf("first outcome: %d %v", i, r.err)
				}
				if (i == 1) != convVictim {
					t.Fatalf("victim %d, want the conversion to fail: %v", i, convVictim)
				}
				time.Sleep(2 * deadlockSlack)
				if convVictim {
					if bR1.Mode() != modes.PR {
						t.Fatalf("failed conversion left the lock in %v, want PR", bR1.Mode())
					}
					if !pending(wA) {
						t.Fatal("A's request ended")
					}
					mustUnlock(t, bR2) // B gives up r2: A is granted
					mustUnlock(t, mustGrant(t, wA, "A"))
					mustUnlock(t, bR1)
				} else {
					if !pending(wB) {
						t.Fatal("B's conversion ended")
					}
					mustUnlock(t, aR1) // A gives up r1: B's conversion is granted
					got := <-wB
					if got.err != nil || bR1.Mode() != modes.EX {
						t.Fatalf("B's conversion: %v, mode %v", got.err, bR1.Mode())
					}
					mustUnlock(t, bR1)
					mustUnlock(t, bR2)
				}
				if convVictim {
					mustUnlock(t, aR1)
				}
			})
		})
	}
}

// A long wait chain that is not a cycle: A waits for B, B waits for C, and
// C holds on for ten times DeadlockWait. Nobody is failed; the chain
// unwinds when C lets go.
func TestDeadlockNoFalsePositiveChain(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := deadlockCluster(t, 3, testDeadlockWait, nil)
		defer c.close()
		r1, r2, r3 := c.resourceOn(0, "chain-1"), c.resourceOn(1, "chain-2"), c.resourceOn(2, "chain-3")
		oA, oB, oC := c.ls[0].NewOwner(), c.ls[1].NewOwner(), c.ls[2].NewOwner()
		a1 := mustOwnerLock(t, oA, r1, modes.EX)
		b2 := mustOwnerLock(t, oB, r2, modes.EX)
		c3 := mustOwnerLock(t, oC, r3, modes.EX)
		wA := lockAsync(bg, oA, r2, modes.EX)
		wB := lockAsync(bg, oB, r3, modes.EX)
		// Others pile up behind A's held lock too, queued ahead and behind.
		oD := c.ls[1].NewOwner()
		wD := lockAsync(bg, oD, r1, modes.PR)
		c.settle(func() bool { return c.queued(r1, 1)() && c.queued(r2, 1)() && c.queued(r3, 1)() })
		time.Sleep(10 * testDeadlockWait)
		if !pending(wA) || !pending(wB) || !pending(wD) {
			t.Fatal("a request of the chain ended")
		}
		if s := c.detectorStats(); s.cycles != 0 || s.victims != 0 || c.cycleDeadlocks() != 0 {
			t.Fatalf("detector %+v, %v deadlocks counted", s, c.cycleDeadlocks())
		}
		mustUnlock(t, c3)
		mustUnlock(t, mustGrant(t, wB, "B"))
		mustUnlock(t, b2)
		mustUnlock(t, mustGrant(t, wA, "A"))
		mustUnlock(t, a1)
		mustUnlock(t, mustGrant(t, wD, "D"))
	})
}

// A phantom: the reports show a cycle, but by the time the detector asks
// for confirmation one edge is gone (a holder let go, from another
// goroutine of its owner, right after the reports). Nobody is failed.
func TestDeadlockPhantomNotConfirmed(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		reached := make(chan struct{})
		resume := make(chan struct{})
		var once sync.Once
		c := deadlockClusterWith(t, 3, testDeadlockWait, nil, testKnobs{
			deadlockBeforeConfirm: func() {
				once.Do(func() {
					close(reached)
					<-resume
				})
			},
		})
		defer c.close()
		rA, rB := c.resourceOn(1, "ph-a"), c.resourceOn(2, "ph-b")
		oA, oB := c.ls[1].NewOwner(), c.ls[2].NewOwner()
		hA, hB := mustOwnerLock(t, oA, rA, modes.EX), mustOwnerLock(t, oB, rB, modes.EX)
		wA := lockAsync(bg, oA, rB, modes.EX)
		wB := lockAsync(bg, oB, rA, modes.EX)
		select {
		case <-reached:
		case <-time.After(testDeadlockWait + deadlockSlack):
			t.Fatal("the detector found no cycle")
		}
		// The cycle was reported. A lets go of rA now: B is granted, and
		// the edge B -> A that the reports show is gone.
		mustUnlock(t, hA)
		gB := mustGrant(t, wB, "B")
		close(resume)
		time.Sleep(2 * deadlockSlack)
		if !pending(wA) {
			t.Fatal("A's request ended")
		}
		if s := c.detectorStats(); s.victims != 0 || s.unconfirmed == 0 || c.cycleDeadlocks() != 0 {
			t.Fatalf("detector %+v, %v deadlocks counted; want the cycle unconfirmed", s, c.cycleDeadlocks())
		}
		mustUnlock(t, gB)
		mustUnlock(t, hB)
		mustUnlock(t, mustGrant(t, wA, "A"))
	})
}

// A second round that works from the reports of the first, after the
// victim was failed (as two rounds that overlap would), confirms nothing
// and fails nobody; the detector's fail message, delivered twice, fails
// nothing more either.
func TestDeadlockStaleRoundFailsNobodyMore(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		var mu sync.Mutex
		var stale map[string]*edgeReport
		var victims []victim
		var det *deadlocks
		replay, replayed := false, make(chan struct{})
		c := deadlockClusterWith(t, 3, testDeadlockWait, nil, testKnobs{
			deadlockBeforeConfirm: func() {
				mu.Lock()
				defer mu.Unlock()
				if stale == nil {
					det.mu.Lock()
					stale = map[string]*edgeReport{}
					for k, r := range det.reports {
						stale[k] = r
					}
					det.mu.Unlock()
				}
			},
			deadlockBeforeFail: func(v []victim) {
				mu.Lock()
				defer mu.Unlock()
				victims = append(victims, v...)
			},
			// The replay is made by the detector itself, between rounds and
			// just before it searches, so that no fresh report overwrites
			// the stale ones first.
			deadlockBeforeSearch: func(d *deadlocks) {
				mu.Lock()
				defer mu.Unlock()
				if d != det || !replay {
					return
				}
				replay = false
				d.reports, d.changed, d.nextSearch = stale, true, time.Time{}
				for _, r := range stale {
					r.at = time.Now()
				}
				close(replayed)
			},
		})
		defer c.close()
		for _, nd := range c.nodes {
			if detectorOf(nd.view.Load()) == nd.Name() {
				mu.Lock()
				det = nd.deadlocks
				mu.Unlock()
			}
		}
		rA, rB := c.resourceOn(0, "st-a"), c.resourceOn(2, "st-b")
		oA, oB := c.ls[1].NewOwner(), c.ls[2].NewOwner()
		hA, hB := mustOwnerLock(t, oA, rA, modes.EX), mustOwnerLock(t, oB, rB, modes.EX)
		wA := lockAsync(bg, oA, rB, modes.EX)
		wB := lockAsync(bg, oB, rA, modes.EX)
		i, r := firstOf(testDeadlockWait+deadlockSlack, wA, wB)
		if i < 0 || !errors.Is(r.err, ErrDeadlock) {
			t.Fatalf("first outcome: %d %v", i, r.err)
		}
		// Replay the first round's reports into the detector.
		mu.Lock()
		replay = true
		v := victims[0]
		mu.Unlock()
		select {
		case <-replayed:
		case <-time.After(deadlockSlack):
			t.Fatal("the detector never searched again")
		}
		time.Sleep(det.interval / 2)
		// And the fail message again, from the detector.
		fail := &wire.DeadlockFail{Epoch: c.nodes[0].epoch(), Lockspace: v.edge.Lockspace, Resource: v.edge.Resource,
			Node: v.edge.WaiterNode, Lock: v.edge.WaiterLock, Gen: v.edge.WaiterGen, Detail: "again"}
		for _, nd := range c.nodes {
			if nd.Name() == v.master {
				nd.onDeadlockFail(detectorOf(nd.view.Load()), fail)
			}
		}
		time.Sleep(2 * deadlockSlack)
		other := []<-chan lockResult{wA, wB}[1-i]
		if !pending(other) {
			t.Fatal("the other owner's request ended")
		}
		s := c.detectorStats()
		if s.victims != 1 || s.unconfirmed == 0 || c.cycleDeadlocks() != 1 {
			t.Fatalf("detector %+v, %v deadlocks counted; want 1 victim and the stale cycle unconfirmed", s, c.cycleDeadlocks())
		}
		mustUnlock(t, []*Lock{hA, hB}[i])
		got := <-other
		if got.err != nil {
			t.Fatal(got.err)
		}
		mustUnlock(t, got.lk)
		mustUnlock(t, []*Lock{hA, hB}[1-i])
	})
}

// DeadlockWait 0 turns detection off: the two-owner cycle waits until the
// contexts end.
func TestDeadlockDetectionDisabled(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := deadlockCluster(t, 3, 0, nil)
		defer c.close()
		rA, rB := c.resourceOn(0, "off-a"), c.resourceOn(1, "off-b")
		oA, oB := c.ls[0].NewOwner(), c.ls[1].NewOwner()
		hA, hB := mustOwnerLock(t, oA, rA, modes.EX), mustOwnerLock(t, oB, rB, modes.EX)
		ctx, cancel := context.WithTimeout(bg, 10*testDeadlockWait)
		defer cancel()
		start := time.Now()
		wA := lockAsync(ctx, oA, rB, modes.EX)
		wB := lockAsync(ctx, oB, rA, modes.EX)
		for _, w := range []<-chan lockResult{wA, wB} {
			r := <-w
			if !errors.Is(r.err, ErrTimeout) || r.at.Sub(start) < 10*testDeadlockWait {
				t.Fatalf("%v after %v, want ErrTimeout at the context's deadline", r.err, r.at.Sub(start))
			}
		}
		if s := c.detectorStats(); s != (deadlockStats{}) || c.cycleDeadlocks() != 0 {
			t.Fatalf("detector %+v with detection off", s)
		}
		mustUnlock(t, hA)
		mustUnlock(t, hB)
	})
}

// TestDeadlockRandomized runs random transactions: owners on every node
// take a few random locks one after the other (some PR then converted to
// EX), hold them a moment and let go; a deadlocked owner (ErrDeadlock)
// lets go of everything and starts over. Whenever the detector is about to
// fail a victim, the test stops the cluster (synctest: every goroutine
// blocked), takes every table's wait-for edges, and checks that the
// victim's request is on a cycle of that global graph: the cycle the
// detector confirmed still stands, as a deadlock does until it is broken.
// No owner may time out: every deadlock must be found. DLM_DEADLOCK_SEEDS
// runs more seeds than the default six.
func TestDeadlockRandomized(t *testing.T) {
	seeds := int64(6)
	if s, err := strconv.ParseInt(os.Getenv("DLM_DEADLOCK_SEEDS"), 10, 64); err == nil && s > 0 {
		seeds = s
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
			synctestRun(t, func(t *testing.T) { randomDeadlocks(t, seed) })
		})
	}
}

func randomDeadlocks(t *testing.T, seed int64) {
	const (
		wait         = 200 * time.Millisecond
		owners       = 6
		transactions = 12
	)
	type hooked struct {
		victims []victim
		ack     chan struct{}
	}
	hook := make(chan hooked)
	c := deadlockClusterWith(t, 3, wait, nil, testKnobs{
		deadlockBeforeFail: func(v []victim) {
			h := hooked{v, make(chan struct{})}
			hook <- h
			<-h.ack
		},
	})
	defer c.close()
	res := []string{c.resourceOn(0, "rnd-a"), c.resourceOn(1, "rnd-b"), c.resourceOn(2, "rnd-c"), c.resourceOn(0, "rnd-d")}
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	intn := func(n int) int { mu.Lock(); defer mu.Unlock(); return rng.IntN(n) }
	var deadlocked, timeouts int
	var wg sync.WaitGroup
	for i := range owners {
		ls := c.ls[i%len(c.ls)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := ls.NewOwner()
			for range transactions {
				for { // until the transaction commits
					err := randomTransaction(o, res, intn)
					if err == nil {
						break
					}
					mu.Lock()
					if errors.Is(err, ErrDeadlock) {
						deadlocked++
					} else {
						timeouts++
						t.Errorf("owner %x: %v", o.ID(), err)
					}
					mu.Unlock()
					if !errors.Is(err, ErrDeadlock) {
						return
					}
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	checked := 0
	for {
		select {
		case h := <-hook:
			synctestWait() // everyone else is blocked: the tables stand still
			g := globalWaitGraph(c)
			for _, v := range h.victims {
				if !g.onCycle(v.edge) {
					t.Errorf("victim %d/%d gen %d on %q is on no cycle of the tables now (%s)\n%s",
						v.edge.WaiterNode, v.edge.WaiterLock, v.edge.WaiterGen, v.edge.Resource, v.cycle, g)
				}
				checked++
			}
			close(h.ack)
		case <-done:
			s := c.detectorStats()
			t.Logf("seed %d: %d transactions deadlocked, %d victims checked, detector %+v", seed, deadlocked, checked, s)
			if timeouts > 0 {
				t.Fatalf("%d owners timed out: a deadlock was missed", timeouts)
			}
			return
		}
	}
}

// randomTransaction takes two or three random locks for o, one after the
// other, holds them a moment and lets go of all. On an error it lets go of
// what it holds and returns the error.
func randomTransaction(o *Owner, res []string, intn func(int) int) error {
	ctx, cancel := context.WithTimeout(bg, time.Minute) // fake time: only a missed deadlock waits that long
	defer cancel()
	var held []*Lock
	defer func() {
		for _, lk := range held {
			_ = lk.Unlock()
		}
	}()
	perm := []int{0, 1, 2, 3}
	for i := range perm {
		j := i + intn(len(perm)-i)
		perm[i], perm[j] = perm[j], perm[i]
	}
	for _, k := range perm[:2+intn(2)] {
		mode := []modes.Mode{modes.PR, modes.PW, modes.EX}[intn(3)]
		lk, err := o.Lock(ctx, res[k], mode)
		if err != nil {
			return err
		}
		held = append(held, lk)
		time.Sleep(time.Duration(intn(20)) * time.Millisecond)
		if mode == modes.PR && intn(2) == 0 {
			if err := lk.Convert(ctx, modes.EX); err != nil {
				return err
			}
		}
	}
	time.Sleep(time.Duration(intn(30)) * time.Millisecond)
	return nil
}

// waitGraph is the wait-for graph of every table of a cluster at one
// moment.
type waitGraph struct {
	edges []master.WaitEdge
}

func globalWaitGraph(c *cluster) *waitGraph {
	g := &waitGraph{}
	for _, nd := range c.nodes {
		for _, ls := range nd.lockspaceList() {
			for _, sh := range ls.shards {
				sh.mu.Lock()
				for e := range sh.table.WaitEdges() {
					g.edges = append(g.edges, e)
				}
				sh.mu.Unlock()
			}
		}
	}
	return g
}

// onCycle reports whether the request of edge e's waiter (the same lock
// and generation) still waits, and some party it waits for waits, through
// a chain of waits, for the waiter's party.
func (g *waitGraph) onCycle(e wire.WaitEdge) bool {
	victim := partyKey(e.WaiterOwner, e.WaiterNode, e.WaiterLock)
	seen := map[master.PartyKey]bool{}
	var next []master.PartyKey
	for _, x := range g.edges {
		if uint32(x.Waiter.Lock.Node) == e.WaiterNode && x.Waiter.Lock.ID == e.WaiterLock && x.WaiterGen == e.WaiterGen {
			next = append(next, x.Blocker.Key())
		}
	}
	for len(next) > 0 {
		p := next[0]
		next = next[1:]
		if p == victim {
			return true
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		for _, x := range g.edges {
			if x.Waiter.Key() == p {
				next = append(next, x.Blocker.Key())
			}
		}
	}
	return false
}

func (g *waitGraph) String() string {
	var b strings.Builder
	for _, e := range g.edges {
		fmt.Fprintf(&b, "  %q: %v(o%x) gen %d wants %v, waits for %v(o%x) %v\n", e.Resource, e.Waiter.Lock, uint64(e.Waiter.Owner), e.WaiterGen, e.Mode, e.Blocker.Lock, uint64(e.Blocker.Owner), e.Kind)
	}
	return b.String()
}

// dlm_deadlocks_total counts on the master that broke the deadlock, by
// kind, and that master's Status records each (newest first, with the
// victim and the cycle); a victim whose master is another node gets the
// cycle's description in its error all the same.
func TestDeadlockMetrics(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		regs, mut := registries(3, nil)
		c := deadlockCluster(t, 3, testDeadlockWait, mut)
		defer c.close()
		conv := c.resourceOn(2, "met-conv")
		a, b := mustLock(t, c.ls[0], conv, modes.PR), mustLock(t, c.ls[1], conv, modes.PR)
		first := convertAsync(bg, a, modes.EX)
		c.settle(c.queued(conv, 1))
		if err := b.Convert(bg, modes.EX); !errors.Is(err, ErrDeadlock) || !strings.Contains(err.Error(), "conversion") {
			t.Fatalf("conversion deadlock: %v", err)
		}
		mustUnlock(t, b)
		if r := <-first; r.err != nil {
			t.Fatal(r.err)
		}
		mustUnlock(t, a)

		r1, r2 := c.resourceOn(2, "met-1"), c.resourceOn(2, "met-2")
		oA, oB := c.ls[0].NewOwner(), c.ls[1].NewOwner()
		hA, hB := mustOwnerLock(t, oA, r1, modes.EX), mustOwnerLock(t, oB, r2, modes.EX)
		wA, wB := lockAsync(bg, oA, r2, modes.EX), lockAsync(bg, oB, r1, modes.EX)
		k, r := firstOf(testDeadlockWait+deadlockSlack, wA, wB)
		if k < 0 || !errors.Is(r.err, ErrDeadlock) || !strings.Contains(r.err.Error(), "cycle of waiting owners: 2 parties") {
			t.Fatalf("remote victim: %v", r.err)
		}
		mustUnlock(t, []*Lock{hA, hB}[k])
		got := <-[]<-chan lockResult{wA, wB}[1-k]
		if got.err != nil {
			t.Fatal(got.err)
		}
		mustUnlock(t, got.lk)
		mustUnlock(t, []*Lock{hA, hB}[1-k])
		checkDeadlockRecords(t, c, conv, b, r1, r2, k)
		for n, reg := range regs {
			want := map[string]float64{"conversion": 0, "cycle": 0}
			if n == 2 {
				want = map[string]float64{"conversion": 1, "cycle": 1}
			}
			for kind, v := range want {
				if got := metricValue(t, reg, "dlm_deadlocks_total", map[string]string{"kind": kind}); got != v {
					t.Errorf("node %d: dlm_deadlocks_total{kind=%q} = %v, want %v", n, kind, got, v)
				}
			}
		}
	})
}

// An owner that asks again for a resource it holds (not Reentrant) waits
// for itself: a cycle of one, broken like any other.
func TestDeadlockOwnerWaitsForItself(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := deadlockCluster(t, 3, testDeadlockWait, nil)
		defer c.close()
		res := c.resourceOn(1, "self")
		o := c.ls[0].NewOwner()
		held := mustOwnerLock(t, o, res, modes.EX)
		start := time.Now()
		_, err := o.Lock(bg, res, modes.PR)
		if !errors.Is(err, ErrDeadlock) || !strings.Contains(err.Error(), "1 party") {
			t.Fatalf("second lock: %v", err)
		}
		t.Logf("after %v: %v", time.Since(start), err)
		if held.Mode() != modes.EX {
			t.Fatalf("held lock in %v", held.Mode())
		}
		mustUnlock(t, held)
	})
}

// A view change in the middle: the detector (the lowest-named member) dies
// after the cycle formed and before it was found; it also masters one of
// the two resources, which moves. The new view's detector starts over from
// the new epoch's reports, and the moved resource's restored request waits
// from the rebuild (the other resource's master kept its table, and its
// request's wait): one victim, DeadlockWait after the recovery.
func TestDeadlockDetectorDiesMidway(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := deadlockCluster(t, 5, testDeadlockWait, nil)
		defer c.close()
		if detectorOf(c.nodes[0].view.Load()) != c.nodes[0].Name() {
			t.Fatal("node 0 is not the detector")
		}
		rA, rB := c.resourceOn(0, "dd-a"), c.resourceOn(2, "dd-b")
		oA, oB := c.ls[1].NewOwner(), c.ls[2].NewOwner()
		hA, hB := mustOwnerLock(t, oA, rA, modes.EX), mustOwnerLock(t, oB, rB, modes.EX)
		wA, wB := lockAsync(bg, oA, rB, modes.EX), lockAsync(bg, oB, rA, modes.EX)
		c.settle(func() bool { return c.queued(rA, 1)() && c.queued(rB, 1)() })
		formed := time.Now()
		time.Sleep(testDeadlockWait / 2)
		c.kill(0)
		took := c.waitView(4, 10*time.Second)
		rebuilt := time.Now()
		i, r := firstOf(testDeadlockWait+deadlockSlack, wA, wB)
		if i < 0 || !errors.Is(r.err, ErrDeadlock) {
			t.Fatalf("first outcome: %d %v", i, r.err)
		}
		t.Logf("view change took %v; victim %v after the cycle formed, %v after the new view", took, r.at.Sub(formed), r.at.Sub(rebuilt))
		if r.at.Sub(rebuilt) < testDeadlockWait-testDeadlockWait/4 {
			t.Fatalf("victim %v after the rebuild: the waits were not timed from it", r.at.Sub(rebuilt))
		}
		time.Sleep(2 * deadlockSlack)
		other := []<-chan lockResult{wA, wB}[1-i]
		if !pending(other) || c.cycleDeadlocks() != 1 {
			t.Fatalf("the other request ended, or %v cycles counted", c.cycleDeadlocks())
		}
		mustUnlock(t, []*Lock{hA, hB}[i])
		got := <-other
		if got.err != nil {
			t.Fatal(got.err)
		}
		mustUnlock(t, got.lk)
		mustUnlock(t, []*Lock{hA, hB}[1-i])
	})
}

// The same two-owner cycle over real loopback TCP with real time: the
// reports, confirmations and the failure travel the links, and exactly one
// owner is failed.
func TestDeadlockOverTCP(t *testing.T) {
	const wait = 300 * time.Millisecond
	c := startTCP(t, 3, func(cfg *Config) { cfg.DeadlockWait = wait })
	defer c.close()
	rA, rB := c.resourceOn(0, "tcp-a"), c.resourceOn(1, "tcp-b")
	oA, oB := c.ls[0].NewOwner(), c.ls[1].NewOwner()
	held := []*Lock{mustOwnerLock(t, oA, rA, modes.EX), mustOwnerLock(t, oB, rB, modes.EX)}
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	waits := []<-chan lockResult{lockAsync(ctx, oA, rB, modes.EX), lockAsync(ctx, oB, rA, modes.EX)}
	c.settle(func() bool { return c.queued(rA, 1)() && c.queued(rB, 1)() })
	formed := time.Now()

	i, r := firstOf(20*time.Second, waits...)
	if i < 0 {
		t.Fatal("no victim within 20s")
	}
	t.Logf("victim %d after %v (DeadlockWait %v): %v", i, time.Since(formed), wait, r.err)
	if !errors.Is(r.err, ErrDeadlock) || !strings.Contains(r.err.Error(), "cycle") {
		t.Fatalf("first outcome: %v, want a cycle's ErrDeadlock", r.err)
	}
	if !pending(waits[1-i]) {
		t.Fatal("both requests ended")
	}
	mustUnlock(t, held[i])
	mustUnlock(t, mustGrant(t, waits[1-i], "after the victim let go"))
	mustUnlock(t, held[1-i])
	if n := c.cycleDeadlocks(); n != 1 {
		t.Fatalf("%v cycles counted, want 1", n)
	}
}
