package dlm

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// Mutex adapts an EX lock on one resource to sync.Locker, for code that
// wants a plain mutex. Like sync.Mutex it may be unlocked by another
// goroutine than the one that locked it.
type Mutex struct {
	ls       *Lockspace
	resource string
	held     atomic.Pointer[Lock]
}

// Mutex returns a sync.Locker for resource in this lockspace.
func (ls *Lockspace) Mutex(resource string) *Mutex { return &Mutex{ls: ls, resource: resource} }

// LockContext takes the EX lock, waiting as long as ctx allows (through a
// loss of quorum too, unless FailFast is given). It returns the lock's
// errors: ErrClosed once the node is closed, ErrTimeout or ErrCancelled
// when ctx ends, ErrInvalidName for a bad resource name.
func (m *Mutex) LockContext(ctx context.Context, opts ...LockOption) error {
	lk, err := m.ls.Lock(ctx, m.resource, modes.EX, opts...)
	if err != nil {
		return err
	}
	m.held.Store(lk)
	return nil
}

// Lock takes the EX lock, waiting as long as it takes. sync.Locker has no
// way to return an error, so Lock waits through whatever keeps the lock
// from being granted: an unreachable master, a loss of quorum, a recovery.
// On a closed node (or with an invalid resource name) the lock can never
// be granted, and Lock waits forever, as a sync.Mutex nobody unlocks
// would; it logs why at error level. Use LockContext to bound the wait and
// see the error.
func (m *Mutex) Lock() { lockForever(m.ls, m.resource, m.LockContext, nil) }

// lockForever calls lock until it succeeds. Errors a retry can cure are
// retried with a backoff; the others (a closed node, a bad name) can never
// be cured, and it then waits on never: forever, as a lock that is never
// granted. never is nil except in tests, which close it to end the wait;
// it reports whether it took the lock.
func lockForever(ls *Lockspace, resource string, lock func(context.Context, ...LockOption) error, never <-chan struct{}) bool {
	wait := time.Millisecond
	for {
		err := lock(context.Background())
		if err == nil {
			return true
		}
		if errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalidName) || errors.Is(err, ErrInvalidArgument) {
			ls.node.log.Error("a sync.Locker's Lock can never be granted and waits forever; use LockContext", "lockspace", ls.name, "resource", resource, "err", err)
			<-never
			return false
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-never:
			t.Stop()
			return false
		}
		wait = min(2*wait, time.Second)
	}
}

// TryLock takes the lock if it is free now and reports whether it did.
func (m *Mutex) TryLock() bool {
	lk, err := m.ls.TryLock(context.Background(), m.resource, modes.EX, FailFast())
	if err != nil {
		return false
	}
	m.held.Store(lk)
	return true
}

// Token returns the fencing token of the lock while the Mutex is locked,
// 0 otherwise.
func (m *Mutex) Token() uint64 {
	if lk := m.held.Load(); lk != nil {
		return lk.Token()
	}
	return 0
}

// Unlock releases the lock. Like sync.Mutex, unlocking an unlocked Mutex is
// a run-time error (a panic). A lock lost meanwhile, or a node closed, is
// not: the lock is gone either way.
func (m *Mutex) Unlock() {
	lk := m.held.Swap(nil)
	if lk == nil {
		panic("dlm: Unlock of unlocked Mutex")
	}
	if err := lk.Unlock(); err != nil && !errors.Is(err, ErrLockLost) && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNoQuorum) {
		ls := lk.ls
		ls.node.log.Warn("Mutex.Unlock", "lockspace", ls.name, "resource", m.resource, "err", err)
	}
}
