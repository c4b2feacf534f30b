package membership_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed-a6839e30/dlm/transport/membership"
)

// detectBound is the crash detection target of the default timing (see the
// package documentation for its derivation).
const detectBound = 2 * time.Second

func TestMembershipDetectsCrash(t *testing.T) {
	for _, n := range []int{3, 5} {
		for run := range 4 {
			t.Run("", func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					all := names(n)
					c := newCluster(t, "detect", all...)
					defer c.closeAll()
					c.waitUntil(10*time.Second, "initial convergence", all, c.converged(all))

					victim := all[run%n]
					if err := c.net.Crash(victim); err != nil {
						t.Fatal(err)
					}
					survivors := others(all, victim)
					took := c.waitUntil(detectBound, "crash detected", survivors, func(nd *mnode) bool {
						_, ok := nd.rec.alive()[victim]
						return !ok
					})
					t.Logf("n=%d: %s's crash seen by all %d survivors after %v (fake time)", n, victim, len(survivors), took)
					for _, s := range survivors {
						for _, m := range c.nodes[s].m.Members() {
							if m.Name == victim {
								t.Errorf("%s still lists %s in Members()", s, victim)
							}
						}
					}
				})
			})
		}
	}
}

// healBound is how soon after a heal every node must see one view again:
// the rejoin period (GossipToTheDeadTime/2 = 5 s) plus a TCP timeout for a
// join attempt that was under way, plus a second of gossip.
const healBound = 5*time.Second + time.Second + time.Second

func TestMembershipHealsLongPartition(t *testing.T) {
	// the offsets move the heal across the phase of the rejoin ticker
	for _, offset := range []time.Duration{0, 1300 * time.Millisecond, 2900 * time.Millisecond, 4100 * time.Millisecond, 4900 * time.Millisecond} {
		t.Run(offset.String(), func(t *testing.T) { healAfterPartition(t, offset) })
	}
}

func healAfterPartition(t *testing.T, offset time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		all := names(3)
		c := newCluster(t, "heal", all...)
		defer c.closeAll()
		c.waitUntil(10*time.Second, "initial convergence", all, c.converged(all))
		time.Sleep(offset)

		c.net.Isolate("n3")
		time.Sleep(30 * time.Second) // the partition lasts 30 s, three times GossipToTheDeadTime
		for _, s := range []string{"n1", "n2"} {
			if _, ok := c.nodes[s].rec.alive()["n3"]; ok {
				t.Fatalf("%s still sees n3 after a 30 s partition", s)
			}
		}
		if got := c.nodes["n3"].rec.alive(); len(got) != 0 {
			t.Fatalf("isolated n3 still sees %v", got)
		}
		c.net.Heal()
		took := c.waitUntil(healBound, "one view after heal", all, c.converged(all))
		t.Logf("one view on every node %v after heal (bound %v)", took, healBound)
		for _, name := range all {
			if got := len(c.nodes[name].m.Members()); got != 2 {
				t.Errorf("%s: Members() has %d nodes, want 2", name, got)
			}
		}
	})
}

// The control for the test above: without the periodic re-join, the same
// partition does not heal within the bound (memberlist trap T6), so the heal
// test measures the re-join and not luck.
func TestPartitionWithoutRejoinDoesNotHeal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		all := names(3)
		c := newClusterWith(t, "noheal", func(cfg *membership.Config) { cfg.RejoinInterval = -1 }, all...)
		defer c.closeAll()
		c.waitUntil(10*time.Second, "initial convergence", all, c.converged(all))
		c.net.Isolate("n3")
		time.Sleep(30 * time.Second)
		c.net.Heal()
		time.Sleep(3 * healBound) // well past the bound the re-join meets
		if c.converged(all)(c.nodes["n1"]) && c.converged(all)(c.nodes["n3"]) {
			t.Fatal("healed without the re-join loop: the heal test proves nothing")
		}
	})
}

func TestForeignClusterRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, "home", "a", "b")
		c.waitUntil(10*time.Second, "home cluster", []string{"a", "b"}, c.converged([]string{"a", "b"}))

		// a node of another cluster, seeded with the home cluster's nodes
		mn, err := c.net.AddNode("x")
		if err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		cfg := membership.DefaultConfig()
		cfg.Name, cfg.ClusterID, cfg.BootID, cfg.LinkAddr = "x", "elsewhere", 99, mn.LinkAddr()
		cfg.Transport, cfg.Seeds, cfg.OnEvent = mn.Transport(), c.seeds, rec.on
		x, err := membership.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.closeAll() // runs last: lets x's goroutines drain too
		defer x.Close()

		time.Sleep(20 * time.Second) // many probe, gossip, push/pull and rejoin rounds
		for _, name := range []string{"a", "b"} {
			n := c.nodes[name]
			if _, ok := n.rec.alive()["x"]; ok {
				t.Errorf("%s admitted the foreign node: %v", name, n.rec.snapshot())
			}
			for _, m := range n.m.Members() {
				if m.Name == "x" {
					t.Errorf("%s lists the foreign node", name)
				}
			}
		}
		if got := rec.snapshot(); len(got) != 0 {
			t.Errorf("foreign node saw events %v", got)
		}
		if got := x.Members(); len(got) != 0 {
			t.Errorf("foreign node lists %v", got)
		}
		refused := 0.0
		for _, name := range []string{"a", "b"} {
			refused += counterValue(t, c.nodes[name], "dlm_membership_nodes_refused_total")
		}
		if refused == 0 {
			t.Error("no refusal counted")
		}
	})
}

func TestFastRestartSeenAsNewBoot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		all := names(3)
		c := newCluster(t, "restart", all...)
		defer c.closeAll()
		c.waitUntil(10*time.Second, "initial convergence", all, c.converged(all))

		old := c.nodes["n3"]
		oldBoot := old.boot
		if err := c.net.Crash("n3"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond) // back well before the failure detector can tell
		_ = old.m.Close()
		fresh := c.restart("n3")
		c.waitUntil(5*time.Second, "new boot seen", []string{"n1", "n2"}, func(nd *mnode) bool {
			return nd.rec.alive()["n3"] == fresh.boot
		})
		for _, s := range []string{"n1", "n2"} {
			t.Logf("%s saw: %v", s, c.nodes[s].rec.snapshot()[2:])
			sawEnd := false
			for _, ev := range c.nodes[s].rec.snapshot() {
				if ev.Member.Name != "n3" {
					continue
				}
				switch {
				case ev.Kind == membership.Restart && ev.PrevBootID == oldBoot && ev.Member.BootID == fresh.boot:
					sawEnd = true
				case ev.Kind == membership.Leave && ev.Member.BootID == oldBoot:
					sawEnd = true
				case ev.Kind == membership.Update && ev.Member.BootID != oldBoot:
					t.Errorf("%s: boot change reported as a plain update: %v", s, ev)
				}
			}
			if !sawEnd {
				t.Errorf("%s: the old boot of n3 never ended: %v", s, c.nodes[s].rec.snapshot())
			}
		}
	})
}
