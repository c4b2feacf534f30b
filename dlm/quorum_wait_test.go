package dlm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// TestLockWaitsForQuorum: a node cut off from the cluster loses its
// quorum; a Lock issued there waits (FailFast fails at once, a context
// ends the wait with its error and ErrNoQuorum), and is granted once the
// partition heals and the node is back in a view.
func TestLockWaitsForQuorum(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		held := mustLock(t, c.ls[0], "q-held", modes.EX)
		sem := mustSemaphore(t, c.ls[0], "q-sem", 2)
		c.net.Isolate(c.nodes[0].Name())
		<-held.Lost()

		if _, err := c.ls[0].Lock(bg, "q", modes.EX, FailFast()); !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("FailFast without quorum: %v", err)
		}
		if _, err := sem.Acquire(bg, 1, FailFast()); !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("FailFast Acquire without quorum: %v", err)
		}
		ctx, cancel := context.WithTimeout(bg, 2*time.Second)
		_, err := c.ls[0].Lock(ctx, "q", modes.EX)
		cancel()
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("Lock whose context ends while it waits for quorum: %v", err)
		}

		type result struct {
			err error
			at  time.Time
		}
		lockDone, semDone := make(chan result, 1), make(chan result, 1)
		go func() {
			lk, err := c.ls[0].Lock(bg, "q", modes.EX)
			if err == nil {
				err = lk.Unlock()
			}
			lockDone <- result{err, time.Now()}
		}()
		go func() {
			p, err := sem.Acquire(bg, 2)
			if err == nil {
				err = p.Release()
			}
			semDone <- result{err, time.Now()}
		}()
		time.Sleep(5 * time.Second) // well past any recovery: they must still wait
		select {
		case r := <-lockDone:
			t.Fatalf("Lock without quorum returned %v before the heal", r.err)
		case r := <-semDone:
			t.Fatalf("Acquire without quorum returned %v before the heal", r.err)
		default:
		}
		healed := time.Now()
		c.net.Heal()
		for _, ch := range []chan result{lockDone, semDone} {
			r := <-ch
			if r.err != nil {
				t.Fatalf("after the heal: %v", r.err)
			}
			if took := r.at.Sub(healed); took > 30*time.Second {
				t.Fatalf("granted %v after the heal", took)
			}
		}
		if err := held.Unlock(); !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("unlock of the lock lost with quorum: %v", err)
		}
	})
}
