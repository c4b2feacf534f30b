package dlm

import (
	"errors"
	"testing"

	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/modes"
)

type foreignOwner struct{}

func (foreignOwner) ID() uint64 { return 7 }

// TestAcquireThroughLockapi: the lockapi view of a lockspace takes the
// same locks with the same options and errors as Lock and TryLock.
func TestAcquireThroughLockapi(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		var a, b lockapi.Lockspace = c.ls[0], c.ls[1]
		res := c.resourceOn(2, "api")
		blocked := make(chan modes.Mode, 1)
		lk, err := a.Acquire(bg, res, modes.PR, lockapi.OnBlocking(func(m modes.Mode) { blocked <- m }))
		if err != nil {
			t.Fatal(err)
		}
		other := mustLock(t, c.ls[2], res, modes.PR)
		if _, err := b.Acquire(bg, res, modes.EX, lockapi.Try()); !errors.Is(err, lockapi.ErrNotQueued) {
			t.Fatalf("Try on a held resource: %v", err)
		}
		if _, err := b.Acquire(bg, res, modes.EX, lockapi.WithOwner(foreignOwner{})); !errors.Is(err, lockapi.ErrInvalidArgument) {
			t.Fatalf("foreign owner: %v", err)
		}
		o := c.ls[1].NewOwner()
		waiter := make(chan error, 1)
		go func() {
			w, err := b.Acquire(bg, res, modes.EX, lockapi.WithOwner(o))
			if err == nil {
				err = w.Unlock()
			}
			waiter <- err
		}()
		if m := <-blocked; m != modes.EX {
			t.Fatalf("blocking notification for %v", m)
		}
		if err := lk.Convert(bg, modes.EX, lockapi.Try()); !errors.Is(err, ErrNotQueued) {
			t.Fatalf("try-convert next to another PR holder: %v", err)
		}
		mustUnlock(t, other)
		if Unwrap(lk) == nil || Unwrap(lk).Mode() != modes.PR {
			t.Fatalf("Unwrap: %v", Unwrap(lk))
		}
		if err := lk.Unlock(); err != nil {
			t.Fatal(err)
		}
		if err := <-waiter; err != nil {
			t.Fatal(err)
		}
	})
}
