package dlm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"pgregory.net/rapid"

	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// The tests of what a recovery moves: only the buckets whose master
// changes, while every other resource keeps being served.

// rebuiltLocks sums the locks the live nodes restored from reports.
func (c *cluster) rebuiltLocks() float64 {
	sum := 0.0
	for _, nd := range c.nodes {
		if nd != nil {
			var m dto.Metric
			if err := nd.met.rebuilt.Write(&m); err != nil {
				c.t.Fatal(err)
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// bufLocked is the buffer of epoch e's reports, nil if there is none.
// Caller holds rs.mu.
func (rs *recoveryState) bufLocked(e uint64) *rebuildBuf {
	for _, b := range rs.bufs {
		if b.epoch == e {
			return b
		}
	}
	return nil
}

// holdRebuild makes node i's next recovery wait before its rebuild (after
// the reports and the lock-delay, at the barrier) until the returned
// release is called; entered is closed once it waits.
func (c *cluster) holdRebuild(i int) (entered <-chan struct{}, release func()) {
	in, out := make(chan struct{}), make(chan struct{})
	once := false
	rs := &c.nodes[i].recov
	rs.mu.Lock()
	rs.beforeRebuild = func(uint64) {
		if once {
			return
		}
		once = true
		close(in)
		<-out
	}
	rs.mu.Unlock()
	var done sync.Once
	return in, func() { done.Do(func() { close(out) }) }
}

// TestUnaffectedServedWhileRecoveryParked: while a recovery is parked at its
// barrier (one node holds its rebuild), a resource whose master did not
// change is locked, converted and unlocked as usual, from every survivor;
// a resource that moves waits until the recovery is done.
func TestUnaffectedServedWhileRecoveryParked(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		kept := c.resourceOn(0, "kept")
		moving := c.resourceOn(2, "moving")
		held := mustLock(t, c.ls[1], moving, modes.PR) // reported to the new master
		entered, release := c.holdRebuild(1)
		defer release() // before c.close, should the test fail while held
		before := c.nodes[0].rec.View().Epoch
		c.kill(2)
		<-entered // node 1 waits at the barrier: the recovery cannot end
		if c.nodes[0].rec.View().Epoch == before {
			t.Fatal("the view without the dead node is not committed")
		}
		for _, ls := range []*Lockspace{c.ls[0], c.ls[1]} {
			start := time.Now()
			ctx, cancel := context.WithTimeout(bg, time.Second)
			lk, err := ls.Lock(ctx, kept, modes.EX)
			cancel()
			if err != nil {
				t.Fatalf("%s: lock of an unaffected resource during the recovery: %v", ls.node.Name(), err)
			}
			if err := lk.Convert(bg, modes.PR); err != nil {
				t.Fatalf("convert during the recovery: %v", err)
			}
			mustUnlock(t, lk)
			if d := time.Since(start); d > 50*time.Millisecond {
				t.Fatalf("%s: lock, convert, unlock of an unaffected resource took %v during the recovery", ls.node.Name(), d)
			}
		}
		got := make(chan error, 1)
		go func() {
			lk, err := c.ls[0].Lock(bg, moving, modes.PR)
			if err == nil {
				err = lk.Unlock()
			}
			got <- err
		}()
		time.Sleep(time.Second)
		select {
		case err := <-got:
			t.Fatalf("a lock on a moving resource ended (%v) while its recovery is parked", err)
		default:
		}
		// A try on a moving resource waits for its recovery like any
		// operation (it could not be answered "at once" before the
		// rebuild): here until its context ends.
		ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
		_, err := c.ls[0].TryLock(ctx, moving, modes.EX)
		cancel()
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("try-lock of a moving resource during its recovery: %v", err)
		}
		release()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		c.waitView(2, 10*time.Second)
		if err := held.Err(); err != nil {
			t.Fatalf("the reported lock: %v", err)
		}
		mustUnlock(t, held)
	})
}

// TestKillMovesOnlyTheDeadShare: after a node dies, only the buckets it
// mastered move; the tables of the others stay (their locks are not
// rebuilt), and the dead node's locks in them are purged after the
// lock-delay, granting what waited behind them.
func TestKillMovesOnlyTheDeadShare(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 5, func(cfg *Config) { cfg.MaxLocks = 0 })
		defer c.close()
		var locks []*Lock
		for i := range 400 {
			locks = append(locks, mustLock(t, c.ls[i%4], fmt.Sprintf("share-%d", i), modes.PR))
		}
		// The dying node holds an EX lock on a resource node 0 masters; a
		// waiter queues behind it.
		blocked := c.resourceOn(0, "blocked")
		mustLock(t, c.ls[4], blocked, modes.EX)
		waiter := make(chan *Lock, 1)
		go func() { waiter <- mustLock(t, c.ls[1], blocked, modes.EX) }()
		c.settle(c.queued(blocked, 1))
		moved := 0
		for _, lk := range locks {
			if c.ls[0].MasterOf(lk.Resource()) == c.nodes[4].Name() {
				moved++
			}
		}
		rebuilt0 := c.rebuiltLocks()
		start := time.Now()
		c.kill(4)
		lk := <-waiter
		took := time.Since(start)
		if cfg := c.nodes[0].rec.Config(); took < cfg.LockDelay() {
			t.Fatalf("the waiter behind the dead node's lock was granted after %v, before the lock-delay %v", took, cfg.LockDelay())
		}
		c.waitView(4, 10*time.Second)
		rebuilt := c.rebuiltLocks() - rebuilt0
		if int(rebuilt) != moved {
			t.Fatalf("%v locks rebuilt, want the %d on resources the dead node mastered", rebuilt, moved)
		}
		for _, l := range locks {
			if l.Err() != nil {
				t.Fatalf("%s: %v", l.Resource(), l.Err())
			}
			if _, err := c.ls[(int(l.id)+1)%4].TryLock(bg, l.Resource(), modes.EX); !errors.Is(err, ErrNotQueued) {
				t.Fatalf("EX over a PR holder of %s after the recovery: %v", l.Resource(), err)
			}
		}
		t.Logf("%d of %d resources moved, %v locks rebuilt; the waiter was granted after %v", moved, len(locks), rebuilt, took)
		mustUnlock(t, lk)
		for _, l := range locks {
			mustUnlock(t, l)
		}
	})
}

// TestJoinMovesOnlyTheJoinersShare: a joining node takes only the buckets
// it wins; the old masters keep the rest of their tables, and resources
// that stay are served while the join's recovery is parked.
func TestJoinMovesOnlyTheJoinersShare(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMemOf(t, 4, 3, nil)
		defer c.close()
		var locks []*Lock
		for i := range 60 {
			locks = append(locks, mustLock(t, c.ls[i%3], fmt.Sprintf("join-%d", i), modes.PR))
		}
		rebuilt0 := c.rebuiltLocks()
		// Hold the recovery of the join at node 0's rebuild, and lock a
		// resource that stays at node 1 meanwhile.
		entered, release := c.holdRebuild(0)
		defer release()
		started := make(chan struct{})
		go func() {
			defer close(started)
			c.startNode(3)
		}()
		<-entered
		stay := ""
		vw := c.nodes[1].view.Load()
		for i := range 1000 {
			name := fmt.Sprintf("stay-%d", i)
			h := resourceHash(c.ls[1].seed, name)
			if vw.masterOf(h).name == c.nodes[1].Name() && !c.nodes[1].recov.plan.Load().heldBack(h) {
				stay = name
				break
			}
		}
		if stay == "" {
			t.Fatal("no resource of node 1 that stays")
		}
		mustUnlock(t, mustLock(t, c.ls[2], stay, modes.EX))
		release()
		<-started
		c.waitView(4, 30*time.Second)
		moved := 0
		for _, lk := range locks {
			if c.ls[0].MasterOf(lk.Resource()) == c.nodes[3].Name() {
				moved++
			}
		}
		if moved == 0 || moved == len(locks) {
			t.Fatalf("%d of %d resources moved to the new node", moved, len(locks))
		}
		if rebuilt := c.rebuiltLocks() - rebuilt0; int(rebuilt) != moved {
			t.Fatalf("%v locks rebuilt, want the %d on resources the new node took", rebuilt, moved)
		}
		for _, lk := range locks {
			if _, err := c.ls[3].TryLock(bg, lk.Resource(), modes.EX); !errors.Is(err, ErrNotQueued) {
				t.Fatalf("EX over a PR holder of %s after the join: %v", lk.Resource(), err)
			}
			mustUnlock(t, lk)
		}
	})
}

// TestFailedRestoreLosesTheLock: a reported lock the new master cannot
// restore (here: two holders report incompatible grants, which only a bug
// elsewhere could cause) is lost, and its holder is told: Lost closes, and
// Unlock reports ErrLockLost.
func TestFailedRestoreLosesTheLock(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		res := c.resourceOn(2, "conflict")
		a := mustLock(t, c.ls[0], res, modes.PR)
		b := mustLock(t, c.ls[1], res, modes.PR)
		// Make node 1 believe it holds EX: its report then conflicts with
		// node 0's PR at the new master.
		b.sh.mu.Lock()
		b.mode = modes.EX
		b.sh.mu.Unlock()
		c.kill(2)
		c.waitView(2, 10*time.Second)
		var lost, kept *Lock
		select {
		case <-a.Lost():
			lost, kept = a, b
		case <-b.Lost():
			lost, kept = b, a
		case <-time.After(5 * time.Second):
			t.Fatal("neither holder was told its lock is lost")
		}
		if !errors.Is(lost.Err(), ErrLockLost) {
			t.Fatalf("lost lock's error: %v", lost.Err())
		}
		if err := lost.Unlock(); !errors.Is(err, ErrLockLost) {
			t.Fatalf("Unlock of the lost lock: %v", err)
		}
		if kept.Err() != nil {
			t.Fatalf("the other holder: %v", kept.Err())
		}
		mustUnlock(t, kept)
	})
}

// TestGateClosesOnlyWhatMoves: a property over random small clusters and
// resources. While a recovery is parked at its barrier (one member holds its
// rebuild), after a member dies or a node joins, an operation on a resource
// waits if and only if its master changed: every other resource is locked
// at once from every serving member, and every waiting one is granted once
// the recovery ends.
func TestGateClosesOnlyWhatMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster per check")
	}
	rapid.Check(t, func(rt *rapid.T) {
		nodes := rapid.IntRange(3, 5).Draw(rt, "nodes")
		join := rapid.Bool().Draw(rt, "join")
		changed := rapid.IntRange(0, nodes-1).Draw(rt, "victim") // the node that dies, or the one that joins
		if join {
			changed = nodes - 1
		}
		parked := rapid.IntRange(0, nodes-2).Draw(rt, "parked")
		if parked >= changed {
			parked++ // a member that stays
		}
		if join && parked == changed {
			parked = 0
		}
		count := rapid.IntRange(8, 40).Draw(rt, "resources")
		rapid.SyncTest(rt, func(rt *rapid.T) {
			tb := rapidTB{t: rt}
			started := nodes
			if join {
				started = nodes - 1
			}
			c := startMemOf(tb, nodes, started, nil)
			defer c.close()
			names := make([]string, count)
			before := make([]string, count)
			for i := range names {
				names[i] = fmt.Sprintf("gate-%d-%d", i, rapid.Uint32().Draw(rt, "name"))
				before[i] = c.ls[parked].MasterOf(names[i])
			}
			entered, release := c.holdRebuild(parked)
			defer release()
			joined := make(chan struct{})
			if join {
				go func() {
					defer close(joined)
					c.startNode(changed)
				}()
			} else {
				close(joined)
				c.kill(changed)
			}
			<-entered
			var waiting []chan error
			for i, name := range names {
				moved := c.ls[parked].MasterOf(name) != before[i]
				from := rapid.IntRange(0, nodes-1).Draw(rt, "from")
				if from == changed {
					from = parked // the joiner serves nothing yet; the victim is dead
				}
				ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
				lk, err := c.ls[from].Lock(ctx, name, modes.EX)
				cancel()
				switch {
				case moved && !errors.Is(err, ErrTimeout):
					rt.Fatalf("%s (master %s, was %s) during its recovery: %v, want it to wait", name, c.ls[parked].MasterOf(name), before[i], err)
				case !moved && err != nil:
					rt.Fatalf("%s (master %s, unchanged) during another resource's recovery: %v", name, before[i], err)
				case !moved:
					mustUnlock(tb, lk)
				default:
					got := make(chan error, 1)
					waiting = append(waiting, got)
					go func() {
						lk, err := c.ls[from].Lock(bg, name, modes.EX)
						if err == nil {
							err = lk.Unlock()
						}
						got <- err
					}()
				}
			}
			synctestWait()
			for _, got := range waiting {
				select {
				case err := <-got:
					rt.Fatalf("a lock on a moving resource ended (%v) while its recovery is parked", err)
				default:
				}
			}
			release()
			for _, got := range waiting {
				if err := <-got; err != nil {
					rt.Fatalf("a lock on a moved resource after its recovery: %v", err)
				}
			}
			<-joined
		})
	})
}

// TestRebuildKeepsItsReportsWhenTheNextViewReportsFirst: a report for the
// next view, from a member that installed it first, comes in after this
// view's barrier and before its rebuild. The rebuild still restores the
// locks reported for its own view: the held EX lock on the moved resource
// keeps out another node's try, and is granted to it once unlocked.
func TestRebuildKeepsItsReportsWhenTheNextViewReportsFirst(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		moving := c.resourceOn(2, "moving")
		held := mustLock(t, c.ls[1], moving, modes.EX)
		for i := range 2 {
			nd := c.nodes[i]
			rs := &nd.recov
			rs.mu.Lock()
			rs.beforeRebuild = func(epoch uint64) {
				nd.acceptReport(c.nodes[1-i].Name(), &wire.LockReport{Epoch: epoch + 1, Lockspace: "test"})
			}
			rs.mu.Unlock()
		}
		c.kill(2)
		c.waitView(2, 10*time.Second)
		ctx, cancel := context.WithTimeout(bg, 5*time.Second)
		defer cancel()
		if _, err := c.ls[0].TryLock(ctx, moving, modes.EX); !errors.Is(err, ErrNotQueued) {
			t.Fatalf("a try of EX while the reported EX is held: %v, want ErrNotQueued", err)
		}
		if err := held.Err(); err != nil {
			t.Fatalf("the reported lock: %v", err)
		}
		mustUnlock(t, held)
		mustUnlock(t, mustLock(t, c.ls[0], moving, modes.EX))
	})
}

// TestManyMovingLocksOfOneShardReported: a holder's moving locks are
// reported in batches of rebuildBatch with the shard's mutex let go in
// between; with one shard and more than two batches of them, every one
// reaches the new master: none can be taken by another node after the
// recovery, and each is had once its holder lets go.
func TestManyMovingLocksOfOneShardReported(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, func(cfg *Config) { cfg.Shards = 1 })
		defer c.close()
		const n = 2*rebuildBatch + 77
		var names []string
		for i := 0; len(names) < n; i++ {
			if name := fmt.Sprintf("many/%d", i); c.ls[0].MasterOf(name) == c.nodes[2].Name() {
				names = append(names, name)
			}
		}
		held := make([]*Lock, n)
		for i, name := range names {
			held[i] = mustLock(t, c.ls[1], name, modes.EX)
		}
		rebuilt := c.rebuiltLocks()
		c.kill(2)
		c.waitView(2, 30*time.Second)
		if got := c.rebuiltLocks() - rebuilt; got != n {
			t.Fatalf("the new masters restored %v locks, want the %d reported", got, n)
		}
		for _, name := range names {
			if lk, err := c.ls[0].TryLock(bg, name, modes.EX); !errors.Is(err, ErrNotQueued) {
				if err == nil {
					mustUnlock(t, lk)
				}
				t.Fatalf("%s: another node's EX after the recovery: %v, want ErrNotQueued (the holder's lock was not restored)", name, err)
			}
		}
		for i, name := range names {
			mustUnlock(t, held[i])
			mustUnlock(t, mustLock(t, c.ls[0], name, modes.EX))
		}
	})
}
