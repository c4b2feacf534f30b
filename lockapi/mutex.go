package lockapi

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/seed-a6839e30/dlm/internal/forever"
	"github.com/seed-a6839e30/dlm/modes"
)

// Mutex adapts an EX lock on one resource to sync.Locker, for code that
// wants a plain mutex. Like sync.Mutex it may be unlocked by another
// goroutine than the one that locked it.
type Mutex struct {
	ls       Lockspace
	resource string
	log      *slog.Logger
	held     atomic.Pointer[lockBox]
	never    <-chan struct{} // ends Lock's endless wait; tests only
}

type lockBox struct{ lk Lock }

// NewMutex returns a sync.Locker for resource in ls. log (nil: nowhere)
// hears why a Lock can never be granted and why an Unlock failed, which
// sync.Locker cannot return.
func NewMutex(ls Lockspace, resource string, log *slog.Logger) *Mutex {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Mutex{ls: ls, resource: resource, log: log}
}

// LockContext takes the EX lock, waiting as long as ctx allows. It returns
// the lock's errors: ErrClosed once the lockspace is closed, ErrTimeout or
// ErrCancelled when ctx ends, ErrInvalidName for a bad resource name.
func (m *Mutex) LockContext(ctx context.Context, opts ...Option) error {
	lk, err := m.ls.Acquire(ctx, m.resource, modes.EX, opts...)
	if err != nil {
		return err
	}
	m.held.Store(&lockBox{lk})
	return nil
}

// Lock takes the EX lock, waiting as long as it takes. sync.Locker has no
// way to return an error, so Lock waits through whatever keeps the lock
// from being granted: an unreachable master or agent, a loss of quorum, a
// recovery. On a closed lockspace (or with an invalid resource name) the
// lock can never be granted, and Lock waits forever, as a sync.Mutex
// nobody unlocks would; it logs why at error level. Use LockContext to
// bound the wait and see the error.
func (m *Mutex) Lock() {
	forever.Lock(func(ctx context.Context) error { return m.LockContext(ctx) }, Incurable, m.stuck, m.never)
}

func (m *Mutex) stuck(err error) {
	m.log.Error("a sync.Locker's Lock can never be granted and waits forever; use LockContext",
		"lockspace", m.ls.Name(), "resource", m.resource, "err", err)
}

// Incurable reports whether err, from a lock request, is one no retry can
// cure: the lockspace is closed, or the request is invalid.
func Incurable(err error) bool {
	return errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalidName) ||
		errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrInvalidMode)
}

// TryLock takes the lock if it is free now and reports whether it did.
func (m *Mutex) TryLock() bool {
	return m.LockContext(context.Background(), Try()) == nil
}

// Token returns the fencing token of the lock while the Mutex is locked,
// 0 otherwise.
func (m *Mutex) Token() uint64 {
	if b := m.held.Load(); b != nil {
		return b.lk.Token()
	}
	return 0
}

// Unlock releases the lock. Like sync.Mutex, unlocking an unlocked Mutex is
// a run-time error (a panic). A lock lost meanwhile, or a lockspace
// closed, is not: the lock is gone either way.
func (m *Mutex) Unlock() {
	b := m.held.Swap(nil)
	if b == nil {
		panic("dlm: Unlock of unlocked Mutex")
	}
	if err := b.lk.Unlock(); err != nil && !errors.Is(err, ErrLockLost) && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNoQuorum) {
		m.log.Warn("Mutex.Unlock", "lockspace", m.ls.Name(), "resource", m.resource, "err", err)
	}
}
