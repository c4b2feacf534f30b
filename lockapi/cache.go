package lockapi

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/seed-a6839e30/dlm/modes"
)

// Cache shares one lock per resource among the readers of one process, as
// GFS2's glocks do over the kernel DLM: the process holds one lock in a
// shared mode (PR by default) from its Lockspace, and every Acquire on
// that resource while the lock is held is a hold on it, granted without a
// message. The lock stays cached after its last hold ends (up to
// CacheConfig.MaxIdle of them), so the next reader costs no message
// either. When a conflicting request waits for the lock, the blocking
// notification retires it: holds already taken run to their end, new
// Acquires queue a new lock behind the waiting request (FIFO, as any
// request would), and the retired lock is released when its last hold
// ends.
//
// It works over any Lockspace that delivers blocking notifications
// (OnBlocking): an embedded node's (dlm.Lockspace.NewCache) or a client's
// (client.Lockspace.NewCache), where a hold costs no round trip to the
// agent either.
//
// What a hold is not: it is not a lock of its own, so
//   - its fencing token is the token of the shared grant, the same for
//     every hold on it (tokens order exclusive grants; readers do not
//     write);
//   - deadlock detection does not see its holder: the cached lock is its
//     own owner and never waits once granted, so a cycle running through a
//     hold (a goroutine holding a read hold while it waits for another
//     lock that waits for this resource) is not found. Take locks with an
//     Owner where detection matters, and never take a second hold on a
//     resource while holding one: the second may queue behind a writer
//     that waits for the first;
//   - it has no TTL, no conversions and no value to write.
//
// A Cache is safe for concurrent use and starts no goroutine. Close it to
// release its idle locks.
type Cache struct {
	ls     Lockspace
	cfg    CacheConfig
	seed   maphash.Seed
	shards []cacheShard
	idle   atomic.Int64 // entries without holds, over every shard
	closed atomic.Bool
}

// CacheConfig configures a Cache.
type CacheConfig struct {
	// Mode is the mode of the cached locks. It must be compatible with
	// itself (CR, CW or PR), so that any number of holds can share it.
	Mode modes.Mode
	// MaxIdle is how many locks without holds the cache keeps granted
	// for later Acquires; beyond it the oldest idle lock of the resource's
	// shard is released. 0 releases a lock when its last hold ends, so
	// only concurrent holds share it.
	MaxIdle int
	// Shards is how many independently locked parts the cache's books
	// are split into, so that readers of different resources rarely
	// contend; 0 picks 64.
	Shards int
	// OnBlocking, if set, is called when a cached lock blocks another
	// request, with the resource and the mode that request wants: holders
	// should end their holds soon. It runs where the Lockspace runs its
	// locks' OnBlocking callbacks.
	OnBlocking func(resource string, want modes.Mode)
	// OnAcquire, if set, is called for every Acquire that finds the
	// resource's lock cached (hit) or requests it (not hit): a place for
	// the implementation's metrics.
	OnAcquire func(hit bool)
}

// DefaultCacheConfig caches PR locks, keeping up to 1024 idle.
func DefaultCacheConfig() CacheConfig { return CacheConfig{Mode: modes.PR, MaxIdle: 1024} }

// Validate reports the first problem with c.
func (c CacheConfig) Validate() error {
	switch {
	case !c.Mode.Valid() || c.Mode == modes.NL || !modes.Compatible(c.Mode, c.Mode):
		return fmt.Errorf("%w: cache mode %v must be CR, CW or PR", ErrInvalidMode, c.Mode)
	case c.MaxIdle < 0:
		return fmt.Errorf("%w: negative MaxIdle %d", ErrInvalidArgument, c.MaxIdle)
	case c.Shards < 0 || c.Shards > 1<<16:
		return fmt.Errorf("%w: Shards %d: want 0..65536", ErrInvalidArgument, c.Shards)
	}
	return nil
}

// cacheShard holds the entries of the resources whose hash picks it.
type cacheShard struct {
	mu      sync.Mutex
	entries map[string]*cacheEntry // live entries: at most one per resource
	idle    cacheEntry             // sentinel of the idle list, oldest first
	_       [64]byte
}

// cacheEntry is one cached lock. An entry is live while it is in its
// shard's map: filling (its request in flight) or granted. It is retired
// (dead) when a blocking notification comes, its lock is lost, it is
// evicted or the cache closes; its lock is released once it is dead and
// has no holds.
type cacheEntry struct {
	resource string
	shard    *cacheShard

	// Set once under the shard's mutex when the lock is granted; never
	// changed after, so a hold reads them without a lock.
	lk      Lock
	token   uint64
	value   []byte
	valueOK bool
	lost    <-chan struct{}

	// Guarded by the shard's mutex.
	ready      chan struct{} // closed when the request ends, granted or not
	holds      int
	dead       bool
	prev, next *cacheEntry // idle list links; nil when not idle
}

// NewCache returns a cache of shared locks taken from ls.
func NewCache(ls Lockspace, cfg CacheConfig) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := cfg.Shards
	if n == 0 {
		n = 64
	}
	c := &Cache{ls: ls, cfg: cfg, seed: maphash.MakeSeed(), shards: make([]cacheShard, n)}
	for i := range c.shards {
		s := &c.shards[i]
		s.entries = map[string]*cacheEntry{}
		s.idle.prev, s.idle.next = &s.idle, &s.idle
	}
	return c, nil
}

// Acquire takes a hold on resource in the cache's mode, waiting as long as
// ctx allows for the lock if it is not cached.
func (c *Cache) Acquire(ctx context.Context, resource string) (*Hold, error) {
	return c.acquire(ctx, resource, false)
}

// TryAcquire takes a hold only if the resource's lock is cached or can be
// granted at once; otherwise it fails with ErrNotQueued.
func (c *Cache) TryAcquire(ctx context.Context, resource string) (*Hold, error) {
	return c.acquire(ctx, resource, true)
}

func (c *Cache) shardOf(resource string) *cacheShard {
	return &c.shards[maphash.String(c.seed, resource)%uint64(len(c.shards))]
}

func (c *Cache) acquire(ctx context.Context, resource string, try bool) (*Hold, error) {
	s := c.shardOf(resource)
	for {
		if c.closed.Load() {
			return nil, ErrClosed
		}
		s.mu.Lock()
		e := s.entries[resource]
		switch {
		case e == nil:
			e = &cacheEntry{resource: resource, shard: s, ready: make(chan struct{})}
			s.entries[resource] = e
			s.mu.Unlock()
			c.counted(false)
			return c.fill(ctx, s, e, try)
		case e.lk != nil && !isClosed(e.lost):
			if e.holds == 0 {
				c.unidle(e)
			}
			e.holds++
			s.mu.Unlock()
			c.counted(true)
			return &Hold{c: c, e: e}, nil
		case e.lk != nil:
			// Lost: retire it, and take a new lock.
			release := c.retire(s, e)
			s.mu.Unlock()
			release.unlock()
			continue
		}
		// The lock is being requested: wait for its outcome.
		ready := e.ready
		s.mu.Unlock()
		if try {
			return nil, fmt.Errorf("%w: the resource's lock is being requested", ErrNotQueued)
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, contextError(ctx.Err())
		}
	}
}

func (c *Cache) counted(hit bool) {
	if f := c.cfg.OnAcquire; f != nil {
		f(hit)
	}
}

// contextError is the error of a wait that ctx ended, matching both the
// package's sentinel and the context's error.
func contextError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return fmt.Errorf("%w: %w", ErrCancelled, err)
}

// fill requests the lock of a new entry and gives its caller the first
// hold. Waiters on the entry try again when it is ready.
func (c *Cache) fill(ctx context.Context, s *cacheShard, e *cacheEntry, try bool) (*Hold, error) {
	opts := []Option{OnBlocking(func(want modes.Mode) { c.blocked(s, e, want) })}
	if try {
		opts = append(opts, Try())
	}
	lk, err := c.ls.Acquire(ctx, e.resource, c.cfg.Mode, opts...)
	var (
		token   uint64
		value   []byte
		valueOK bool
		lost    <-chan struct{}
	)
	if err == nil {
		token, lost = lk.Token(), lk.Lost()
		value, valueOK = lk.Value()
	}
	s.mu.Lock()
	close(e.ready)
	if err != nil {
		if !e.dead {
			delete(s.entries, e.resource)
			e.dead = true
		}
		s.mu.Unlock()
		return nil, err
	}
	e.lk, e.token, e.value, e.valueOK, e.lost = lk, token, value, valueOK, lost
	if c.closed.Load() {
		c.retire(s, e)
		s.mu.Unlock()
		_ = lk.Unlock()
		return nil, ErrClosed
	}
	e.holds = 1 // if blocked meanwhile (dead), this hold's end releases the lock
	s.mu.Unlock()
	return &Hold{c: c, e: e}, nil
}

// blocked retires an entry whose lock blocks another request, releasing
// the lock at once if nobody holds it.
func (c *Cache) blocked(s *cacheShard, e *cacheEntry, want modes.Mode) {
	s.mu.Lock()
	release := c.retire(s, e)
	s.mu.Unlock()
	release.unlock()
	if f := c.cfg.OnBlocking; f != nil {
		f(e.resource, want)
	}
}

// cacheRelease is a lock to release once the shard's mutex is dropped (an
// Unlock may wait on the implementation's own locks, and a blocking
// callback may be waiting for the shard's).
type cacheRelease struct{ lk Lock }

func (r cacheRelease) unlock() {
	if r.lk != nil {
		_ = r.lk.Unlock() // a lost lock's error says nothing new here
	}
}

// retire takes a live entry out of its shard's map, so new Acquires take a
// new lock, and returns its lock for release if no hold is left on it.
// Caller holds s.mu.
func (c *Cache) retire(s *cacheShard, e *cacheEntry) cacheRelease {
	if e.dead {
		return cacheRelease{}
	}
	e.dead = true
	delete(s.entries, e.resource)
	if e.holds > 0 || e.lk == nil {
		return cacheRelease{} // the last hold releases it (fill gives one)
	}
	c.unidle(e)
	return cacheRelease{e.lk}
}

// release ends one hold; the last hold on a dead entry releases its lock,
// the last on a live one makes it idle (evicting the oldest idle entry of
// the shard beyond MaxIdle).
func (c *Cache) release(e *cacheEntry) {
	s := e.shard
	s.mu.Lock()
	e.holds--
	var rel cacheRelease
	switch {
	case e.holds > 0:
	case e.dead:
		rel = cacheRelease{e.lk}
	case isClosed(e.lost) || c.closed.Load():
		rel = c.retire(s, e)
	default:
		c.makeIdle(s, e)
		if c.idle.Load() > int64(c.cfg.MaxIdle) {
			rel = c.retire(s, s.idle.next)
		}
	}
	s.mu.Unlock()
	rel.unlock()
}

// makeIdle appends e to the shard's idle list. Caller holds s.mu.
func (c *Cache) makeIdle(s *cacheShard, e *cacheEntry) {
	e.prev, e.next = s.idle.prev, &s.idle
	s.idle.prev.next = e
	s.idle.prev = e
	c.idle.Add(1)
}

// unidle takes e off its idle list, if it is on one. Caller holds its
// shard's mutex.
func (c *Cache) unidle(e *cacheEntry) {
	if e.next == nil {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	c.idle.Add(-1)
}

// Idle returns how many cached locks have no hold.
func (c *Cache) Idle() int { return int(c.idle.Load()) }

// Close releases the cache's idle locks and makes later Acquires fail
// with ErrClosed. Holds taken before keep their lock until they end.
func (c *Cache) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	var rels []cacheRelease
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for _, e := range s.entries {
			rels = append(rels, c.retire(s, e))
		}
		s.mu.Unlock()
	}
	for _, r := range rels {
		r.unlock()
	}
	return nil
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Hold is a share of a cached lock (see Cache). Release it once.
type Hold struct {
	c    *Cache
	e    *cacheEntry
	done atomic.Bool
}

// Resource returns the held resource's name.
func (h *Hold) Resource() string { return h.e.resource }

// Mode returns the cache's mode.
func (h *Hold) Mode() modes.Mode { return h.c.cfg.Mode }

// Token returns the fencing token of the grant that the hold shares:
// every hold on that grant has the same token.
func (h *Hold) Token() uint64 { return h.e.token }

// Value returns a copy of the lock value block as of the shared grant,
// and whether it is valid. Nobody can write it while the hold lasts.
func (h *Hold) Value() ([]byte, bool) { return slices.Clone(h.e.value), h.e.valueOK }

// Lost returns a channel closed when the shared lock is lost (see
// Lock.Lost); Err says why.
func (h *Hold) Lost() <-chan struct{} { return h.e.lost }

// Err returns why the shared lock was lost, or nil.
func (h *Hold) Err() error {
	if !isClosed(h.e.lost) {
		return nil
	}
	return h.e.lk.Err()
}

// Release ends the hold. A second Release fails with ErrNotHeld; a hold
// whose lock was lost returns why.
func (h *Hold) Release() error {
	if !h.done.CompareAndSwap(false, true) {
		return ErrNotHeld
	}
	err := h.Err()
	h.c.release(h.e)
	return err
}
