package dlm

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// TestValueNotValidAfterMasterLoss: an EX holder writes the value and
// converts down (or unlocks); the master dies; the resource is rebuilt at a
// new master from survivors that hold it only in NL or CR, none of whom has
// a copy it may vouch for: the next grant that reads the value says it is
// not valid, never valid and empty.
func TestValueNotValidAfterMasterLoss(t *testing.T) {
	for _, down := range []string{"NL", "CR", "unlock"} {
		t.Run(down, func(t *testing.T) {
			synctestRun(t, func(t *testing.T) {
				c := startMem(t, 3, nil)
				defer c.close()
				res := c.resourceOn(1, "vl")
				keep := mustLock(t, c.ls[2], res, modes.NL)
				w := mustLock(t, c.ls[0], res, modes.EX)
				_ = w.SetValue([]byte("five"))
				var err error
				switch down {
				case "NL":
					err = w.Convert(bg, modes.NL)
				case "CR":
					err = w.Convert(bg, modes.CR)
				default:
					err = w.Unlock()
				}
				if err != nil {
					t.Fatal(err)
				}
				c.kill(1)
				c.waitView(2, 10*time.Second)
				if down == "CR" {
					mustUnlock(t, w) // the EX below waits for no one
				}
				ctx, cancel := context.WithTimeout(bg, 20*time.Second)
				defer cancel()
				if err := keep.Convert(ctx, modes.EX); err != nil {
					t.Fatal(err)
				}
				if v, ok := keep.Value(); ok {
					t.Fatalf("value after its master died with no holder above CR: %q, reported valid", v)
				}
				mustUnlock(t, keep)
			})
		})
	}
}

// TestDroppedStateKeepsReportsOfTheNextView: reports for a view this node
// has not installed yet (the others installed it first and reported their
// locks on what it masters there) survive the node dropping its own lock
// state on installing that view, as a node that missed a view (a zombie)
// does, or on being evicted: the rebuild needs them, or the locks they
// carry are lost at their master while their holders still believe in
// them, and the resource, recreated, hands out an empty value as valid.
func TestDroppedStateKeepsReportsOfTheNextView(t *testing.T) {
	for _, how := range []string{"zombie", "evicted"} {
		t.Run(how, func(t *testing.T) {
			synctestRun(t, func(t *testing.T) {
				c := startMem(t, 3, nil)
				defer c.close()
				nd := c.nodes[1]
				next := nd.epoch() + 1
				nd.acceptReport(c.nodes[2].Name(), &wire.LockReport{Epoch: next, Lockspace: "test", Locks: []wire.ReportedLock{
					{Resource: "counter", Lock: 7, Queue: wire.QueueGranted, Granted: modes.NL, Requested: modes.NL, Token: 3},
				}})
				why := errors.New("test: state dropped")
				if how == "zombie" {
					nd.dropLockState(why)
				} else {
					recoveryHost{nd}.LeaseLost(true)
				}
				rs := &nd.recov
				rs.mu.Lock()
				defer rs.mu.Unlock()
				buf := rs.bufLocked(next)
				if buf == nil {
					t.Fatalf("the reports of epoch %d were dropped with the node's own state", next)
				}
				sp := buf.spaces["test"]
				if sp == nil || sp.nlocks != 1 || sp.locks[0][0].Resource != "counter" {
					t.Fatalf("reports of epoch %d after the drop: %+v", next, sp)
				}
			})
		})
	}
}

// TestZombieMasterRebuildsFromEarlyReports: a member that missed a view the
// others went through (its Prepare failed while theirs succeeded) is a
// zombie in the next view and drops all of its lock state as it installs
// it; the others, having installed that view first, have already reported
// their locks on what it masters. Those reports must survive the drop: the
// resource is rebuilt from them, its holders keep their locks, and its
// value, which no holder above CR vouches for, is not valid (without that,
// the resource was gone at its master and came back as a new one, with an
// empty value reported valid). The views that follow a member's return
// depend on timing, so a run in which the zombie's Suspend did not come
// after both reports is tried again, up to five times.
func TestZombieMasterRebuildsFromEarlyReports(t *testing.T) {
	untilRealized(t, zombieRebuild, "the zombie installed the view before both reports came", "the zombie never installed its view after the reports")
}

// untilRealized runs a synctest scenario that timing may not give, up to
// five times, until run reports that it did; again and never say why not.
func untilRealized(t *testing.T, run func(*testing.T) bool, again, never string) {
	t.Helper()
	for attempt := range 5 {
		var realized bool
		synctestRun(t, func(t *testing.T) { realized = run(t) })
		if realized || t.Failed() {
			return
		}
		t.Logf("attempt %d: %s; again", attempt+1, again)
	}
	t.Fatalf("in five attempts %s", never)
}

// missViewAndReturn makes node b miss the view that removes node d, which
// nodes a and cc install (b's Prepare of that view fails, once the others
// have its Mastery, until the next view aborts it), then starts d again
// and waits until all four members are in a view. With leftOut, b also
// forgets that it prepared the view, as a node left out of it knows
// nothing of it (one that promised another proposal of that epoch, say):
// the others' lock state lists the view and b's does not, and b installs
// the next view as a zombie. Without, b lists the view as aborted and
// keeps its locks.
func missViewAndReturn(t *testing.T, c *cluster, a, b, cc, d int, leftOut bool) {
	t.Helper()
	missed := c.nodes[b].epoch() + 1
	rs := &c.nodes[b].recov
	rs.mu.Lock()
	rs.afterMastery = func(ctx context.Context, epoch uint64) error {
		if epoch != missed {
			return nil
		}
		<-ctx.Done() // until the next view aborts this recovery
		if leftOut {
			rs.mu.Lock()
			rs.mine.prepared = wire.ViewRef{}
			rs.mu.Unlock()
		}
		return ctx.Err()
	}
	rs.mu.Unlock()
	c.kill(d)
	for c.nodes[a].epoch() < missed || c.nodes[cc].epoch() < missed {
		time.Sleep(10 * time.Millisecond) // fake time: a and c install the view b misses
	}
	started := make(chan error, 1)
	go func() { started <- startNodeErr(c, d) }()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	c.waitView(4, 30*time.Second)
}

// zombieRebuild runs the scenario once; false if the timing did not give
// it (b installed the view before a's and c's reports were in).
func zombieRebuild(t *testing.T) bool {
	c := startMem(t, 4, nil)
	defer c.close()
	const a, b, cc, d = 0, 1, 2, 3 // b masters the resource; d goes and comes back
	res := c.resourceOn(b, "zombie")
	keep := mustLock(t, c.ls[a], res, modes.NL)
	w := mustLock(t, c.ls[cc], res, modes.EX)
	_ = w.SetValue([]byte("five"))
	if err := w.Convert(bg, modes.NL); err != nil {
		t.Fatal(err)
	}
	nb := c.nodes[b]
	missed := nb.epoch() + 1 // the view without d: b misses it
	rs := &nb.recov
	reportsIn := func(epoch uint64) int {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		n := 0
		if buf := rs.bufLocked(epoch); buf != nil {
			if sp := buf.spaces["test"]; sp != nil {
				for _, report := range sp.locks {
					for _, l := range report {
						if l.Resource == res {
							n++
						}
					}
				}
			}
		}
		return n
	}
	var realized, held bool // under rs.mu
	rs.mu.Lock()
	rs.beforeSuspend = func(epoch uint64) {
		rs.mu.Lock()
		first := epoch > missed && !held
		held = held || first
		rs.mu.Unlock()
		if !first {
			return
		}
		// b's first Suspend after the view it missed waits for a's and
		// c's reports.
		for range 200 {
			if reportsIn(epoch) == 2 {
				rs.mu.Lock()
				realized = true
				rs.mu.Unlock()
				return
			}
			time.Sleep(10 * time.Millisecond) // fake time
		}
	}
	rs.mu.Unlock()
	missViewAndReturn(t, c, a, b, cc, d, true)
	rs.mu.Lock()
	ok := realized
	rs.mu.Unlock()
	if !ok {
		return false
	}

	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	lk, err := c.ls[d].Lock(ctx, res, modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := lk.Value(); ok {
		t.Fatalf("value after the rebuild from NL locks only: %q, reported valid", v)
	}
	dump, err := c.ls[d].Describe(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	if dump.Master != nb.Name() || len(dump.Granted) != 3 {
		t.Fatalf("after the zombie's rebuild: master %s, granted %+v (want the NL locks of %s and %s, and the EX)", dump.Master, dump.Granted, c.nodes[a].Name(), c.nodes[cc].Name())
	}
	mustUnlock(t, lk)
	select {
	case <-keep.Lost():
		t.Fatalf("a's lock lost: %v", keep.Err())
	default:
	}
	mustUnlock(t, keep)
	mustUnlock(t, w)
	return true
}

// startNodeErr is cluster.startNode for a goroutine other than the test's:
// it returns its error instead of failing the test.
func startNodeErr(c *cluster, i int) error {
	mn, err := c.net.AddNode(c.names[i])
	if err != nil {
		return err
	}
	cfg := DefaultConfig()
	cfg.Name, cfg.ClusterID = c.names[i], "test"
	c.memConfig(&cfg, mn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nd, err := start(ctx, cfg, c.knobs)
	if err != nil {
		return err
	}
	ls, err := nd.Lockspace("test")
	if err != nil {
		return err
	}
	c.nodes[i], c.ls[i] = nd, ls
	return nil
}

// TestZombieServesNothingOnceItDropsItsState: a member that missed a view
// drops its lock state when it installs the next one; a request made on
// it at that moment, for a resource it mastered in the view it still
// routes by, is not granted by its emptied table (the resource's master
// in the new view may grant it to another), but waits for the recovery.
func TestZombieServesNothingOnceItDropsItsState(t *testing.T) {
	untilRealized(t, zombieRequest, "the node did not install a view as a zombie", "the node never dropped its state as a zombie")
}

// zombieRequest runs the scenario once; false if b did not turn zombie.
func zombieRequest(t *testing.T) bool {
	c := startMem(t, 4, nil)
	defer c.close()
	const a, b, cc, d = 0, 1, 2, 3 // b masters the resource and misses a view; d goes and comes back
	res := c.resourceOn(b, "zombie-request")
	rs := &c.nodes[b].recov
	var (
		hookMu  sync.Mutex
		ran     bool
		granted *Lock
		tryErr  error
	)
	rs.mu.Lock()
	rs.afterZombieDrop = func(uint64) {
		ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
		defer cancel()
		lk, err := c.ls[b].TryLock(ctx, res, modes.EX)
		hookMu.Lock()
		ran, granted, tryErr = true, lk, err
		hookMu.Unlock()
	}
	rs.mu.Unlock()
	missViewAndReturn(t, c, a, b, cc, d, true)
	hookMu.Lock()
	defer hookMu.Unlock()
	if !ran {
		return false
	}
	if granted != nil {
		t.Errorf("the zombie granted EX on %s from its emptied table (token %d) before installing the view", res, granted.Token())
		_ = granted.Unlock()
	} else if tryErr == nil {
		t.Error("the try returned neither a lock nor an error")
	}
	return true
}

// TestHandoffFromAnUnresumedViewIsNotValid: a node gives up a resource as a
// member returns, keeping a snapshot of it (value included) for its new
// master, and reports its rebuild done; the others resume the view, and the
// returned member serves the resource, whose value is written again; a
// newer view comes before this node's own Resume (which would have dropped
// the snapshot), here because the member dies again and the resource moves
// back to it. No survivor holds the resource above CR, so the old snapshot
// is the only copy offered: the rebuilt value must be not valid, never the
// value from before the writes, served as valid.
func TestHandoffFromAnUnresumedViewIsNotValid(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 4, nil)
		defer c.close()
		const n = 3 // masters the resource while a member
		res := c.resourceOn(n, "handoff")
		c.kill(n)
		c.waitView(3, 10*time.Second)
		a := slices.IndexFunc(c.nodes, func(nd *Node) bool { return nd != nil && nd.Name() == c.ls[0].MasterOf(res) })
		k := (a + 1) % 3 // neither master: holds the locks
		keep := mustLock(t, c.ls[k], res, modes.NL)
		w := mustLock(t, c.ls[k], res, modes.NL)
		write := func(v string) {
			t.Helper()
			ctx, cancel := context.WithTimeout(bg, 20*time.Second)
			defer cancel()
			if err := w.Convert(ctx, modes.EX); err != nil {
				t.Fatal(err)
			}
			if err := w.SetValue([]byte(v)); err != nil {
				t.Fatal(err)
			}
			if err := w.Convert(ctx, modes.NL); err != nil {
				t.Fatal(err)
			}
		}
		write("one") // at a
		// The snapshots a keeps as it rebuilds the view n returns in are
		// what it would still hold, had that view's Resume never come.
		rs := &c.nodes[a].recov
		var kept map[string]*spaceSnapshot
		rs.mu.Lock()
		rs.beforeRebuild = func(uint64) {
			rs.mu.Lock()
			defer rs.mu.Unlock()
			if kept == nil {
				kept = rs.handoff
			}
		}
		rs.mu.Unlock()
		c.startNode(n)
		c.waitView(4, 30*time.Second)
		if m := c.ls[k].MasterOf(res); m != c.nodes[n].Name() {
			t.Fatalf("%s is mastered by %s after %s returned", res, m, c.nodes[n].Name())
		}
		write("two") // at n
		rs.mu.Lock()
		rs.beforeRebuild = nil
		if kept == nil {
			rs.mu.Unlock()
			t.Fatalf("%s kept no snapshot of what it gave up", c.nodes[a].Name())
		}
		rs.handoff = kept
		rs.mu.Unlock()
		c.kill(n)
		c.waitView(3, 10*time.Second)
		ctx, cancel := context.WithTimeout(bg, 20*time.Second)
		defer cancel()
		if err := w.Convert(ctx, modes.EX); err != nil {
			t.Fatal(err)
		}
		if v, ok := w.Value(); ok {
			t.Fatalf("value rebuilt from NL locks and a snapshot from before the last write: %q, reported valid (the last write was \"two\")", v)
		}
		mustUnlock(t, w)
		mustUnlock(t, keep)
	})
}

// TestDownConversionInFlightDoesNotVouchForTheValue: an EX holder writes
// the value and converts down to NL; the master grants that, and the EX
// waiting behind it, whose holder writes the value again and converts down
// in turn, before the first holder has its answer; the master dies then,
// with that answer. The first holder still reports its lock converting
// from EX with its own write: the only copy any survivor offers, and a
// stale one. The rebuilt value must be not valid, never the first write,
// valid.
func TestDownConversionInFlightDoesNotVouchForTheValue(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		const m, h = 0, 1 // m masters the resource; h holds it first
		res := c.resourceOn(m, "inflight")
		first := mustLock(t, c.ls[h], res, modes.EX)
		second := make(chan *Lock, 1)
		go func() {
			lk, err := c.ls[m].Lock(bg, res, modes.EX) // local to its master
			if err != nil {
				t.Error(err)
				second <- nil
				return
			}
			if err := lk.SetValue([]byte("two")); err != nil {
				t.Error(err)
			}
			if err := lk.Convert(bg, modes.NL); err != nil {
				t.Error(err)
			}
			second <- lk
		}()
		c.settle(c.queued(res, 1))
		// Every stream write now takes 50 ms: h's conversion reaches the
		// master, the master's answer is on its way back when the second
		// holder, local to the master, is done.
		c.net.SetStreamDelay(50 * time.Millisecond)
		if err := first.SetValue([]byte("one")); err != nil {
			t.Fatal(err)
		}
		down := make(chan error, 1)
		go func() { down <- first.Convert(bg, modes.NL) }()
		if <-second == nil {
			return
		}
		c.kill(m)
		c.net.SetStreamDelay(0)
		select {
		case err := <-down:
			t.Fatalf("the down-conversion was answered before its master died (%v): the scenario did not happen", err)
		default:
		}
		c.waitView(2, 10*time.Second)
		if err := <-down; err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(bg, 20*time.Second)
		defer cancel()
		if err := first.Convert(ctx, modes.EX); err != nil {
			t.Fatal(err)
		}
		if v, ok := first.Value(); ok {
			t.Fatalf("value rebuilt from a down-conversion in flight: %q, reported valid (the last write was \"two\")", v)
		}
		mustUnlock(t, first)
	})
}

// TestRebuiltValueBesideADownConversion: a holder converting down to NL
// reports its copy (its own write) as it stands; the new master takes it
// for the value only beside the old master's current snapshot, which says
// whether the conversion went through (a newer write) or not (the copy is
// the latest). Without a snapshot, or beside one that does not vouch for
// the value, the rebuilt value is not valid.
func TestRebuiltValueBesideADownConversion(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		ls := c.ls[0]
		holder := c.nodes[1].self.id
		members := map[master.NodeID]bool{holder: true}
		down := master.LockState{
			Resource: "r", Lock: master.LockID{Node: holder, ID: 1}, Queue: master.QueueConverting,
			Granted: modes.EX, Requested: modes.NL, Token: 7,
			LVB: &master.LVB{Data: []byte("mine"), Seq: 5, Valid: true},
		}
		snapshot := func(data string, seq uint64, valid bool) *masterInfo {
			return &masterInfo{order: []master.LockID{down.Lock}, lvb: &master.LVB{Data: []byte(data), Seq: seq, Valid: valid}}
		}
		for _, tc := range []struct {
			name  string
			mi    *masterInfo
			want  string
			valid bool
		}{
			{"no snapshot", nil, "mine", false},
			{"snapshot before the write", snapshot("old", 4, true), "mine", true},
			{"snapshot of the write", snapshot("mine", 5, true), "mine", true},
			{"snapshot of a later write", snapshot("later", 6, true), "later", true},
			{"snapshot not valid", snapshot("old", 4, false), "mine", false},
			{"snapshot with a writer gone", &masterInfo{
				order:   []master.LockID{down.Lock, {Node: holder + 1, ID: 2}},
				lvb:     &master.LVB{Data: []byte("mine"), Seq: 5, Valid: true},
				writers: []master.LockID{{Node: holder + 1, ID: 2}},
			}, "mine", false},
		} {
			sh := &shard{table: master.New(ls.cfg.tableConfig()), locks: map[uint64]*Lock{}, demoted: map[master.LockID]bool{}}
			sh.mu.Lock()
			if n := ls.restoreResource(sh, []master.LockState{down}, tc.mi, members); n != 1 {
				t.Fatalf("%s: restored %d locks", tc.name, n)
			}
			sh.table.FinishRecovery()
			rs, _ := sh.table.Resource("r")
			sh.mu.Unlock()
			if string(rs.LVB.Data) != tc.want || rs.LVB.Valid != tc.valid {
				t.Errorf("%s: value %q valid=%v, want %q valid=%v", tc.name, rs.LVB.Data, rs.LVB.Valid, tc.want, tc.valid)
			}
		}
	})
}

// TestGivenUpDownConversionReportsNoValidCopy: a holder that gave up
// waiting for its down-conversion's answer holds the lock in its old mode
// as far as it knows, but its master may have granted the conversion and
// let another writer in: its report carries its copy of the value as not
// valid. Without such a conversion, the copy is reported valid.
func TestGivenUpDownConversionReportsNoValidCopy(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		lk := mustLock(t, c.ls[1], c.resourceOn(0, "given-up"), modes.EX)
		for _, givenUp := range []bool{false, true} {
			sh := lk.sh
			sh.mu.Lock()
			lk.pendingConvert, lk.want = givenUp, modes.NL
			rl, ok := lk.reportLocked(sh)
			sh.mu.Unlock()
			if !ok || rl.Granted != modes.EX || rl.LVBFlags&wire.LVBPresent == 0 {
				t.Fatalf("given up %v: report %+v, %v", givenUp, rl, ok)
			}
			if valid := rl.LVBFlags&wire.LVBValid != 0; valid == givenUp {
				t.Errorf("given up %v: copy reported valid=%v", givenUp, valid)
			}
		}
		mustUnlock(t, lk)
	})
}

// TestAbortedViewKeepsTheMembersLocks: a member whose recovery of a view
// was aborted after it had sent its Mastery, while the others suspended
// that view, did not miss it: it was a member throughout, and nothing was
// rebuilt or purged without it. It keeps its locks through the next view
// (it dropped them all, as a zombie, and its clients lost them); its
// tables are rebuilt from the reports, so that what the others reported
// elsewhere in the aborted view is not lost: its locks still exclude the
// others', and are granted to them once released.
func TestAbortedViewKeepsTheMembersLocks(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 4, nil)
		defer c.close()
		const a, b, cc, d = 0, 1, 2, 3 // b's recovery of the view without d is aborted
		here, there := c.resourceOn(b, "aborted-here"), c.resourceOn(a, "aborted-there")
		lkHere := mustLock(t, c.ls[b], here, modes.EX)
		lkThere := mustLock(t, c.ls[b], there, modes.EX)
		rs := &c.nodes[b].recov
		var zombie bool
		rs.mu.Lock()
		rs.afterZombieDrop = func(uint64) { rs.mu.Lock(); zombie = true; rs.mu.Unlock() }
		rs.mu.Unlock()
		missViewAndReturn(t, c, a, b, cc, d, false)
		rs.mu.Lock()
		turned := zombie
		rs.mu.Unlock()
		if turned {
			t.Fatal("b dropped its lock state as a zombie after a view whose recovery was aborted at it")
		}
		for _, lk := range []*Lock{lkHere, lkThere} {
			select {
			case <-lk.Lost():
				t.Fatalf("b's lock on %s lost: %v", lk.Resource(), lk.Err())
			default:
			}
			ctx, cancel := context.WithTimeout(bg, 5*time.Second)
			other, err := c.ls[cc].TryLock(ctx, lk.Resource(), modes.EX)
			cancel()
			if err == nil {
				t.Fatalf("EX on %s granted to %s while b holds it (token %d)", lk.Resource(), c.nodes[cc].Name(), other.Token())
			}
			mustUnlock(t, lk)
			ctx, cancel = context.WithTimeout(bg, 20*time.Second)
			other, err = c.ls[cc].Lock(ctx, lk.Resource(), modes.EX)
			cancel()
			if err != nil {
				t.Fatalf("EX on %s once b released it: %v", lk.Resource(), err)
			}
			if other.Token() <= lk.Token() {
				t.Fatalf("token on %s went back: %d after b's %d", lk.Resource(), other.Token(), lk.Token())
			}
			mustUnlock(t, other)
		}
	})
}
