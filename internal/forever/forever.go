// Package forever retries a lock until it is granted, for the Lock methods
// of sync.Locker adapters, which cannot return an error.
package forever

import (
	"context"
	"time"
)

// Lock calls lock until it succeeds and reports true. An error a retry can
// cure is retried with a backoff from a millisecond doubling to a second.
// One that no retry can cure (incurable says which: a closed node, a bad
// name) can never be granted: Lock calls stuck with it, if stuck is not
// nil, and waits on never, forever, as a sync.Mutex nobody unlocks would.
// never is nil except in tests, which close it to end the wait; Lock then
// reports false.
func Lock(lock func(context.Context) error, incurable func(error) bool, stuck func(error), never <-chan struct{}) bool {
	wait := time.Millisecond
	for {
		err := lock(context.Background())
		if err == nil {
			return true
		}
		if incurable(err) {
			if stuck != nil {
				stuck(err)
			}
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
