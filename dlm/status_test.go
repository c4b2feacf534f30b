package dlm

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
)

// masterState returns the table's own view of resource, for tests that
// look at queue internals.
func (ls *Lockspace) masterState(resource string) (master.ResourceState, bool) {
	sh := ls.shardOf(resourceHash(ls.seed, resource))
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.table.Resource(resource)
}

// TestStatusAndLockDump: a held lock with a TTL, a waiter and a converting
// lock show up in the master's lock dump with their ids, nodes, owners,
// modes, tokens, waits and TTL, and in the counts of Status on the master
// and on the holders; members' tags are visible everywhere; the dump's
// filters select by lockspace and prefix and Limit truncates.
func TestStatusAndLockDump(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, func(cfg *Config) {
			cfg.Tags = map[string]string{"admin": "http://" + cfg.Name + ".example:7948"}
		})
		defer c.close()
		res := c.resourceOn(1, "dump")
		other := c.resourceOn(1, "dumq")
		owner := c.ls[0].NewOwner()
		held, err := owner.Lock(bg, res, modes.PR, WithTTL(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer held.Unlock()
		conv := mustLock(t, c.ls[2], res, modes.PR)
		defer conv.Unlock()
		converting := convertAsync(bg, conv, modes.EX)
		waiting := lockAsync(bg, c.ls[2].NewOwner(), res, modes.EX)
		c.settle(c.queued(res, 2))
		time.Sleep(time.Second) // fake time: the queued requests have waited
		o2 := mustLock(t, c.ls[0], other, modes.EX)
		defer o2.Unlock()
		ls1, err := c.nodes[1].Lockspace("other")
		if err != nil {
			t.Fatal(err)
		}
		x := "x"
		for i := 0; ls1.MasterOf(x) != "n2"; i++ {
			x = fmt.Sprintf("x%d", i) // a resource of lockspace other that n2 masters
		}
		elsewhere := mustLock(t, ls1, x, modes.NL)
		defer elsewhere.Unlock()

		d := c.nodes[1].LockDump(DumpOptions{Lockspace: "test", Prefix: "dump"})
		if d.Node != "n2" || d.Epoch == 0 || d.Truncated || len(d.Resources) != 1 {
			t.Fatalf("dump %+v, want the one resource %s", d, res)
		}
		rd := d.Resources[0]
		if rd.Name != res || rd.Master != "n2" || rd.Lockspace != "test" || rd.Epoch != d.Epoch || !rd.Value.Valid {
			t.Fatalf("resource %+v", rd)
		}
		if len(rd.Granted) != 1 || len(rd.Converting) != 1 || len(rd.Waiting) != 1 {
			t.Fatalf("queues %+v", rd)
		}
		g := rd.Granted[0]
		if g.ID != held.ID() || g.Node != "n1" || g.Owner != owner.ID() || g.Mode != modes.PR || g.Requested != modes.PR || g.Token != held.Token() || g.Wait != 0 {
			t.Errorf("granted %+v, want lock %d of n1 owner %d PR token %d", g, held.ID(), owner.ID(), held.Token())
		}
		if g.TTL <= 8*time.Second || g.TTL > 10*time.Second {
			t.Errorf("TTL left %v, want about 9 s of 10", g.TTL)
		}
		cv := rd.Converting[0]
		if cv.ID != conv.ID() || cv.Node != "n3" || cv.Mode != modes.PR || cv.Requested != modes.EX || cv.Token != conv.Token() || cv.Wait < time.Second {
			t.Errorf("converting %+v", cv)
		}
		w := rd.Waiting[0]
		if w.Node != "n3" || w.Mode != modes.NL || w.Requested != modes.EX || w.Token != 0 || w.Wait < time.Second || w.TTL != 0 {
			t.Errorf("waiting %+v", w)
		}
		if one, ok := c.ls[1].Dump(res); !ok || len(one.Granted) != 1 || one.Granted[0].ID != held.ID() {
			t.Errorf("Lockspace.Dump: %+v %v", one, ok)
		}
		if _, ok := c.ls[0].Dump(res); ok {
			t.Error("a node that does not master the resource dumps it")
		}

		all := c.nodes[1].LockDump(DumpOptions{})
		var names []string
		for _, r := range all.Resources {
			names = append(names, r.Lockspace+"/"+r.Name)
		}
		if want := []string{"other/" + x, "test/" + res, "test/" + other}; !slices.Equal(names, want) {
			t.Errorf("full dump %v, want %v", names, want)
		}
		if lim := c.nodes[1].LockDump(DumpOptions{Limit: 2}); len(lim.Resources) != 2 || !lim.Truncated {
			t.Errorf("limit 2: %d resources, truncated %v", len(lim.Resources), lim.Truncated)
		}
		if none := c.nodes[1].LockDump(DumpOptions{Prefix: "nothing"}); len(none.Resources) != 0 || none.Truncated {
			t.Errorf("no match: %+v", none)
		}

		st := c.nodes[1].Status()
		if st.Name != "n2" || st.State != StateServing || !st.HasQuorum || st.Quorum != 2 || st.Epoch != d.Epoch || st.Coordinator == "" {
			t.Fatalf("status %+v", st)
		}
		if len(st.Members) != 3 {
			t.Fatalf("members %+v", st.Members)
		}
		for _, m := range st.Members {
			if !m.Live || !m.InView || m.BootID == 0 || m.LinkAddr == "" || m.GossipAddr == "" || m.Tags["admin"] != "http://"+m.Name+".example:7948" || m.Self != (m.Name == "n2") {
				t.Errorf("member %+v", m)
			}
		}
		lss := map[string]LockspaceStatus{}
		for _, l := range st.Lockspaces {
			lss[l.Name] = l
		}
		tl := lss["test"]
		if tl.Resources != 2 || tl.Locks != 4 || tl.Granted != 3 || tl.Converting != 1 || tl.Waiting != 1 || tl.Held != 0 || tl.Requests != 0 {
			t.Errorf("master's counts %+v", tl)
		}
		if len(tl.MostWaiters) != 1 || tl.MostWaiters[0] != (ResourceWaiters{res, 2}) {
			t.Errorf("most waiters %+v", tl.MostWaiters)
		}
		if o := lss["other"]; o.Resources != 1 || o.Held != 1 {
			t.Errorf("other lockspace %+v", o)
		}
		for i, want := range []LockspaceStatus{{Held: 2}, {}, {Held: 1, Requests: 2}} {
			var got LockspaceStatus
			for _, l := range c.nodes[i].Status().Lockspaces {
				if l.Name == "test" {
					got = l
				}
			}
			if got.Held != want.Held || got.Requests != want.Requests {
				t.Errorf("n%d: held %d, requests %d; want %d, %d", i+1, got.Held, got.Requests, want.Held, want.Requests)
			}
		}
		held.Unlock()
		if r := <-converting; r.err != nil {
			t.Fatal(r.err)
		}
		conv.Unlock()
		if r := <-waiting; r.err != nil {
			t.Fatal(r.err)
		} else {
			r.lk.Unlock()
		}
	})
}

// TestStatusRecoveriesAndQuorum: a recovery after a member dies is in the
// survivors' history with the member removed and its phases timed; the
// dead member shows as neither live nor in the view; with a second death
// the last node reports no quorum.
func TestStatusRecoveriesAndQuorum(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		first := c.nodes[0].Status()
		if len(first.Recoveries) != 1 || first.Recoveries[0].Epoch != first.Epoch || len(first.Recoveries[0].Added) != 3 {
			t.Fatalf("first view's recovery: %+v", first.Recoveries)
		}
		c.kill(2)
		c.waitView(2, 30*time.Second)
		st := c.nodes[0].Status()
		if len(st.Recoveries) != 2 {
			t.Fatalf("recoveries %+v", st.Recoveries)
		}
		r := st.Recoveries[0]
		if r.Epoch != st.Epoch || !slices.Equal(r.Removed, []string{"n3"}) || len(r.Added) != 0 || r.Total <= 0 || r.LockDelay <= 0 || r.Started.IsZero() {
			t.Errorf("latest recovery %+v", r)
		}
		if sum := r.Report + r.LockDelay + r.Barrier1 + r.Rebuild + r.Barrier2; sum > r.Total {
			t.Errorf("phases add up to %v, more than the total %v", sum, r.Total)
		}
		for _, m := range st.Members {
			if dead := m.Name == "n3"; m.Live == dead || m.InView == dead {
				t.Errorf("member %+v", m)
			}
		}
		c.kill(1)
		deadline := time.Now().Add(10 * time.Second)
		for c.nodes[0].Status().State != StateNoQuorum {
			if time.Now().After(deadline) {
				t.Fatalf("state %v 10 s after the second death", c.nodes[0].Status().State)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if st := c.nodes[0].Status(); st.HasQuorum {
			t.Errorf("no-quorum status says it has quorum: %+v", st)
		}
		nd := c.nodes[0]
		_ = nd.Close()
		if st := nd.Status(); st.State != StateClosed || st.HasQuorum {
			t.Errorf("closed node: %+v", st)
		}
		c.nodes[0] = nil
	})
}

// checkDeadlockRecords checks, after TestDeadlockMetrics's conversion
// deadlock (lock b on conv failed) and cycle (owner k's request on r2 or
// r1 failed), that n3, which masters all three resources, recorded both,
// and that the others recorded nothing.
func checkDeadlockRecords(t *testing.T, c *cluster, conv string, b *Lock, r1, r2 string, k int) {
	t.Helper()
	ds := c.nodes[2].Status().Deadlocks
	if len(ds) != 2 {
		t.Fatalf("deadlocks %+v, want the cycle and the conversion", ds)
	}
	cy, cv := ds[0], ds[1]
	if cy.Kind != DeadlockCycle || cy.Lockspace != "test" || cy.Node != []string{"n1", "n2"}[k] || cy.Resource != []string{r2, r1}[k] ||
		!strings.Contains(cy.Detail, "2 parties") || cy.At.Before(cv.At) {
		t.Errorf("cycle %+v", cy)
	}
	if cv.Kind != DeadlockConversion || cv.Resource != conv || cv.Node != "n2" || cv.Lock != b.ID() || cv.Detail == "" {
		t.Errorf("conversion %+v, want lock %d of n2 on %s", cv, b.ID(), conv)
	}
	for _, i := range []int{0, 1} {
		if n := len(c.nodes[i].Status().Deadlocks); n != 0 {
			t.Errorf("n%d, which mastered nothing deadlocked, records %d deadlocks", i+1, n)
		}
	}
}

// The history keeps the latest HistoryLen entries, newest first.
func TestHistoryBounded(t *testing.T) {
	var h history
	for i := range HistoryLen + 5 {
		h.deadlock(DeadlockRecord{Lock: uint64(i)})
	}
	_, ds := h.snapshot()
	if len(ds) != HistoryLen || ds[0].Lock != HistoryLen+4 || ds[HistoryLen-1].Lock != 5 {
		t.Fatalf("history %v", ds)
	}
}
