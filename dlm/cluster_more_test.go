package dlm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seed-a6839e30/dlm/modes"
)

// TestFencingTokensIncrease: goroutines on every node take turns holding
// one EX lock; every holder's token is larger than the one before it.
func TestFencingTokensIncrease(t *testing.T) {
	both(t, func(t *testing.T, c *cluster) {
		for masterIdx := range 2 {
			res := c.resourceOn(masterIdx, "fence")
			var mu sync.Mutex // held only by the lock's holder
			var last uint64
			var g errgroup.Group
			for i := range c.ls {
				for range 4 {
					g.Go(func() error {
						for range 10 {
							lk, err := c.ls[i].Lock(bg, res, modes.EX)
							if err != nil {
								return err
							}
							mu.Lock()
							tok := lk.Token()
							if tok <= last {
								mu.Unlock()
								return fmt.Errorf("token %d after %d", tok, last)
							}
							last = tok
							mu.Unlock()
							if err := lk.Unlock(); err != nil {
								return err
							}
						}
						return nil
					})
				}
			}
			if err := g.Wait(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestLVBCounterExact: goroutines on several nodes increment a counter kept
// only in the value block, under EX. No increment is lost.
func TestLVBCounterExact(t *testing.T) {
	both(t, func(t *testing.T, c *cluster) {
		res := c.resourceOn(1, "counter")
		// A resource with no lock forgets its value: an NL lock keeps it.
		keep := mustLock(t, c.ls[2], res, modes.NL)
		defer mustUnlock(t, keep)
		const perWorker = 25
		var g errgroup.Group
		workers := 0
		for i := range c.ls {
			for range 3 {
				workers++
				g.Go(func() error {
					for range perWorker {
						if err := increment(bg, c.ls[i], res); err != nil {
							return err
						}
					}
					return nil
				})
			}
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		lk := mustLock(t, c.ls[0], res, modes.PR)
		v, ok := lk.Value()
		if got := binary.BigEndian.Uint64(v); !ok || got != uint64(workers*perWorker) {
			t.Fatalf("counter = %d (valid %v), want %d", got, ok, workers*perWorker)
		}
		mustUnlock(t, lk)
	})
}

// TestReentrantOwner: a reentrant owner's second acquisition of a resource
// in a covered mode is counted, not queued; a stronger mode is refused.
func TestReentrantOwner(t *testing.T) {
	both(t, func(t *testing.T, c *cluster) {
		res := c.resourceOn(1, "reent")
		o := c.ls[0].NewOwner(Reentrant())
		a, err := o.Lock(bg, res, modes.EX)
		if err != nil {
			t.Fatal(err)
		}
		b, err := o.Lock(bg, res, modes.PR) // covered by EX
		if err != nil || b != a || o.Held(res) != 2 {
			t.Fatalf("reentrant PR: %v, same lock %v, held %d", err, b == a, o.Held(res))
		}
		pr := c.ls[0].NewOwner(Reentrant())
		p1, _ := pr.Lock(bg, res+"x", modes.PR)
		if _, err := pr.Lock(bg, res+"x", modes.EX); !errors.Is(err, ErrReentrantMode) {
			t.Fatalf("upgrade through reentry: %v", err)
		}
		mustUnlock(t, p1)
		// The first unlock only counts down: another node still cannot get in.
		mustUnlock(t, a)
		if _, err := c.ls[1].TryLock(bg, res, modes.PR); !errors.Is(err, ErrNotQueued) {
			t.Fatalf("after one of two unlocks: %v", err)
		}
		mustUnlock(t, b)
		c.settle(c.free(res))
		lk, err := c.ls[1].TryLock(bg, res, modes.EX)
		if err != nil {
			t.Fatalf("after the last unlock: %v", err)
		}
		mustUnlock(t, lk)
		if err := b.Unlock(); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("unlock past zero: %v", err)
		}
		// A non-reentrant owner queues behind itself: it needs TryLock.
		plain := c.ls[0].NewOwner()
		x, _ := plain.Lock(bg, res, modes.EX)
		if _, err := plain.TryLock(bg, res, modes.EX); !errors.Is(err, ErrNotQueued) {
			t.Fatalf("plain owner relock: %v", err)
		}
		mustUnlock(t, x)
	})
}

// TestLimitsHold: a client flooding requests gets ErrLimit, and the master
// keeps no more than its limit.
func TestLimitsHold(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, func(cfg *Config) {
			cfg.MaxLocks = 50
			cfg.DefaultLockspace.MaxWaitersPerResource = 10
			cfg.DefaultLockspace.MaxNameLen = 16
		})
		defer c.close()
		res := c.resourceOn(1, "lim")
		held := mustLock(t, c.ls[0], res, modes.EX)
		ctx, cancel := context.WithCancel(bg)
		errs := make(chan error, 100)
		for range 30 {
			go func() {
				_, err := c.ls[2].Lock(ctx, res, modes.EX)
				errs <- err
			}()
		}
		synctestWait()
		if rs, _ := c.ls[1].masterState(res); len(rs.Locks) != 11 {
			t.Fatalf("master queued %d locks, want 1 + 10 waiters", len(rs.Locks))
		}
		limited := 0
		for range 20 {
			if err := <-errs; !errors.Is(err, ErrLimit) {
				t.Fatalf("flood request: %v, want ErrLimit", err)
			}
			limited++
		}
		cancel()
		for range 10 {
			<-errs
		}
		// The node's own cap on locks.
		var locks []*Lock
		for i := range 60 {
			lk, err := c.ls[0].Lock(bg, fmt.Sprintf("cap-%d", i), modes.NL)
			if err != nil {
				if !errors.Is(err, ErrLimit) || len(locks) != 49 {
					t.Fatalf("lock %d: %v (held %d)", i, err, len(locks))
				}
				break
			}
			locks = append(locks, lk)
		}
		for _, lk := range locks {
			mustUnlock(t, lk)
		}
		if _, err := c.ls[0].Lock(bg, "a-name-longer-than-16", modes.NL); !errors.Is(err, ErrInvalidName) {
			t.Fatalf("long name: %v", err)
		}
		mustUnlock(t, held)
	})
}

// TestTTLExpiry: a TTL lock that is not renewed is lost on its holder's
// clock first and then released by its master; KeepAlive keeps one alive.
func TestTTLExpiry(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		for masterIdx := range 2 {
			res := c.resourceOn(masterIdx, "ttl")
			lk := mustLock(t, c.ls[0], res, modes.EX, WithTTL(time.Second))
			start := time.Now()
			waiter := make(chan *Lock, 1)
			go func() { waiter <- mustLock(t, c.ls[2], res, modes.EX) }()
			<-lk.Lost()
			lostAt := time.Since(start)
			next := <-waiter
			grantedAt := time.Since(start)
			if !errors.Is(lk.Err(), ErrLockLost) || lostAt >= time.Second || grantedAt < time.Second {
				t.Fatalf("lost after %v (%v), next holder granted after %v", lostAt, lk.Err(), grantedAt)
			}
			if next.Token() <= lk.Token() {
				t.Fatalf("next token %d not above %d", next.Token(), lk.Token())
			}
			if err := lk.Unlock(); !errors.Is(err, ErrLockLost) {
				t.Fatalf("unlock of an expired lock: %v", err)
			}
			mustUnlock(t, next)

			kept := mustLock(t, c.ls[0], res, modes.EX, WithTTL(time.Second))
			ctx, cancel := context.WithCancel(bg)
			done := make(chan error, 1)
			go func() { done <- kept.KeepAlive(ctx) }()
			time.Sleep(5 * time.Second)
			select {
			case <-kept.Lost():
				t.Fatalf("kept-alive lock lost: %v", kept.Err())
			default:
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			mustUnlock(t, kept)
		}
	})
}

// TestCloseReleasesLocks: a closing node releases its locks (others get
// them), fails its waiting requests and tells its holders.
func TestCloseReleasesLocks(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		res := c.resourceOn(1, "close")
		held := mustLock(t, c.ls[0], res, modes.EX)
		other := c.resourceOn(2, "close-other")
		blocker := mustLock(t, c.ls[1], other, modes.EX)
		errc := make(chan error, 1)
		go func() {
			_, err := c.ls[0].Lock(bg, other, modes.EX)
			errc <- err
		}()
		next := make(chan *Lock, 1)
		go func() { next <- mustLock(t, c.ls[2], res, modes.EX) }()
		synctestWait()
		if err := c.nodes[0].Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; !errors.Is(err, ErrClosed) {
			t.Fatalf("waiting request on close: %v", err)
		}
		<-held.Lost()
		if !errors.Is(held.Err(), ErrClosed) {
			t.Fatalf("held lock: %v", held.Err())
		}
		mustUnlock(t, <-next)
		mustUnlock(t, blocker)
		synctestWait()
		if _, ok := c.ls[2].masterState(other); ok {
			t.Fatal("the closed node's cancelled request is still queued")
		}
		if _, err := c.ls[0].Lock(bg, res, modes.NL); !errors.Is(err, ErrClosed) {
			t.Fatalf("lock on a closed node: %v", err)
		}
	})
}

// TestPiggybackedUnlocksKeepValues: over TCP, one goroutine per node locks
// a resource another node masters, increments the value block and unlocks.
// With nobody else waiting on its link, such an unlock rides on the next
// request (postUnlock); a request from another node that arrives first waits
// for it. First one node alone, then two in turn: every increment is seen
// by the next holder, wherever it is.
func TestPiggybackedUnlocksKeepValues(t *testing.T) {
	c := startTCP(t, 3, nil)
	defer c.close()
	res := c.resourceOn(2, "piggyback")
	keep := mustLock(t, c.ls[2], res, modes.NL) // keeps the value while nobody holds the resource
	defer mustUnlock(t, keep)
	incr := func(ls *Lockspace) error {
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		defer cancel()
		return increment(ctx, ls, res)
	}
	value := func(ls *Lockspace) uint64 {
		lk := mustLock(t, ls, res, modes.PR)
		defer mustUnlock(t, lk)
		v, ok := lk.Value()
		if !ok || len(v) != 8 {
			t.Fatalf("value %x (valid %v)", v, ok)
		}
		return binary.BigEndian.Uint64(v)
	}
	for range 100 {
		if err := incr(c.ls[0]); err != nil {
			t.Fatal(err)
		}
	}
	if got := value(c.ls[1]); got != 100 {
		t.Fatalf("after node 0's increments node 1 reads %d, want 100", got)
	}
	var g errgroup.Group
	for _, ls := range c.ls[:2] {
		g.Go(func() error {
			for range 200 {
				if err := incr(ls); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := value(c.ls[2]); got != 500 {
		t.Fatalf("counter = %d, want 500", got)
	}
}

// increment adds one to a counter kept in res's value block, under EX.
func increment(ctx context.Context, ls *Lockspace, res string) error {
	lk, err := ls.Lock(ctx, res, modes.EX)
	if err != nil {
		return err
	}
	v, _ := lk.Value()
	var n uint64
	if len(v) == 8 {
		n = binary.BigEndian.Uint64(v)
	}
	if err := lk.SetValue(binary.BigEndian.AppendUint64(nil, n+1)); err != nil {
		return err
	}
	return lk.Unlock() // writes the value back
}

// Start returns once a quorum of Members agreed a view, not once every
// member is up: three of five configured members form the cluster and
// serve locks.
func TestStartWithAQuorumOfMembers(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMemOf(t, 5, 3, nil)
		defer c.close()
		for i := range 3 {
			if got := c.nodes[i].Members(); len(got) != 3 {
				t.Errorf("%s: view of %v, want the 3 members up", c.names[i], got)
			}
		}
		mustUnlock(t, mustLock(t, c.ls[0], c.resourceOn(2, "quorum"), modes.EX))
	})
}
