package lockapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/seed-a6839e30/dlm/internal/forever"
	"github.com/seed-a6839e30/dlm/modes"
)

// RWMutex is a cluster-wide reader/writer lock on one resource, in the
// shape of sync.RWMutex: readers hold PR, which they share with each
// other, and a writer holds EX. The master's FIFO queue orders them
// across nodes, so a stream of readers cannot starve a writer (a reader
// that comes after a waiting writer waits behind it), and nothing is
// missed: when the last holder in the way leaves, the master grants the
// head of the queue at once.
//
// Each RLock takes a PR lock of its own; an RUnlock releases one of this
// RWMutex's read locks (they are alike, as sync.RWMutex's read locks are).
// Like sync.RWMutex, a goroutine that holds a read lock and calls Lock
// waits for itself; use Upgrade.
//
// Upgrade converts one read lock PR→EX in place. Two holders upgrading at
// once (anywhere in the cluster) would each wait for the other's PR
// forever: the master finds that conversion deadlock at once and fails
// the later Upgrade with ErrDeadlock; that caller still holds its read
// lock, and should RUnlock it so the other can proceed. Downgrade converts
// the write lock EX→PR in place; it never waits, and the caller holds a
// read lock afterwards.
//
// Lock, RLock and Unlock, RUnlock cannot return errors; on a closed
// lockspace Lock and RLock wait forever, as Mutex.Lock does. The Context
// variants return them.
//
// RWMutex is built on Lockspace alone: it works the same on an embedded
// node's lockspace and on a client's.
type RWMutex struct {
	ls       Lockspace
	resource string
	log      *slog.Logger

	mu      sync.Mutex
	readers []Lock // read locks held, in no order
	writer  Lock
}

// NewRWMutex returns a reader/writer lock on resource in ls. log (nil:
// nowhere) hears why a Lock or RLock can never be granted and why an
// unlock failed, which they cannot return.
func NewRWMutex(ls Lockspace, resource string, log *slog.Logger) *RWMutex {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &RWMutex{ls: ls, resource: resource, log: log}
}

// RLockContext takes a read lock (PR), waiting as long as ctx allows.
func (m *RWMutex) RLockContext(ctx context.Context, opts ...Option) error {
	lk, err := m.ls.Acquire(ctx, m.resource, modes.PR, opts...)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.readers = append(m.readers, lk)
	m.mu.Unlock()
	return nil
}

// RLock takes a read lock, waiting as long as it takes.
func (m *RWMutex) RLock() {
	forever.Lock(func(ctx context.Context) error { return m.RLockContext(ctx) }, Incurable, m.stuck, nil)
}

// TryRLock takes a read lock if it can at once, and reports whether it did.
func (m *RWMutex) TryRLock() bool {
	lk, err := m.ls.Acquire(context.Background(), m.resource, modes.PR, Try(), FailFast())
	if err != nil {
		return false
	}
	m.mu.Lock()
	m.readers = append(m.readers, lk)
	m.mu.Unlock()
	return true
}

// RUnlock releases one read lock. Like sync.RWMutex, it is a run-time
// error (a panic) if no read lock is held.
func (m *RWMutex) RUnlock() {
	m.mu.Lock()
	n := len(m.readers)
	if n == 0 {
		m.mu.Unlock()
		panic("dlm: RUnlock of unlocked RWMutex")
	}
	lk := m.readers[n-1]
	m.readers[n-1] = nil
	m.readers = m.readers[:n-1]
	m.mu.Unlock()
	m.release(lk)
}

// LockContext takes the write lock (EX), waiting as long as ctx allows.
func (m *RWMutex) LockContext(ctx context.Context, opts ...Option) error {
	lk, err := m.ls.Acquire(ctx, m.resource, modes.EX, opts...)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.writer = lk
	m.mu.Unlock()
	return nil
}

// Lock takes the write lock, waiting as long as it takes.
func (m *RWMutex) Lock() {
	forever.Lock(func(ctx context.Context) error { return m.LockContext(ctx) }, Incurable, m.stuck, nil)
}

func (m *RWMutex) stuck(err error) {
	m.log.Error("an RWMutex's Lock or RLock can never be granted and waits forever; use LockContext or RLockContext",
		"lockspace", m.ls.Name(), "resource", m.resource, "err", err)
}

// TryLock takes the write lock if it can at once, and reports whether it
// did.
func (m *RWMutex) TryLock() bool {
	lk, err := m.ls.Acquire(context.Background(), m.resource, modes.EX, Try(), FailFast())
	if err != nil {
		return false
	}
	m.mu.Lock()
	m.writer = lk
	m.mu.Unlock()
	return true
}

// Unlock releases the write lock. It is a run-time error (a panic) if the
// write lock is not held.
func (m *RWMutex) Unlock() {
	m.mu.Lock()
	lk := m.writer
	m.writer = nil
	m.mu.Unlock()
	if lk == nil {
		panic("dlm: Unlock of unlocked RWMutex")
	}
	m.release(lk)
}

func (m *RWMutex) release(lk Lock) {
	if err := lk.Unlock(); err != nil && !errors.Is(err, ErrLockLost) && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNoQuorum) {
		m.log.Warn("RWMutex unlock", "lockspace", m.ls.Name(), "resource", m.resource, "err", err)
	}
}

// Upgrade turns a read lock the caller holds into the write lock,
// converting it PR→EX in place: it waits (as long as ctx allows) for the
// other readers to leave, and is granted before any request that queued
// after the read lock. With another Upgrade in progress it fails at once
// with ErrDeadlock (see RWMutex); when it fails for any reason the caller
// still holds its read lock. On success the caller holds the write lock
// and releases it with Unlock (or Downgrade).
func (m *RWMutex) Upgrade(ctx context.Context) error {
	m.mu.Lock()
	n := len(m.readers)
	if n == 0 || m.writer != nil {
		m.mu.Unlock()
		return fmt.Errorf("%w: Upgrade without a read lock of this RWMutex", ErrNotHeld)
	}
	lk := m.readers[n-1]
	m.readers[n-1] = nil
	m.readers = m.readers[:n-1]
	m.mu.Unlock()
	err := lk.Convert(ctx, modes.EX)
	if err != nil && lk.Mode() == modes.EX {
		// Granted after the caller gave up: back to what it asked to keep.
		_ = lk.Convert(context.Background(), modes.PR)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.readers = append(m.readers, lk)
		return err
	}
	m.writer = lk
	return nil
}

// Downgrade turns the write lock into a read lock, converting it EX→PR in
// place: it never waits, readers queued behind it are let in at once, and
// no writer can take the lock in between. The lock keeps its fencing
// token. The caller then holds a read lock (RUnlock releases it).
func (m *RWMutex) Downgrade() error {
	m.mu.Lock()
	lk := m.writer
	m.writer = nil
	m.mu.Unlock()
	if lk == nil {
		return fmt.Errorf("%w: Downgrade without the write lock of this RWMutex", ErrNotHeld)
	}
	err := lk.Convert(context.Background(), modes.PR)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil && lk.Mode() == modes.EX {
		m.writer = lk
		return err
	}
	m.readers = append(m.readers, lk)
	return err
}

// Token returns the fencing token of the write lock while it is held, 0
// otherwise: send it with the writes the lock protects.
func (m *RWMutex) Token() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.writer == nil {
		return 0
	}
	return m.writer.Token()
}

// RLocker returns a sync.Locker whose Lock and Unlock are RLock and
// RUnlock.
func (m *RWMutex) RLocker() sync.Locker { return rlocker{m} }

type rlocker struct{ m *RWMutex }

func (r rlocker) Lock()   { r.m.RLock() }
func (r rlocker) Unlock() { r.m.RUnlock() }
