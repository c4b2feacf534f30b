package lockapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// fakeSpace grants one EX lock at a time, or fails every request with err.
type fakeSpace struct {
	mu    sync.Mutex
	err   error
	held  bool
	token uint64
	calls int
}

func (s *fakeSpace) Name() string { return "fake" }

func (s *fakeSpace) Acquire(ctx context.Context, resource string, mode modes.Mode, opts ...Option) (Lock, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	switch {
	case s.err != nil:
		return nil, s.err
	case s.held && Apply(opts).Try:
		return nil, ErrNotQueued
	case s.held:
		s.mu.Unlock()
		<-ctx.Done()
		s.mu.Lock()
		return nil, fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())
	}
	s.held = true
	s.token++
	return &fakeLock{s: s, token: s.token}, nil
}

type fakeLock struct {
	Lock
	s     *fakeSpace
	token uint64
}

func (l *fakeLock) Token() uint64 { return l.token }

func (l *fakeLock) Unlock() error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if !l.s.held {
		return ErrNotHeld
	}
	l.s.held = false
	return l.s.err
}

func TestMutexLocks(t *testing.T) {
	s := &fakeSpace{}
	a, b := NewMutex(s, "r", nil), NewMutex(s, "r", nil)
	a.Lock()
	if a.Token() != 1 || b.Token() != 0 {
		t.Fatalf("tokens %d, %d; want 1, 0", a.Token(), b.Token())
	}
	if b.TryLock() {
		t.Fatal("TryLock of a locked Mutex")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if err := b.LockContext(ctx); !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext of a locked Mutex: %v", err)
	}
	a.Unlock()
	if a.Token() != 0 || !b.TryLock() || b.Token() != 2 {
		t.Fatalf("after Unlock: tokens %d, %d; want 0, 2", a.Token(), b.Token())
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Unlock of an unlocked Mutex did not panic")
		}
	}()
	a.Unlock()
}

// TestMutexLockOnClosedWaitsForever: Lock on a closed lockspace neither
// returns nor panics; it logs why once and waits. LockContext returns the
// error.
func TestMutexLockOnClosedWaitsForever(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged bytes.Buffer
		s := &fakeSpace{err: fmt.Errorf("%w: node closed", ErrClosed)}
		m := NewMutex(s, "r", slog.New(slog.NewTextHandler(&logged, nil)))
		if err := m.LockContext(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatalf("LockContext on a closed lockspace: %v", err)
		}
		never := make(chan struct{})
		m.never = never
		done := make(chan struct{})
		go func() { m.Lock(); close(done) }()
		time.Sleep(time.Hour)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Lock on a closed lockspace returned")
		default:
		}
		close(never)
		<-done
		if m.Token() != 0 || s.calls != 2 {
			t.Fatalf("token %d, calls %d; want 0, 2", m.Token(), s.calls)
		}
		if n := strings.Count(logged.String(), "can never be granted"); n != 1 {
			t.Fatalf("logged %d times: %s", n, logged.String())
		}
	})
}

// TestMutexUnlockOfLostLock: an Unlock whose lock was lost or whose
// lockspace closed does not panic; another error is logged.
func TestMutexUnlockOfLostLock(t *testing.T) {
	for _, err := range []error{ErrLockLost, ErrClosed, ErrNoQuorum, ErrUnavailable} {
		var logged bytes.Buffer
		s := &fakeSpace{}
		m := NewMutex(s, "r", slog.New(slog.NewTextHandler(&logged, nil)))
		m.Lock()
		s.err = err
		m.Unlock()
		if got, want := strings.Contains(logged.String(), "Mutex.Unlock"), errors.Is(err, ErrUnavailable); got != want {
			t.Errorf("%v: logged %v, want %v", err, got, want)
		}
	}
}
