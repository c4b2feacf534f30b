package dlm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// TestLockContextQuorumLoss: the holder's node is cut off; the lock's
// context is cancelled once the node's lease ends, within one lease of
// the cut (the last acknowledgement it had can be no older), before any
// other node can be granted the lock, and its cause says why.
func TestLockContextQuorumLoss(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		res := c.resourceOn(1, "ctx")
		lk := mustLock(t, c.ls[0], res, modes.EX)
		ctx, cancel := lk.Context(bg)
		defer cancel()
		cut := time.Now()
		c.net.Isolate(c.nodes[0].Name())
		<-ctx.Done()
		took := time.Since(cut)
		lease := c.nodes[0].cfg.Lease
		if took > lease+c.nodes[0].cfg.TickInterval {
			t.Fatalf("context cancelled %v after the cut, past the lease (%v)", took, lease)
		}
		if cause := context.Cause(ctx); !errors.Is(cause, ErrNoQuorum) || !errors.Is(cause, ErrLockLost) {
			t.Fatalf("cause %v", cause)
		}
		select {
		case <-lk.Lost():
		default:
			t.Fatal("context done before Lost")
		}
		other, err := c.ls[2].Lock(bg, res, modes.EX)
		if err != nil {
			t.Fatal(err)
		}
		if granted := time.Since(cut); granted <= took {
			t.Fatalf("granted elsewhere %v after the cut, before the holder's context ended (%v)", granted, took)
		}
		mustUnlock(t, other)
		c.net.Heal()
	})
}

// TestLockContextTTL: a lock with a TTL that is not renewed: its context
// ends when the holder's lease on the lock does, on its own clock, no later
// than the TTL after the request was sent.
func TestLockContextTTL(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		for i := range 3 { // a local and two remote masters
			res := c.resourceOn(i, "ttl")
			const ttl = 3 * time.Second
			sent := time.Now()
			lk := mustLock(t, c.ls[0], res, modes.EX, WithTTL(ttl))
			ctx, cancel := lk.Context(bg)
			<-ctx.Done()
			if took := time.Since(sent); took > ttl || took < ttl/2 {
				t.Fatalf("master %d: context of a %v TTL cancelled after %v", i, ttl, took)
			}
			if cause := context.Cause(ctx); !errors.Is(cause, ErrLockLost) {
				t.Fatalf("cause %v", cause)
			}
			cancel()
			_ = lk.Unlock()
		}
	})
}

// TestLockContextLifetime: Unlock cancels the context; one made after is
// born cancelled; its CancelFunc and its parent end it too, without
// touching the lock.
func TestLockContextLifetime(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		for i := range 3 {
			res := c.resourceOn(i, "life")
			lk := mustLock(t, c.ls[0], res, modes.PR)

			parent, stop := context.WithCancel(bg)
			fromParent, cancel1 := lk.Context(parent)
			stop()
			<-fromParent.Done()
			cancel1()

			byCancel, cancel2 := lk.Context(bg)
			cancel2()
			<-byCancel.Done()
			lk.sh.mu.Lock()
			left := len(lk.ext.Load().ctxs)
			lk.sh.mu.Unlock()
			if lk.Err() != nil || left != 0 {
				t.Fatalf("cancelling a context touched the lock: %v, %d contexts left", lk.Err(), left)
			}

			ctx, cancel := lk.Context(bg)
			defer cancel()
			if err := lk.Convert(bg, modes.EX); err != nil {
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Fatal("a conversion ended the context")
			}
			mustUnlock(t, lk)
			<-ctx.Done()
			if cause := context.Cause(ctx); !errors.Is(cause, ErrNotHeld) {
				t.Fatalf("cause after Unlock: %v", cause)
			}
			after, cancel3 := lk.Context(bg)
			if after.Err() == nil || !errors.Is(context.Cause(after), ErrNotHeld) {
				t.Fatalf("context of an unlocked lock: %v", context.Cause(after))
			}
			cancel3()
		}
	})
}
