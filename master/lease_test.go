package master

import (
	"testing"

	"github.com/seed-a6839e30/dlm/modes"
)

// TestLeaseIdsStayBounded: a lease keeps the ids of its locks lazily, and
// however many locks come and go, it keeps at most about twice the live
// ones. A lock that moves away and back joins again without a repeat.
func TestLeaseIdsStayBounded(t *testing.T) {
	tbl := New(DefaultConfig())
	const node, session = NodeID(1), 9
	req := func(id uint64, name string) {
		t.Helper()
		if _, err := tbl.Request(Request{Resource: name, Lock: LockID{Node: node, ID: id}, Mode: modes.EX, TTL: 100, Session: session}); err != nil {
			t.Fatal(err)
		}
	}
	rel := func(id uint64) {
		t.Helper()
		if err := tbl.Release(Release{Lock: LockID{Node: node, ID: id}}); err != nil {
			t.Fatal(err)
		}
	}
	lease := func() *lease { return tbl.nodes[node].leases[session] }
	const live = 100
	for id := uint64(1); id <= live; id++ {
		req(id, "held"+string(rune('a'+id%26))+string(rune('a'+id/26)))
	}
	for id := uint64(live + 1); id <= 20_000; id++ {
		req(id, "churn")
		rel(id)
		if n := len(lease().ids); n > 2*(live+1)+8 {
			t.Fatalf("after lock %d: the lease keeps %d ids for %d live locks", id, n, live+1)
		}
	}
	// A lock dropped as its mastery moves, then rebuilt here, many times.
	for range 1000 {
		tbl.Drop("heldba")
		if err := tbl.Restore(LockState{Resource: "heldba", Lock: LockID{Node: node, ID: 1}, Queue: QueueGranted, Granted: modes.EX, Requested: modes.EX, Token: 1, TTL: 100, Session: session}); err != nil {
			t.Fatal(err)
		}
		tbl.FinishRecovery()
	}
	if n := len(lease().ids); n > 2*live+8 {
		t.Fatalf("after 1000 rebuilds: the lease keeps %d ids for %d live locks", n, live)
	}
	// Every live lock is still the lease's: it expires with it.
	tbl.Tick(tbl.Now() + 100)
	if _, locks := tbl.Len(); locks != 0 {
		t.Fatalf("%d locks outlived their session's lease", locks)
	}
	if ns := tbl.nodes[node]; ns != nil && len(ns.leases) != 0 || len(tbl.timers.h) != 0 {
		t.Fatalf("a lease or timer is left after the last lease ran out: %v", tbl.timers.h)
	}
}

// TestSessionLockKeepsNoTimer: a granted lock of a session costs its lease
// an id, not a timer, whether it was granted at once, after waiting, or
// with a timeout; a granted lock that asked with a timeout keeps none
// either once granted.
func TestSessionLockKeepsNoTimer(t *testing.T) {
	tbl := New(DefaultConfig())
	id := func(n uint64) LockID { return LockID{Node: 1, ID: n} }
	must := succeeds(t)
	must(tbl.Request(Request{Resource: "a", Lock: id(1), Mode: modes.EX, TTL: 50, Session: 3}))
	must(tbl.Request(Request{Resource: "b", Lock: id(2), Mode: modes.EX, TTL: 50, Session: 3, Timeout: 10}))
	must(tbl.Request(Request{Resource: "c", Lock: id(3), Mode: modes.EX, Timeout: 10}))
	must(tbl.Request(Request{Resource: "a", Lock: id(4), Mode: modes.EX, TTL: 50, Session: 3, Timeout: 10}))
	if err := tbl.Release(Release{Lock: id(1)}); err != nil {
		t.Fatal(err)
	}
	lease := tbl.nodes[1].leases[3]
	for n, want := range map[uint64]*timer{2: &lease.tm, 3: nil, 4: &lease.tm} {
		l := tbl.nodes[1].locks[n]
		if l.queue != QueueGranted || l.timer != want {
			t.Errorf("lock %d: queue %v, timer %p; want granted with timer %p (the lease's or none)", n, l.queue, l.timer, want)
		}
	}
	if len(tbl.timers.h) != 1 || tbl.timers.h[0] != &lease.tm {
		t.Errorf("timers in the heap: %v, want the lease's alone", tbl.timers.h)
	}
}
