package dlm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

type asyncResult struct {
	lk  *Lock
	err error
}

func startAsync(ls *Lockspace, ctx context.Context, res string, mode modes.Mode, opts ...LockOption) (<-chan asyncResult, func()) {
	ch := make(chan asyncResult, 1)
	cancel := ls.LockAsync(ctx, res, mode, func(lk *Lock, err error) { ch <- asyncResult{lk, err} }, opts...)
	return ch, cancel
}

// TestLockAsync: an asynchronous request is answered at once by a local
// table, later by a remote master or once a holder lets go; it can be
// cancelled (the next request behind it is granted); a try is refused
// with ErrNotQueued; a deadline times it out.
func TestLockAsync(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		local, remote := c.resourceOn(0, "async"), c.resourceOn(1, "async")

		ch, _ := startAsync(c.ls[0], bg, local, modes.EX)
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatal(r.err)
			}
			mustUnlock(t, r.lk)
		default:
			t.Fatal("a lock its own table grants at once was not answered before LockAsync returned")
		}

		for _, res := range []string{local, remote} {
			holder := mustLock(t, c.ls[2], res, modes.EX)
			ch, _ := startAsync(c.ls[0], bg, res, modes.EX)
			synctestWait()
			select {
			case r := <-ch:
				t.Fatalf("granted next to an EX holder: %+v", r)
			default:
			}
			mustUnlock(t, holder)
			r := <-ch
			if r.err != nil || r.lk.Mode() != modes.EX || r.lk.Token() <= holder.Token() {
				t.Fatalf("after the holder left: %+v", r)
			}
			mustUnlock(t, r.lk)

			// Cancelled while it waits: ErrCancelled, and the queue moves on.
			holder = mustLock(t, c.ls[2], res, modes.EX)
			cancelled, cancel := startAsync(c.ls[0], bg, res, modes.PW)
			behind, _ := startAsync(c.ls[1], bg, res, modes.PW)
			synctestWait()
			cancel()
			if r := <-cancelled; !errors.Is(r.err, ErrCancelled) || r.lk != nil {
				t.Fatalf("cancelled request: %+v", r)
			}
			mustUnlock(t, holder)
			if r := <-behind; r.err != nil {
				t.Fatalf("the request behind the cancelled one: %v", r.err)
			} else {
				mustUnlock(t, r.lk)
			}

			holder = mustLock(t, c.ls[2], res, modes.EX)
			tryCh := make(chan asyncResult, 1)
			c.ls[0].TryLockAsync(bg, res, modes.EX, func(lk *Lock, err error) { tryCh <- asyncResult{lk, err} })
			if r := <-tryCh; !errors.Is(r.err, ErrNotQueued) {
				t.Fatalf("try next to a holder: %+v", r)
			}
			ctx, stop := context.WithTimeout(bg, time.Second)
			timed, _ := startAsync(c.ls[0], ctx, res, modes.EX)
			if r := <-timed; !errors.Is(r.err, ErrTimeout) {
				t.Fatalf("past its deadline: %+v", r)
			}
			stop()
			mustUnlock(t, holder)
		}
		if _, err := c.ls[0].Lock(bg, "x", modes.Mode(9)); !errors.Is(err, ErrInvalidMode) {
			t.Fatal(err)
		}
		ch, _ = startAsync(c.ls[0], bg, "x", modes.Mode(9))
		if r := <-ch; !errors.Is(r.err, ErrInvalidMode) {
			t.Fatalf("bad mode: %+v", r)
		}
	})
}

// TestConvertAsync: an up-conversion that must wait is answered once the
// other holder lets go; one cancelled keeps its mode.
func TestConvertAsync(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		for _, m := range []int{0, 1} {
			res := c.resourceOn(m, "conv-async")
			lk := mustLock(t, c.ls[0], res, modes.PR)
			other := mustLock(t, c.ls[2], res, modes.PR)
			ch := make(chan error, 1)
			lk.ConvertAsync(bg, modes.EX, func(got *Lock, err error) {
				if got != lk {
					t.Error("ConvertAsync's callback got another lock")
				}
				ch <- err
			})
			synctestWait()
			select {
			case err := <-ch:
				t.Fatalf("converted next to a PR holder: %v", err)
			default:
			}
			mustUnlock(t, other)
			if err := <-ch; err != nil || lk.Mode() != modes.EX {
				t.Fatalf("conversion: %v, mode %v", err, lk.Mode())
			}
			if err := lk.Convert(bg, modes.PR); err != nil {
				t.Fatal(err)
			}
			other = mustLock(t, c.ls[2], res, modes.PR)
			cancel := lk.ConvertAsync(bg, modes.EX, func(_ *Lock, err error) { ch <- err })
			synctestWait()
			cancel()
			if err := <-ch; !errors.Is(err, ErrCancelled) || lk.Mode() != modes.PR {
				t.Fatalf("cancelled conversion: %v, mode %v", err, lk.Mode())
			}
			mustUnlock(t, other)
			mustUnlock(t, lk)
		}
	})
}

// TestReleaseTimesOutExpiredWaiter: a request whose timeout passed while
// it queued, before the master's next tick, is not granted the lock its
// holder lets go, or that a cancel of the request ahead of it would let
// it have (its requester gave up on it, or is about to): it fails with
// ErrTimeout. The periodic tick is an hour apart here, so only the
// release's own look at the clock can time the request out.
func TestReleaseTimesOutExpiredWaiter(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, func(cfg *Config) { cfg.TickInterval = time.Hour })
		defer c.close()
		for m := range 3 { // the holder's own table, and a remote one
			res := c.resourceOn(m, "expired-waiter")
			holder := mustLock(t, c.ls[2], res, modes.EX)
			ctx, stop := context.WithTimeout(bg, 10*time.Millisecond)
			ch, _ := startAsync(c.ls[0], ctx, res, modes.EX)
			time.Sleep(20 * time.Millisecond) // past the deadline, in the bubble's time
			synctestWait()
			mustUnlock(t, holder)
			if r := <-ch; !errors.Is(r.err, ErrTimeout) {
				if r.lk != nil {
					mustUnlock(t, r.lk)
				}
				t.Errorf("master on node %d: a request past its deadline got %+v when the holder let go, want ErrTimeout", m, r)
			}
			stop()

			// A cancel that lets the queue move: B (PR, compatible with the
			// PR holder) waits behind A (EX) until A is cancelled, by which
			// time B's deadline has passed.
			holder = mustLock(t, c.ls[2], res, modes.PR)
			a, cancelA := startAsync(c.ls[1], bg, res, modes.EX)
			synctestWait() // A queued first
			ctx, stop = context.WithTimeout(bg, 10*time.Millisecond)
			b, _ := startAsync(c.ls[0], ctx, res, modes.PR)
			time.Sleep(20 * time.Millisecond)
			synctestWait()
			cancelA()
			if r := <-a; !errors.Is(r.err, ErrCancelled) {
				t.Fatalf("cancelled request: %+v", r)
			}
			if r := <-b; !errors.Is(r.err, ErrTimeout) {
				if r.lk != nil {
					mustUnlock(t, r.lk)
				}
				t.Errorf("master on node %d: a request past its deadline got %+v when the request ahead was cancelled, want ErrTimeout", m, r)
			}
			stop()
			mustUnlock(t, holder)
		}
	})
}
