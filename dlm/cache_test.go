package dlm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sync/errgroup"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
)

func mustCache(t testing.TB, ls *Lockspace, cfg CacheConfig) *Cache {
	t.Helper()
	c, err := ls.NewCache(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustAcquire(t testing.TB, c *Cache, res string) *Hold {
	t.Helper()
	h, err := c.Acquire(bg, res)
	if err != nil {
		t.Fatalf("acquire %s: %v", res, err)
	}
	return h
}

func mustRelease(t testing.TB, h *Hold) {
	t.Helper()
	if err := h.Release(); err != nil {
		t.Fatalf("release %s: %v", h.Resource(), err)
	}
}

func counterValue(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// recvWithin receives from ch, failing the test if nothing comes within
// 10 s (fake time in synctest), so that a bug shows as a failure, not a
// hang.
func recvWithin[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing within 10s", what)
		panic("unreachable")
	}
}

// masterLocks returns the locks at resource's master, by queue.
func (c *cluster) masterLocks(resource string) (granted, waiting []master.LockState) {
	for _, ls := range c.live() {
		if rs, ok := ls.masterState(resource); ok {
			for _, l := range rs.Locks {
				if l.Queue == master.QueueGranted {
					granted = append(granted, l)
				} else {
					waiting = append(waiting, l)
				}
			}
		}
	}
	return granted, waiting
}

// TestCacheSharesOneLock: concurrent holds on one node share one PR lock
// at the master, it stays cached after the last hold, and the next hold
// costs no request.
func TestCacheSharesOneLock(t *testing.T) {
	both(t, func(t *testing.T, c *cluster) {
		res := c.resourceOn(1, "cached")
		cache := mustCache(t, c.ls[0], DefaultCacheConfig())
		defer cache.Close()
		misses := c.nodes[0].met.cache[cacheMiss]
		hits := c.nodes[0].met.cache[cacheHit]
		m0, h0 := counterValue(t, misses), counterValue(t, hits)
		holds := []*Hold{mustAcquire(t, cache, res), mustAcquire(t, cache, res), mustAcquire(t, cache, res)}
		granted, waiting := c.masterLocks(res)
		if len(granted) != 1 || len(waiting) != 0 || granted[0].Granted != modes.PR {
			t.Fatalf("master has %v granted, %v waiting; want one PR", granted, waiting)
		}
		tok := holds[0].Token()
		for _, h := range holds {
			if h.Token() != tok || h.Mode() != modes.PR || h.Resource() != res {
				t.Fatalf("hold %s %v token %d, want %s PR token %d", h.Resource(), h.Mode(), h.Token(), res, tok)
			}
			mustRelease(t, h)
		}
		if cache.Idle() != 1 {
			t.Fatalf("idle %d, want 1", cache.Idle())
		}
		if g, _ := c.masterLocks(res); len(g) != 1 {
			t.Fatalf("cached lock gone from the master: %v", g)
		}
		h := mustAcquire(t, cache, res)
		if h.Token() != tok {
			t.Fatalf("token %d after caching, want %d", h.Token(), tok)
		}
		if m, hit := counterValue(t, misses)-m0, counterValue(t, hits)-h0; m != 1 || hit != 3 {
			t.Fatalf("misses %v hits %v, want 1 and 3", m, hit)
		}
		if err := h.Release(); err != nil {
			t.Fatal(err)
		}
		if err := h.Release(); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("second release: %v, want ErrNotHeld", err)
		}
		if err := cache.Close(); err != nil {
			t.Fatal(err)
		}
		c.settle(c.free(res))
		if _, err := cache.Acquire(bg, res); !errors.Is(err, ErrClosed) {
			t.Fatalf("acquire after close: %v, want ErrClosed", err)
		}
	})
}

// TestCacheWriterFIFO: a writer waiting for cached locks retires them: the
// holds taken before run to their end, a reader arriving after the writer
// waits behind it, and the writer is granted once the holds end.
func TestCacheWriterFIFO(t *testing.T) {
	both(t, func(t *testing.T, c *cluster) {
		res := c.resourceOn(1, "fifo")
		told := make(chan modes.Mode, 4)
		cfg := DefaultCacheConfig()
		cfg.OnBlocking = func(r string, want modes.Mode) {
			if r == res {
				told <- want
			}
		}
		c0, c2 := mustCache(t, c.ls[0], cfg), mustCache(t, c.ls[2], cfg)
		defer c0.Close()
		defer c2.Close()
		h0, h2 := mustAcquire(t, c0, res), mustAcquire(t, c2, res)
		idle := mustAcquire(t, c2, res)
		mustRelease(t, idle) // the lock of node 2 is still held by h2
		readToken := h0.Token()
		writer := make(chan *Lock, 1)
		go func() { writer <- mustLock(t, c.ls[1], res, modes.EX) }()
		for range 2 {
			if m := recvWithin(t, told, "blocking callback"); m != modes.EX {
				t.Fatalf("blocking callback with %v, want EX", m)
			}
		}
		reader := make(chan *Hold, 1)
		go func() { reader <- mustAcquire(t, c0, res) }()
		c.settle(c.queued(res, 2)) // the writer, and node 0's new lock behind it
		select {
		case <-writer:
			t.Fatal("writer granted while holds last")
		case <-reader:
			t.Fatal("reader overtook the waiting writer")
		default:
		}
		mustRelease(t, h0)
		mustRelease(t, h2)
		w := recvWithin(t, writer, "writer after the holds ended")
		if w.Token() <= readToken {
			t.Fatalf("writer token %d not above the readers' %d", w.Token(), readToken)
		}
		c.settle(c.queued(res, 1))
		select {
		case <-reader:
			t.Fatal("reader granted while the writer holds EX")
		default:
		}
		mustUnlock(t, w)
		r := recvWithin(t, reader, "reader after the writer")
		if r.Token() <= w.Token() {
			t.Fatalf("reader token %d not above the writer's %d", r.Token(), w.Token())
		}
		mustRelease(t, r)
		if c2.Idle() != 0 {
			t.Fatalf("node 2 keeps %d idle locks after the writer retired them", c2.Idle())
		}
	})
}

// TestCacheValueBlock: a hold sees the value the last writer stored.
func TestCacheValueBlock(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		res := c.resourceOn(2, "lvb")
		cache := mustCache(t, c.ls[0], DefaultCacheConfig())
		defer cache.Close()
		keep := mustLock(t, c.ls[2], res, modes.NL) // keeps the value alive
		defer mustUnlock(t, keep)
		for _, v := range []string{"one", "two"} {
			w := mustLock(t, c.ls[1], res, modes.EX)
			if err := w.SetValue([]byte(v)); err != nil {
				t.Fatal(err)
			}
			mustUnlock(t, w)
			h := mustAcquire(t, cache, res)
			got, ok := h.Value()
			if !ok || string(got) != v {
				t.Fatalf("value %q valid %v, want %q", got, ok, v)
			}
			got[0] = 'X' // a copy: the cached value is not changed
			if again, _ := h.Value(); string(again) != v {
				t.Fatalf("value changed to %q through a copy", again)
			}
			mustRelease(t, h)
		}
	})
}

// TestCacheIdleLimit: beyond MaxIdle the oldest idle lock is released;
// with MaxIdle 0 the last hold releases the lock.
func TestCacheIdleLimit(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		for _, max := range []int{0, 2} {
			cfg := DefaultCacheConfig()
			cfg.MaxIdle = max
			cache := mustCache(t, c.ls[0], cfg)
			var names []string
			for i := range 6 {
				res := c.resourceOn(i%3, fmt.Sprintf("idle%d-%d", max, i))
				names = append(names, res)
				mustRelease(t, mustAcquire(t, cache, res))
			}
			c.settle(nil)
			if cache.Idle() != max {
				t.Fatalf("MaxIdle %d: %d idle", max, cache.Idle())
			}
			held := 0
			for _, res := range names {
				if g, _ := c.masterLocks(res); len(g) > 0 {
					held++
				}
			}
			if held != max {
				t.Fatalf("MaxIdle %d: the masters hold %d locks of the cache", max, held)
			}
			if err := cache.Close(); err != nil {
				t.Fatal(err)
			}
			c.settle(nil)
			for _, res := range names {
				if !c.free(res)() {
					t.Fatalf("%s still locked after Close", res)
				}
			}
		}
	})
}

// TestCacheTryAndCancel: TryAcquire fails at once while a writer holds the
// resource and leaves nothing queued; an Acquire gives up with its context;
// both leave the cache usable.
func TestCacheTryAndCancel(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		res := c.resourceOn(1, "try")
		cache := mustCache(t, c.ls[0], DefaultCacheConfig())
		defer cache.Close()
		w := mustLock(t, c.ls[2], res, modes.EX)
		if _, err := cache.TryAcquire(bg, res); !errors.Is(err, ErrNotQueued) {
			t.Fatalf("try while EX held: %v, want ErrNotQueued", err)
		}
		c.settle(c.queued(res, 0))
		ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
		defer cancel()
		// Two waiters: the one that requested the lock and one waiting for
		// its outcome; both time out.
		errs := make(chan error, 2)
		for range 2 {
			go func() {
				_, err := cache.Acquire(ctx, res)
				errs <- err
			}()
		}
		for range 2 {
			if err := recvWithin(t, errs, "timed-out acquire"); !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("acquire past its deadline: %v, want ErrTimeout", err)
			}
		}
		c.settle(c.queued(res, 0))
		mustUnlock(t, w)
		c.settle(c.free(res)) // the unlock reached the master
		h, err := cache.TryAcquire(bg, res)
		if err != nil {
			t.Fatalf("try on a free resource: %v", err)
		}
		h2, err := cache.TryAcquire(bg, res) // cached: no request at all
		if err != nil {
			t.Fatalf("try on a cached lock: %v", err)
		}
		mustRelease(t, h)
		mustRelease(t, h2)
	})
}

// TestCacheBadInput: bad configurations and names are refused with clear
// errors, and nothing is requested.
func TestCacheBadInput(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 1, nil)
		defer c.close()
		for _, cfg := range []CacheConfig{
			{Mode: modes.EX}, {Mode: modes.PW}, {Mode: modes.NL}, {Mode: modes.Mode(99)},
		} {
			if _, err := c.ls[0].NewCache(cfg); !errors.Is(err, ErrInvalidMode) {
				t.Errorf("mode %v: %v, want ErrInvalidMode", cfg.Mode, err)
			}
		}
		if _, err := c.ls[0].NewCache(CacheConfig{Mode: modes.PR, MaxIdle: -1}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("negative MaxIdle: %v, want ErrInvalidArgument", err)
		}
		for _, m := range []modes.Mode{modes.CR, modes.CW, modes.PR} {
			if err := (CacheConfig{Mode: m}).Validate(); err != nil {
				t.Errorf("mode %v refused: %v", m, err)
			}
		}
		cache := mustCache(t, c.ls[0], DefaultCacheConfig())
		for _, name := range []string{"", strings.Repeat("n", 1<<16)} {
			if _, err := cache.Acquire(bg, name); !errors.Is(err, ErrInvalidName) {
				t.Errorf("name of %d bytes: %v, want ErrInvalidName", len(name), err)
			}
		}
		if n := c.nodes[0].nlocks.Load(); n != 0 {
			t.Fatalf("%d locks after refused acquires", n)
		}
	})
}

// TestCacheLostWithNode: holds see their node's lock lost when the node
// closes, and say so on release.
func TestCacheLostWithNode(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		res := c.resourceOn(1, "lost")
		cache := mustCache(t, c.ls[0], DefaultCacheConfig())
		h := mustAcquire(t, cache, res)
		if h.Err() != nil {
			t.Fatalf("fresh hold has error %v", h.Err())
		}
		if err := c.nodes[0].Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-h.Lost():
		default:
			t.Fatal("hold not lost after its node closed")
		}
		// The lost lock is still cached (h holds it) but is never joined.
		if _, err := cache.Acquire(bg, res); !errors.Is(err, ErrClosed) {
			t.Fatalf("acquire beside a lost hold: %v, want ErrClosed", err)
		}
		if err := h.Release(); !errors.Is(err, ErrClosed) {
			t.Fatalf("release after close: %v, want ErrClosed", err)
		}
		if _, err := cache.Acquire(bg, res); !errors.Is(err, ErrClosed) {
			t.Fatalf("acquire on a closed node: %v, want ErrClosed", err)
		}
		c.nodes[0] = nil
		c.settle(c.free(res))
	})
}

// TestCacheReadersAndWriters: readers holding cached PR locks and writers
// taking EX on the same resources from every node never overlap, and
// everything is released at the end. Seeded, in synctest.
func TestCacheReadersAndWriters(t *testing.T) {
	for seed := range uint64(3) {
		synctestRun(t, func(t *testing.T) {
			cacheStress(t, seed)
		})
	}
}

func cacheStress(t *testing.T, seed uint64) {
	c := startMem(t, 3, nil)
	defer c.close()
	resources := []string{"r0", "r1", "r2", "r3"}
	type state struct{ readers, writers atomic.Int32 }
	states := make([]state, len(resources))
	var caches []*Cache
	for i, ls := range c.ls {
		cfg := DefaultCacheConfig()
		cfg.MaxIdle = i // 0, 1 and 2 idle locks on the three nodes
		caches = append(caches, mustCache(t, ls, cfg))
	}
	var reads, writes atomic.Int64
	ctx, cancel := context.WithTimeout(bg, time.Minute) // a stall fails, not hangs
	defer cancel()
	var g errgroup.Group
	for w := range 12 {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		node := w % len(c.ls)
		var mu sync.Mutex // the worker's rng
		intn := func(n int) int { mu.Lock(); defer mu.Unlock(); return rng.IntN(n) }
		g.Go(func() error {
			for range 60 {
				r := intn(len(resources))
				st := &states[r]
				if intn(10) < 8 {
					h, err := caches[node].Acquire(ctx, resources[r])
					if err != nil {
						return err
					}
					st.readers.Add(1)
					if st.writers.Load() != 0 {
						return errors.New("reader admitted while a writer holds EX")
					}
					time.Sleep(time.Duration(intn(500)) * time.Microsecond)
					st.readers.Add(-1)
					reads.Add(1)
					if err := h.Release(); err != nil {
						return err
					}
				} else {
					lk, err := c.ls[node].Lock(ctx, resources[r], modes.EX)
					if err != nil {
						return err
					}
					if st.writers.Add(1) != 1 || st.readers.Load() != 0 {
						return errors.New("writer admitted beside another holder")
					}
					time.Sleep(time.Duration(intn(500)) * time.Microsecond)
					st.writers.Add(-1)
					writes.Add(1)
					if err := lk.Unlock(); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	for _, cache := range caches {
		if err := cache.Close(); err != nil {
			t.Fatal(err)
		}
	}
	c.settle(nil)
	for _, res := range resources {
		if !c.free(res)() {
			t.Fatalf("seed %d: %s still locked after every cache closed", seed, res)
		}
	}
	if reads.Load() == 0 || writes.Load() == 0 {
		t.Fatalf("seed %d: %d reads, %d writes", seed, reads.Load(), writes.Load())
	}
}

// TestCacheAcrossRecovery: a cached lock whose master dies is rebuilt at
// the new master with its holds intact (a writer still waits for them, and
// the blocking callback still retires it); a node that dies holding a
// cached lock lets a writer in after the lock-delay.
func TestCacheAcrossRecovery(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 5, nil) // two die: three keep the quorum
		defer c.close()
		res := c.resourceOn(1, "rec")
		c0, c3 := mustCache(t, c.ls[0], DefaultCacheConfig()), mustCache(t, c.ls[3], DefaultCacheConfig())
		defer c0.Close()
		h0 := mustAcquire(t, c0, res)
		h3 := mustAcquire(t, c3, res)
		c.kill(1) // the master
		c.waitView(4, 10*time.Second)
		if h0.Err() != nil || h3.Err() != nil {
			t.Fatalf("holds lost with their master: %v, %v", h0.Err(), h3.Err())
		}
		again := mustAcquire(t, c0, res) // still cached: joins h0's lock
		if again.Token() != h0.Token() {
			t.Fatalf("token %d after remastering, want the cached %d", again.Token(), h0.Token())
		}
		writer := make(chan *Lock, 1)
		go func() { writer <- mustLock(t, c.ls[2], res, modes.EX) }()
		c.settle(c.queued(res, 1))
		mustRelease(t, h0)
		mustRelease(t, again)
		select {
		case <-writer:
			t.Fatal("writer granted while node 3's hold lasts")
		default:
		}
		start := time.Now()
		c.kill(3) // dies holding its cached lock
		w := recvWithin(t, writer, "writer after the reader's node died")
		// The lock-delay runs from the survivors' last acknowledgement of the
		// dead node's heartbeat, at most one heartbeat interval before it died.
		rc := c.nodes[0].rec.Config()
		if took, least := time.Since(start), rc.LockDelay()-rc.HeartbeatInterval; took < least {
			t.Fatalf("writer granted %v after the holder died, before the lock-delay allows (%v)", took, least)
		}
		if w.Token() <= h3.Token() {
			t.Fatalf("writer token %d not above the readers' %d", w.Token(), h3.Token())
		}
		mustUnlock(t, w)
		c.settle(c.free(res))
	})
}
