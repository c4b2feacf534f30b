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

// Lock takes the EX lock, waiting as long as it takes. sync.Locker has no
// way to return an error: while the master is unreachable (or the cluster
// has no quorum) Lock retries; it panics if the node is closed or the
// request is invalid, which are programming errors.
func (m *Mutex) Lock() {
	wait := time.Millisecond
	for {
		lk, err := m.ls.Lock(context.Background(), m.resource, modes.EX)
		if err == nil {
			m.held.Store(lk)
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
	lk, err := m.ls.TryLock(context.Background(), m.resource, modes.EX)
	if err != nil {
		return false
	}
	m.held.Store(lk)
	return true
}

// Unlock releases the lock. Like sync.Mutex, unlocking an unlocked Mutex is
// a run-time error.
func (m *Mutex) Unlock() {
	lk := m.held.Swap(nil)
	if lk == nil {
		panic("dlm: Unlock of unlocked Mutex")
	}
	if err := lk.Unlock(); err != nil && !errors.Is(err, ErrLockLost) && !errors.Is(err, ErrClosed) {
		panic("dlm: Mutex.Unlock: " + err.Error())
	}
}
