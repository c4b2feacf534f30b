package dlm

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// TestNoGrantAfterLeaseEndsBeforeItIsNoticed is the chaos run's overlap on
// real processes (seed 2027, pause-holder): a worker that mastered a
// resource was stopped (SIGSTOP) past its lease; the others removed it and
// re-granted the resource; when it was continued, its client's conversion
// ran before the lease timer did and was granted from its stale table,
// with a token lower than the new holder's. Here the node's lease
// bookkeeping is stalled (seam.LeaseStall), as the pause stalls its timer,
// and the node cut off; once the others hold the resource, neither a
// conversion on the stale table nor a grant the table makes when a local
// holder lets go may tell a caller it holds the lock.
func TestNoGrantAfterLeaseEndsBeforeItIsNoticed(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		var stalled atomic.Bool
		c := startMemWith(t, 3, 3, nil, testKnobs{stallLease: func(node string) bool {
			return node == "n1" && stalled.Load()
		}})
		defer c.close()
		res := c.resourceOn(0, "stale")
		other := c.resourceOn(0, "stale-queued")
		nl := mustLock(t, c.ls[0], res, modes.NL)
		holder := mustLock(t, c.ls[0], other, modes.EX)
		queued := make(chan error, 1)
		go func() {
			lk, err := c.ls[0].Lock(bg, other, modes.EX, FailFast())
			if err == nil {
				err = lk.Unlock()
				if err == nil {
					err = errors.New("granted")
				}
			}
			queued <- err
		}()
		c.settle(c.queued(other, 1))

		stalled.Store(true)
		c.net.Isolate("n1")
		ctx, cancel := context.WithTimeout(bg, time.Minute)
		ex, err := c.ls[1].Lock(ctx, res, modes.EX)
		cancel()
		if err != nil {
			t.Fatalf("n2: lock of the cut-off node's resource: %v", err)
		}
		if !c.nodes[0].gate.serving.Load() {
			t.Fatal("n1's gate closed although its lease bookkeeping is stalled: the test shows nothing")
		}

		ctx, cancel = context.WithTimeout(bg, 200*time.Millisecond)
		err = nl.Convert(ctx, modes.EX)
		cancel()
		if err == nil || nl.Mode() == modes.EX {
			t.Fatalf("n1 granted EX on %s from its stale table (token %d) after its lease ended, while n2 holds EX (token %d); err %v",
				res, nl.Token(), ex.Token(), err)
		}
		err = holder.Unlock()
		if err != nil && !errors.Is(err, ErrNoQuorum) && !errors.Is(err, ErrLockLost) {
			t.Fatalf("unlock on n1: %v", err)
		}
		select {
		case err := <-queued:
			if !errors.Is(err, ErrNoQuorum) {
				t.Fatalf("n1's waiter on %s after its lease ended: %v, want ErrNoQuorum", other, err)
			}
		case <-time.After(time.Second):
			t.Fatalf("n1's waiter on %s neither granted nor failed", other)
		}

		stalled.Store(false)
		c.net.Heal()
		mustUnlock(t, ex)
		_ = nl.Unlock()
		c.waitView(3, time.Minute)
	})
}

// The holder's side of the same pause: a master's grant that reaches a
// node after the node's lease ended, before it noticed (the completion
// waited in the socket while the process was stopped), must not tell the
// caller it holds the lock either. Here the others still acknowledge the
// node; only its own clock says its lease is over, which is enough.
func TestNoRemoteGrantBelievedAfterLeaseEnds(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		var stalled atomic.Bool
		c := startMemWith(t, 3, 3, nil, testKnobs{stallLease: func(node string) bool {
			return node == "n1" && stalled.Load()
		}})
		defer c.close()
		res := c.resourceOn(1, "remote")
		blocker := mustLock(t, c.ls[2], res, modes.EX)
		nl := mustLock(t, c.ls[0], res, modes.NL)
		converted := make(chan error, 1)
		go func() { converted <- nl.Convert(bg, modes.EX) }()
		c.settle(c.queued(res, 1))

		stalled.Store(true)
		time.Sleep(c.nodes[0].rec.Config().Lease + 10*time.Millisecond)
		if !c.nodes[0].gate.serving.Load() {
			t.Fatal("n1's gate closed although its lease bookkeeping is stalled: the test shows nothing")
		}
		mustUnlock(t, blocker) // n2 grants n1's conversion
		select {
		case err := <-converted:
			if err == nil || nl.Mode() == modes.EX && nl.Err() == nil {
				t.Fatalf("n1 believed a grant of EX on %s that came after its lease ended: err %v, lock %v", res, err, nl.Err())
			}
			if !errors.Is(err, ErrNoQuorum) {
				t.Fatalf("conversion after the lease ended: %v, want ErrNoQuorum", err)
			}
		case <-time.After(time.Second):
			t.Fatal("n1's conversion neither granted nor failed")
		}
		stalled.Store(false)
		_ = nl.Unlock()
		c.settle(c.free(res))
	})
}
