package recovery

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// How soon a view follows membership's news. These tests pin down the
// waits that are not needed for safety: none of them shortens the
// lock-delay.

// waitView advances fake time, in steps of 100 µs, until m committed a view
// for which ok holds, and returns when (bounded: the test fails after
// limit).
func waitView(t *testing.T, m *Manager, limit time.Duration, ok func(View) bool) time.Time {
	t.Helper()
	end := time.Now().Add(limit)
	for !ok(m.View()) {
		if time.Now().After(end) {
			t.Fatalf("%v: no such view within %v; view %v", m, limit, m.View())
		}
		time.Sleep(100 * time.Microsecond)
	}
	return time.Now()
}

// servedCluster starts every one of names and waits until each serves.
func servedCluster(t *testing.T, names []string) *testCluster {
	c := newTestCluster(t, names, names, nil)
	for _, m := range c.ms {
		<-m.Served()
	}
	return c
}

// proposeWithoutE silences e (it crashed, and membership has not noticed)
// and has a propose a new view, which waits for e's promise.
func (c *testCluster) proposeWithoutE(t *testing.T) {
	t.Helper()
	c.net.mu.Lock()
	c.net.silent["e"] = true
	c.net.mu.Unlock()
	c.ms["a"].RequestResync()
	time.Sleep(100 * time.Millisecond)
	if !c.ms["a"].proposingNow() {
		t.Fatal("a is not proposing")
	}
}

// A proposal round waiting on a member that crashed unnoticed ends as soon
// as membership reports the member gone, and the next round, without it,
// follows at the next coordinator tick: not after ProposeTimeout and a
// back-off.
func TestProposalAbandonedWhenAMemberGoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		names := []string{"a", "b", "c", "d", "e"}
		c := servedCluster(t, names)
		defer c.close()
		c.proposeWithoutE(t) // crashed; membership has not noticed
		gone := time.Now()
		for _, n := range names[:4] {
			c.ms[n].MemberGone("e")
		}
		committed := waitView(t, c.ms["a"], 5*time.Second, func(v View) bool { return v.Epoch > 1 && !v.Has(Member{"e", c.net.boots["e"]}) })
		if d := committed.Sub(gone); d > 2*DefaultConfig().CoordinatorInterval {
			t.Fatalf("the view without e committed %v after membership reported it gone; want within two coordinator ticks (%v)", d, 2*DefaultConfig().CoordinatorInterval)
		}
	})
}

// A round ends as soon as one member could not promise, without waiting
// for the others: it needs every member's promise. With d never reachable
// and e silent, rounds follow each other at the back-off's pace (50-250 ms
// and a tick), not one per ProposeTimeout (1 s).
func TestProposalEndsAtTheFirstFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		names := []string{"a", "b", "c", "d", "e"}
		c := servedCluster(t, names)
		defer c.close()
		const many = 1000
		c.net.mu.Lock()
		c.net.silent["e"] = true                   // never answers
		c.net.connLost[[2]string{"a", "d"}] = many // can never be asked
		c.net.mu.Unlock()
		c.ms["a"].RequestResync()
		time.Sleep(time.Second)
		c.net.mu.Lock()
		rounds := (many - c.net.connLost[[2]string{"a", "d"}]) / 2 // each asks d twice
		c.net.mu.Unlock()
		if rounds < 3 {
			t.Fatalf("%d proposal rounds in 1 s; want at least 3: each should end when d cannot be asked, not wait for e", rounds)
		}
	})
}

// restart brings name back as a new boot (a new Manager under the same
// name, heard again on the network), which sees every member up; the
// others' membership is left to the test.
func (c *testCluster) restart(t *testing.T, name string, boot uint64) {
	t.Helper()
	c.ms[name].Close()
	cfg := DefaultConfig()
	cfg.Name, cfg.BootID, cfg.Members = name, boot, c.names
	h := &fakeHost{}
	m, err := New(cfg, fakeLinks{c.net, name}, h)
	if err != nil {
		t.Fatal(err)
	}
	c.net.mu.Lock()
	c.net.nodes[name], c.net.boots[name], c.net.silent[name] = m, boot, false
	c.net.mu.Unlock()
	c.ms[name], c.hosts[name] = m, h
	for _, n := range c.names {
		m.MemberAlive(n, c.net.boots[n])
	}
	m.Start()
}

// proposingNow reports whether a proposal round is under way.
func (m *Manager) proposingNow() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proposing
}

// A member restarted with a new boot is dropped from the round asking its
// old boot: the round ends at membership's news, and the next names the new
// boot.
func TestProposalAbandonedWhenAMemberRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		names := []string{"a", "b", "c", "d", "e"}
		c := servedCluster(t, names)
		defer c.close()
		c.proposeWithoutE(t)
		c.restart(t, "e", 999)
		back := time.Now()
		for _, n := range names[:4] {
			c.ms[n].MemberAlive("e", 999)
		}
		committed := waitView(t, c.ms["a"], 5*time.Second, func(v View) bool { return v.Has(Member{"e", 999}) })
		if d := committed.Sub(back); d > 2*DefaultConfig().CoordinatorInterval {
			t.Fatalf("the view with e's new boot committed %v after membership reported it; want within two coordinator ticks", d)
		}
	})
}

// A promise request whose connection broke (the member restarted, and the
// request was queued for its old boot) is asked again within the round,
// which commits, instead of failing the round and backing off.
func TestPromiseAskedAgainAfterConnectionLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		names := []string{"a", "b", "c"}
		c := servedCluster(t, names)
		defer c.close()
		c.net.mu.Lock()
		c.net.connLost[[2]string{"a", "b"}] = 1
		c.net.mu.Unlock()
		asked := time.Now()
		c.ms["a"].RequestResync()
		committed := waitView(t, c.ms["a"], 5*time.Second, func(v View) bool { return v.Epoch > 1 })
		// The resync is proposed at a's next tick; a failed round would
		// back off at least one more tick.
		if d := committed.Sub(asked); d > DefaultConfig().CoordinatorInterval+time.Millisecond {
			t.Fatalf("the view committed %v after the resync was asked; want within one coordinator tick", d)
		}
		c.net.mu.Lock()
		left := c.net.connLost[[2]string{"a", "b"}]
		c.net.mu.Unlock()
		if left != 0 {
			t.Fatal("the connection loss was not met: the test did not test")
		}
	})
}

// A node sends a heartbeat round when it commits a view, not only at its
// next tick: peers that committed acknowledge it as a member at once, and
// a node that lost its lease with the quorum serves again as soon as the
// view's recovery ends.
func TestHeartbeatAtCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		names := []string{"a", "b", "c"}
		var mu sync.Mutex
		var beats []time.Time // a's heartbeats to b
		net := newFakeNet()
		net.onSend = func(from, to string, m wire.Message) {
			if _, ok := m.(*wire.Heartbeat); ok && from == "a" && to == "b" {
				mu.Lock()
				beats = append(beats, time.Now())
				mu.Unlock()
			}
		}
		start := time.Now()
		c := startTestCluster(t, net, names, names, nil)
		defer c.close()
		committed := waitView(t, c.ms["a"], 5*time.Second, func(v View) bool { return v.Epoch == 1 })
		<-c.ms["a"].Served()
		mu.Lock()
		defer mu.Unlock()
		for _, b := range beats {
			if d := b.Sub(committed); d > -time.Millisecond && d <= 0 {
				return // sent at the commit (waitView sees it within 100 µs)
			}
		}
		t.Fatalf("a committed at +%v; its heartbeats to b went at %v: none at the commit", committed.Sub(start), offsets(beats, start))
	})
}

func offsets(ts []time.Time, from time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(from)
	}
	return out
}

// A member whose membership still reports a restarted member's old boot
// promises a view that names the new boot: the name stays in the view, and
// the new boot promised it, so no live member is dropped. Refusing would
// hold every view back until its membership caught up (a push/pull away
// when the restart's refutation did not reach it).
func TestStaleMembershipPromisesTheNewBoot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		names := []string{"a", "b", "c"}
		c := servedCluster(t, names)
		defer c.close()
		// c comes back as a new boot; a learns of it, b does not.
		c.restart(t, "c", 999)
		back := time.Now()
		c.ms["a"].MemberAlive("c", 999)
		committed := waitView(t, c.ms["b"], 5*time.Second, func(v View) bool { return v.Has(Member{"c", 999}) })
		if d := committed.Sub(back); d > 2*DefaultConfig().CoordinatorInterval {
			t.Fatalf("the view with c's new boot committed %v after the coordinator saw it, with b's membership stale; want within two coordinator ticks", d)
		}
	})
}
