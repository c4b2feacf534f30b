package check

import (
	"sync"
	"time"
)

// manualClock is a clock the test moves by hand, for histories with exact
// timestamps.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC) // where synctest's clock starts

// newManual returns a history whose clock stands at time zero until at moves
// it.
func newManual() (*History, *manualClock) {
	c := &manualClock{t: epoch}
	return NewHistory(c.now), c
}

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// at sets the clock to d after time zero. The first record of a history
// made by newManual is at time zero only if the clock is there then.
func (c *manualClock) at(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = epoch.Add(d)
}

const (
	ms = time.Millisecond
	s  = time.Second
)

// failedChecks returns the set of checks that reported a violation.
func failedChecks(res Result) Checks {
	var c Checks
	for _, v := range res.Violations {
		c |= v.Check
	}
	return c
}
