package dlm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// TestLockAllOppositeOrders: two goroutines on two nodes take overlapping
// sets of EX locks, listed in opposite orders, in a loop: taking them in
// the canonical order, they never deadlock (every round ends, with no
// deadlock detection needed), and never hold a resource at once.
func TestLockAllOppositeOrders(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, func(cfg *Config) { cfg.DeadlockWait = 0 }) // no detector to bail us out
		defer c.close()
		names := []string{c.resourceOn(0, "la"), c.resourceOn(1, "lb"), c.resourceOn(2, "lc"), c.resourceOn(0, "ld")}
		var held [4]atomic.Int32
		var wg sync.WaitGroup
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				set := []int{0, 1, 2, 3}
				if g == 1 {
					set = []int{3, 2, 1} // the overlap, reversed
				}
				var reqs []Request
				for _, i := range set {
					reqs = append(reqs, Request{Resource: names[i], Mode: modes.EX})
				}
				for round := range 100 {
					ctx, cancel := context.WithTimeout(bg, time.Minute)
					locks, err := c.ls[g].LockAll(ctx, reqs)
					cancel()
					if err != nil {
						t.Errorf("goroutine %d round %d: %v", g, round, err)
						return
					}
					for k, i := range set {
						if locks[k].Resource() != names[i] {
							t.Errorf("lock %d is %q, want %q: locks come back in the order asked", k, locks[k].Resource(), names[i])
						}
						if n := held[i].Add(1); n != 1 {
							t.Errorf("%q held by %d at once", names[i], n)
						}
					}
					time.Sleep(time.Millisecond)
					for k, i := range set {
						held[i].Add(-1)
						mustUnlock(t, locks[k])
					}
				}
			}()
		}
		wg.Wait()
		for _, name := range names {
			c.settle(c.free(name))
		}
	})
}

// TestLockAllFailureReleases: a request in the middle fails (a try on a
// lock someone else holds, a context that ends while waiting): the locks
// taken before it are released, and the error names the resource.
func TestLockAllFailureReleases(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		a, b, z := c.resourceOn(1, "fa"), c.resourceOn(2, "fb"), c.resourceOn(0, "fz")
		blocker := mustLock(t, c.ls[2], b, modes.EX)
		ctx, cancel := context.WithTimeout(bg, 2*time.Second)
		_, err := c.ls[0].LockAll(ctx, []Request{{Resource: z, Mode: modes.EX}, {Resource: b, Mode: modes.PR}, {Resource: a, Mode: modes.EX}})
		cancel()
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("LockAll behind a held lock: %v", err)
		}
		if want := fmt.Sprintf("%q", b); !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not name %s", err, want)
		}
		for _, r := range []string{a, z} {
			c.settle(c.free(r))
			lk, err := c.ls[1].TryLock(bg, r, modes.EX)
			if err != nil {
				t.Fatalf("%s after a failed LockAll: %v", r, err)
			}
			mustUnlock(t, lk)
		}
		mustUnlock(t, blocker)

		// Bad input: nothing is taken at all.
		for _, reqs := range [][]Request{
			{{Resource: a, Mode: modes.EX}, {Resource: a, Mode: modes.PR}},
			{{Resource: a, Mode: modes.EX}, {Resource: "", Mode: modes.PR}},
			{{Resource: a, Mode: modes.EX}, {Resource: b, Mode: 9}},
			{{Resource: a, Mode: modes.EX}, {Resource: b, Mode: modes.PR, Options: []LockOption{WithTTL(-time.Second)}}},
		} {
			if _, err := c.ls[0].LockAll(bg, reqs); err == nil {
				t.Fatalf("LockAll(%v) succeeded", reqs)
			}
			c.settle(c.free(a))
		}
		if locks, err := c.ls[0].LockAll(bg, nil); err != nil || len(locks) != 0 {
			t.Fatalf("LockAll of nothing: %v %v", locks, err)
		}
	})
}
