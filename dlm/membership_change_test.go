package dlm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/recovery"
)

// changeCluster starts nodes n1..n5 on memnet with the first `started`
// running, every node with a data directory, the first `initial` names the
// configured members (the later ones are configured with all five, and
// learn the cluster's configuration when they are taken in).
func changeCluster(t *testing.T, initial, started int, knobs testKnobs) *cluster {
	dir := t.TempDir()
	names := nodeNames(5)
	return startMemWith(t, 5, started, func(cfg *Config) {
		cfg.MaxLocks = 0
		cfg.DataDir = filepath.Join(dir, cfg.Name)
		if slices.Index(names, cfg.Name) < initial {
			cfg.Members = names[:initial]
		} else {
			cfg.Members = names
		}
	}, knobs)
}

// coordinator returns the index of the live node that coordinates.
func (c *cluster) coordinator() int {
	for _, nd := range c.nodes {
		if nd != nil && !nd.closed.Load() {
			return slices.Index(c.names, nd.Status().Coordinator)
		}
	}
	return -1
}

// settleMembership waits until every live node runs a configuration with
// members want, not joint, and its view holds exactly the live ones.
func (c *cluster) settleMembership(t *testing.T, want []string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok := true
		for _, nd := range c.nodes {
			if nd == nil || nd.closed.Load() {
				continue
			}
			m := nd.Membership()
			if m.Joint() || !slices.Equal(m.Members, want) || nd.State() != StateServing {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			for _, nd := range c.nodes {
				if nd != nil && !nd.closed.Load() {
					st := nd.Status()
					nd.agree.mu.Lock()
					isolated, refused := nd.agree.isolated, fmt.Sprint(nd.agree.refused)
					nd.agree.mu.Unlock()
					t.Logf("%s: %+v view %v state %s epoch %d coordinator %s lease %v isolated %q refused %s",
						nd.Name(), nd.Membership(), nd.Members(), st.State, st.Epoch, st.Coordinator, st.HasQuorum, isolated, refused)
				}
			}
			t.Fatalf("membership did not settle on %v", want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestMembershipAddRemoveReplaceAndRestart(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := changeCluster(t, 3, 3, testKnobs{})
		defer c.close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		co := c.nodes[c.coordinator()]
		if _, err := co.AddMember(ctx, "n1"); !errors.Is(err, ErrBadChange) {
			t.Errorf("adding a member twice: %v, want ErrBadChange", err)
		}
		if _, err := co.RemoveMember(ctx, "n9"); !errors.Is(err, ErrBadChange) {
			t.Errorf("removing a stranger: %v, want ErrBadChange", err)
		}
		other := c.nodes[(c.coordinator()+1)%3]
		var nc *NotCoordinatorError
		if _, err := other.AddMember(ctx, "n4"); !errors.As(err, &nc) || nc.Coordinator != co.Name() {
			t.Errorf("a change on a non-coordinator: %v, want NotCoordinatorError naming %s", err, co.Name())
		}

		// Grow 3 → 5: add, then start the new node.
		for i, name := range []string{"n4", "n5"} {
			got, err := co.AddMember(ctx, name)
			if err != nil {
				t.Fatalf("AddMember(%s): %v", name, err)
			}
			if want := c.names[:4+i]; got.Joint() || !slices.Equal(got.Members, want) || got.Version != uint64(2*(i+1)) {
				t.Fatalf("AddMember(%s) = %+v, want version %d members %v", name, got, 2*(i+1), want)
			}
			c.startNode(3 + i)
		}
		c.settleMembership(t, c.names)
		if m := co.Members(); len(m) != 5 {
			t.Fatalf("view after growing: %v", m)
		}
		lk := mustLock(t, c.ls[4], "after-grow", modes.EX)
		mustUnlock(t, lk)

		// Shrink 5 → 4: remove n5, which leaves.
		if _, err := co.RemoveMember(ctx, "n5"); err != nil {
			t.Fatal(err)
		}
		c.nodes[4].Close()
		_ = c.net.Crash("n5")
		c.nodes[4] = nil
		c.settleMembership(t, c.names[:4])

		// Replace a dead member: n3 dies, n5 (a new boot, a new host) takes
		// its place.
		dead := 2
		if dead == c.coordinator() {
			dead = 1
		}
		_ = c.net.Crash(c.names[dead])
		c.nodes[dead].Halt()
		c.nodes[dead] = nil
		co = c.nodes[c.coordinator()]
		got, err := co.ReplaceMember(ctx, c.names[dead], "n5")
		if err != nil {
			t.Fatal(err)
		}
		want := slices.DeleteFunc(slices.Clone(c.names), func(n string) bool { return n == c.names[dead] })
		if !slices.Equal(got.Members, want) {
			t.Fatalf("ReplaceMember = %+v, want %v", got, want)
		}
		c.startNode(4)
		c.settleMembership(t, want)

		// A restart comes up with the stored membership, not the list it
		// was configured with.
		r := 3 // n4, configured with all five
		_ = c.net.Crash(c.names[r])
		c.nodes[r].Halt()
		nd := c.startNode(r)
		if m := nd.Membership(); !slices.Equal(m.Members, want) {
			t.Fatalf("restarted %s runs %+v, want %v", nd.Name(), m, want)
		}
		c.settleMembership(t, want)
		lk = mustLock(t, c.ls[r], "after-restart", modes.EX)
		mustUnlock(t, lk)
	})
}

func TestStoredMembershipIsRead(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Name, cfg.Members, cfg.ClusterID, cfg.DataDir = "a", []string{"a"}, "test", dir
	if err := writeTestState(dir, `{"version": 4, "members": ["a", "b"]}`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	// a alone is not a quorum of {a, b}: Start times out, and says so.
	if _, err := Start(ctx, cfg); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start with a stored configuration of two: %v", err)
	}
	if err := writeTestState(dir, `{"version": 4, "members": ["b", "a"]}`); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(context.Background(), cfg); !errors.Is(err, recovery.ErrBadState) {
		t.Fatalf("Start with a bad state file: %v, want ErrBadState", err)
	}
}

// changeScenario runs a membership change under load with the nemesis's
// clients on every serving node, and checks the history.
type changeScenario struct {
	initial, started int
	knobs            testKnobs
	run              func(t *testing.T, n *nemesis, seed uint64)
	// liveness: after the heal every client of a running node must take
	// a lock again within livenessBound (not for the two-at-once runs,
	// whose odd nodes never serve).
	liveness bool
}

func runChange(t *testing.T, seed uint64, sc changeScenario) check.Result {
	var res check.Result
	synctestRun(t, func(t *testing.T) {
		c := changeCluster(t, sc.initial, sc.started, sc.knobs)
		n := &nemesis{
			t: t, c: c, h: check.NewHistory(time.Now), rng: rand.New(rand.NewPCG(seed, 0x6e656d65)),
			store: &fencedStore{highest: map[string]uint64{}}, resources: []string{"hot-a", "hot-b", "hot-c"},
			dead: map[int]bool{}, pause: map[int]bool{}, progress: map[int]time.Time{}, stop: make(chan struct{}),
			clients: map[int][]int{}, caches: map[*Lockspace]*Cache{},
		}
		finished := false
		defer func() {
			// A t.Fatal in the scenario (a change that never settles):
			// stop the clients and the nodes, so that the bubble ends
			// and the next seed runs, instead of synctest's panic about
			// the goroutines left blocked taking the whole run down.
			if !finished {
				n.heal()
				close(n.stop)
				n.wg.Wait()
				c.close()
			}
		}()
		for node := range 5 {
			if node >= sc.started {
				n.mu.Lock()
				n.dead[node] = true
				n.mu.Unlock()
				continue
			}
			for k := range 2 {
				n.startClient(node*2+k, node, seed)
			}
		}
		time.Sleep(2 * time.Second)
		sc.run(t, n, seed)
		n.heal()
		if sc.liveness {
			healed := time.Now()
			time.Sleep(livenessBound)
			n.checkLiveness(healed, nemesisOpts{nodes: 5})
		} else {
			time.Sleep(5 * time.Second)
		}
		close(n.stop)
		n.wg.Wait()
		res = check.Check(n.h, check.Options{MaxSteps: 2_000_000})
		c.close()
		finished = true
	})
	reportScenario(t, res)
	return res
}

// change runs f (a membership change on the coordinator) in the
// background, and when the coordinator has stored the joint configuration
// (or after a seeded moment, if first), calls mid.
func (n *nemesis) change(t *testing.T, seed uint64, f func(ctx context.Context, co *Node) error, mid func(co int)) {
	var co int
	var nd *Node
	var start uint64
	done := make(chan error, 1)
	var nc *NotCoordinatorError
	for try := 0; ; try++ {
		// The coordinator named by the view may be handing over to a
		// lower-named node that just came up: ask again after a moment.
		if co = n.c.coordinator(); nc != nil {
			co = slices.Index(n.c.names, nc.Coordinator)
		}
		nd = n.node(co)
		start = nd.Membership().Version
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			done <- f(ctx, nd)
		}()
		select {
		case err := <-done:
			if errors.As(err, &nc) && try < 50 {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			if err != nil {
				t.Fatalf("the change ended before it began: %v", err)
			}
			done <- nil
		case <-time.After(5 * time.Millisecond):
		}
		break
	}
	// Into the change: the joint step stored, or a little later.
	wait := time.Duration(seed%3) * 20 * time.Millisecond // the joint step takes about 50 ms here
	for nd.Membership().Version == start {
		select {
		case err := <-done:
			if errors.Is(err, ErrNotCoordinator) {
				n.change(t, seed, f, mid) // handed over before it began: again
				return
			}
			if err != nil {
				t.Fatalf("the change ended before it began: %v", err)
			}
			done <- nil
		case <-time.After(10 * time.Millisecond):
		}
	}
	time.Sleep(wait)
	mid(co)
	<-done // an error is expected if the coordinator was killed
}

// restartLater restarts a killed node after a while, with clients.
func (n *nemesis) restartLater(i int, seed uint64) {
	time.Sleep(3 * time.Second)
	n.restart(i, seed, 2)
}

// changeSeeds is how many seeds each membership scenario runs: 2 (CI's
// budget), or DLM_CHANGE_SEEDS for a long run (docs/NEMESIS.md); they
// start at nemesisFirstSeed().
func changeSeeds() int {
	if s, err := strconv.Atoi(os.Getenv("DLM_CHANGE_SEEDS")); err == nil && s > 0 {
		return s
	}
	return min(nemesisSeeds(), 2)
}

func changeTest(t *testing.T, sc changeScenario) {
	sc.liveness = true
	for s := range changeSeeds() {
		seed := nemesisFirstSeed() + uint64(s)
		t.Run("seed="+itoa(seed), func(t *testing.T) {
			res := runChange(t, seed, sc)
			if !res.OK || res.Stats.Grants == 0 {
				t.Fatalf("seed %d: %v", seed, res)
			}
			t.Logf("seed %d: %v", seed, res)
		})
	}
}

func itoa(u uint64) string { return strconv.FormatUint(u, 10) }

func writeTestState(dir, text string) error {
	return os.WriteFile(filepath.Join(dir, recovery.StateFile), []byte(text), 0o600)
}

// Grow 3 → 5 under load: the coordinator is killed in the middle of the
// first add, the joining node in the middle of the second.
func TestNemesisGrowKillCoordinator(t *testing.T) {
	changeTest(t, changeScenario{initial: 3, started: 3, run: func(t *testing.T, n *nemesis, seed uint64) {
		n.change(t, seed, func(ctx context.Context, co *Node) error { _, err := co.AddMember(ctx, "n4"); return err },
			func(co int) {
				n.kill(co)
				n.restart(3, seed, 2) // the new node starts; with it the joint step has a majority of both
				n.restartLater(co, seed)
			})
		n.c.settleMembership(t, n.c.names[:4])
		n.change(t, seed, func(ctx context.Context, co *Node) error {
			_, err := co.AddMember(ctx, "n5")
			return err
		}, func(int) {
			n.restart(4, seed, 2)
			time.Sleep(time.Duration(seed%3) * 200 * time.Millisecond)
			n.kill(4) // the joining node dies in the middle
			n.restartLater(4, seed)
		})
		n.c.settleMembership(t, n.c.names)
	}})
}

// Shrink 5 → 3 under load, the coordinator killed in the middle of the
// first removal.
func TestNemesisShrinkKillCoordinator(t *testing.T) {
	changeTest(t, changeScenario{initial: 5, started: 5, run: func(t *testing.T, n *nemesis, seed uint64) {
		n.change(t, seed, func(ctx context.Context, co *Node) error { _, err := co.RemoveMember(ctx, "n5"); return err },
			func(co int) {
				n.kill(co)
				if co != 4 {
					n.restartLater(co, seed)
				}
			})
		if nd := n.node(4); nd != nil && !nd.closed.Load() {
			n.kill(4) // removed: decommissioned
		}
		n.c.settleMembership(t, n.c.names[:4])
		n.change(t, seed, func(ctx context.Context, co *Node) error { _, err := co.RemoveMember(ctx, "n4"); return err },
			func(int) {})
		if nd := n.node(3); nd != nil && !nd.closed.Load() {
			n.kill(3)
		}
		n.c.settleMembership(t, n.c.names[:3])
	}})
}

// Replace a dead member under load, the coordinator killed in the middle.
func TestNemesisReplaceDeadMember(t *testing.T) {
	changeTest(t, changeScenario{initial: 3, started: 3, run: func(t *testing.T, n *nemesis, seed uint64) {
		co := n.c.coordinator()
		dead := (co + 1 + int(seed%2)) % 3
		n.kill(dead)
		time.Sleep(3 * time.Second) // the dead member is out of the view
		want := slices.DeleteFunc(slices.Clone(n.c.names[:3]), func(s string) bool { return s == n.c.names[dead] })
		want = append(want, "n4")
		n.change(t, seed, func(ctx context.Context, co *Node) error {
			_, err := co.ReplaceMember(ctx, n.c.names[dead], "n4")
			return err
		}, func(co int) {
			n.restart(3, seed, 2) // the new host
			n.kill(co)
			n.restartLater(co, seed)
		})
		slices.Sort(want)
		n.c.settleMembership(t, want)
	}})
}

// The coordinator removes itself under load (decommissioning its host),
// and on odd seeds another member is killed in the middle of the change
// and restarted later. The removed node is left out of every view while
// it still runs, with its clients: what they held is re-granted only
// after the lock-delay. Then it is stopped.
func TestNemesisRemoveCoordinatorItself(t *testing.T) {
	changeTest(t, changeScenario{initial: 5, started: 5, run: func(t *testing.T, n *nemesis, seed uint64) {
		var removed int
		n.change(t, seed, func(ctx context.Context, co *Node) error {
			_, err := co.RemoveMember(ctx, co.Name())
			return err
		}, func(co int) {
			removed = co
			if seed%2 == 1 {
				other := (co + 1 + int(seed%4)) % 5
				n.kill(other)
				n.restartLater(other, seed)
			}
		})
		time.Sleep(3 * time.Second) // the removed node runs on, out of the views
		n.kill(removed)
		want := slices.DeleteFunc(slices.Clone(n.c.names), func(s string) bool { return s == n.c.names[removed] })
		n.c.settleMembership(t, want)
	}})
}

// The control: a change of two members at once straight from the old set
// to the new (no joint step), while the old set's majority is cut off from
// the new set's: the two sides serve at once, and the checker catches it.
// With the joint step the same change cannot be agreed (the coordinator's
// side has no majority of the old set) and nothing is granted twice.
func runTwoAtOnce(t *testing.T, seed uint64, noJoint bool) check.Result {
	return runChange(t, seed, changeScenario{initial: 3, started: 3,
		knobs: testKnobs{noJointConsensus: noJoint, noAgreement: true},
		run: func(t *testing.T, n *nemesis, seed uint64) {
			co := n.c.coordinator()
			a, b := (co+1)%3, (co+2)%3
			for _, far := range []int{a, b} {
				for _, near := range []int{co, 3, 4} {
					n.c.net.Partition(n.c.names[far], n.c.names[near])
				}
			}
			time.Sleep(4 * time.Second) // a and b agree a view of their own
			for _, i := range []int{3, 4} {
				started := n.c.startOdd(i, func(cfg *Config) { cfg.Members = []string{n.c.names[co], "n4", "n5"} }, n.c.knobs)
				go func() {
					if <-started == nil {
						n.mu.Lock()
						n.dead[i] = false
						n.mu.Unlock()
						n.startClient(100+2*i, i, seed)
					}
				}()
			}
			time.Sleep(time.Second)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _ = n.node(co).rec.ChangeMembers(ctx, []string{n.c.names[co], "n4", "n5"})
			time.Sleep(6 * time.Second)
		}})
}

func TestTwoAtOnceWithJointConsensusIsSafe(t *testing.T) {
	for s := range changeSeeds() {
		seed := nemesisFirstSeed() + uint64(s)
		if res := runTwoAtOnce(t, seed, false); !res.OK {
			t.Errorf("seed %d: %v", seed, res)
		}
	}
}

func TestControlWithoutJointConsensusIsCaught(t *testing.T) {
	caught := 0
	for s := range changeSeeds() {
		seed := nemesisFirstSeed() + uint64(s)
		res := runTwoAtOnce(t, seed, true)
		if len(res.Violations) > 0 {
			caught++
			t.Logf("seed %d: caught: %v", seed, res.Violations[0])
		}
	}
	if caught == 0 {
		t.Fatal("no change without the joint step was reported unsafe: the test cannot fail")
	}
}

// The coordinator removes itself: the call returns once the cluster runs
// the new set (which this node, out of it, never serves), and the others
// serve it.
func TestRemoveCoordinatorItself(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := changeCluster(t, 3, 3, testKnobs{})
		defer c.close()
		co := c.coordinator()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		want := slices.DeleteFunc(slices.Clone(c.names[:3]), func(n string) bool { return n == c.names[co] })
		got, err := c.nodes[co].RemoveMember(ctx, c.names[co])
		if err != nil {
			t.Fatalf("the coordinator removing itself: %v", err)
		}
		if got.Joint() || !slices.Equal(got.Members, want) || got.Version != 2 {
			t.Fatalf("RemoveMember(itself) = %+v, want version 2 of %v", got, want)
		}
		others := []int{(co + 1) % 3, (co + 2) % 3}
		deadline := time.Now().Add(30 * time.Second)
		for _, i := range others {
			for nd := c.nodes[i]; nd.State() != StateServing || !slices.Equal(nd.Membership().Members, want); {
				if time.Now().After(deadline) {
					t.Fatalf("%s: %s, %+v", nd.Name(), nd.State(), nd.Membership())
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		// The removed node still runs, out of every view: the others name
		// one of themselves as the coordinator, not the node that made
		// their view.
		for _, i := range others {
			if got := c.nodes[i].Status().Coordinator; !slices.Contains(want, got) {
				t.Errorf("%s names %q as the coordinator, want one of %v", c.names[i], got, want)
			}
		}
		// The view without it recovers: locks on resources that moved
		// with it are granted.
		for _, i := range others {
			for k := range 8 {
				lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				lk, err := c.ls[i].Lock(lctx, "after-removal-"+strconv.Itoa(k), modes.EX)
				cancel()
				if err != nil {
					t.Fatalf("%s: a lock after the coordinator removed itself: %v", c.names[i], err)
				}
				mustUnlock(t, lk)
			}
		}
		c.nodes[co].Close()
		c.nodes[co] = nil
		c.settleMembership(t, want)
	})
}
