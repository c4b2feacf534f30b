package forever

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

var (
	errCurable   = errors.New("curable")
	errIncurable = errors.New("incurable")
)

func incurable(err error) bool { return errors.Is(err, errIncurable) }

// TestRetriesWithBackoff: curable errors are retried, with waits that
// double from 1 ms up to a second, until the lock is granted.
func TestRetriesWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Time
		lock := func(context.Context) error {
			calls = append(calls, time.Now())
			if len(calls) < 14 {
				return errCurable
			}
			return nil
		}
		if !Lock(lock, incurable, func(error) { t.Error("stuck on a curable error") }, nil) {
			t.Fatal("not granted")
		}
		want := time.Millisecond
		for i := 1; i < len(calls); i++ {
			if got := calls[i].Sub(calls[i-1]); got != want {
				t.Fatalf("wait %d: %v, want %v", i, got, want)
			}
			want = min(2*want, time.Second)
		}
	})
}

// TestIncurableWaitsForever: an incurable error is reported once and Lock
// does not return (here until never closes) nor call lock again.
func TestIncurableWaitsForever(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls, reported := 0, 0
		lock := func(context.Context) error { calls++; return errIncurable }
		never := make(chan struct{})
		done := make(chan bool, 1)
		go func() { done <- Lock(lock, incurable, func(error) { reported++ }, never) }()
		time.Sleep(time.Hour)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Lock returned on an incurable error")
		default:
		}
		close(never)
		if <-done {
			t.Fatal("reported a grant")
		}
		if calls != 1 || reported != 1 {
			t.Fatalf("calls %d, reports %d; want 1, 1", calls, reported)
		}
	})
}
