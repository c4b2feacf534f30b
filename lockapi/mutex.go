package lockapi

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
	ls       Lockspace
	resource string
	held     atomic.Pointer[lockBox]
}

type lockBox struct{ lk Lock }

// NewMutex returns a sync.Locker for resource in ls.
func NewMutex(ls Lockspace, resource string) *Mutex { return &Mutex{ls: ls, resource: resource} }

// Lock takes the EX lock, waiting as long as it takes. sync.Locker has no
// way to return an error: while the resource's master (or the agent) is
// unreachable, or the cluster has no quorum, Lock retries with backoff; it
// panics if the lockspace is closed or the request is invalid, which are
// programming errors.
func (m *Mutex) Lock() {
	wait := time.Millisecond
	for {
		lk, err := m.ls.Acquire(context.Background(), m.resource, modes.EX)
		if err == nil {
			m.held.Store(&lockBox{lk})
			return
		}
		if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrNoQuorum) && !errors.Is(err, ErrLockLost) {
			panic("dlm: Mutex.Lock: " + err.Error())
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Second)
	}
}

// TryLock takes the lock if it is free now and reports whether it did.
func (m *Mutex) TryLock() bool {
	lk, err := m.ls.Acquire(context.Background(), m.resource, modes.EX, Try())
	if err != nil {
		return false
	}
	m.held.Store(&lockBox{lk})
	return true
}

// Unlock releases the lock. Like sync.Mutex, unlocking an unlocked Mutex is
// a run-time error.
func (m *Mutex) Unlock() {
	b := m.held.Swap(nil)
	if b == nil {
		panic("dlm: Unlock of unlocked Mutex")
	}
	if err := b.lk.Unlock(); err != nil && !errors.Is(err, ErrLockLost) && !errors.Is(err, ErrClosed) {
		panic("dlm: Mutex.Unlock: " + err.Error())
	}
}
