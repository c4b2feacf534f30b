package dlm

import (
	"github.com/seed-a6839e30/dlm/lockapi"
)

// Cache shares one lock per resource among this node's readers, as GFS2's
// glocks do over the kernel DLM: the node holds one lock in a shared mode
// (PR by default) at the resource's master, and every Acquire on that
// resource while the lock is held is a hold on it, granted without a
// message. lockapi.Cache, which it is, says what a hold is and is not;
// a client of an agent makes the same cache over its own lockspace
// (client.Lockspace.NewCache). Closing the node releases everything.
type Cache = lockapi.Cache

// CacheConfig configures a Cache (see lockapi.CacheConfig).
type CacheConfig = lockapi.CacheConfig

// Hold is a share of a cached lock (see lockapi.Hold).
type Hold = lockapi.Hold

// DefaultCacheConfig caches PR locks, keeping up to 1024 idle.
func DefaultCacheConfig() CacheConfig { return lockapi.DefaultCacheConfig() }

// NewCache returns a cache of shared locks on this lockspace. Its
// Acquires are counted by dlm_cache_acquires_total; a Shards of 0 follows
// the lockspace's shards.
func (ls *Lockspace) NewCache(cfg CacheConfig) (*Cache, error) {
	if cfg.Shards == 0 {
		cfg.Shards = len(ls.shards)
	}
	also := cfg.OnAcquire
	cfg.OnAcquire = func(hit bool) {
		r := cacheMiss
		if hit {
			r = cacheHit
		}
		ls.node.met.cache[r].Inc()
		if also != nil {
			also(hit)
		}
	}
	return lockapi.NewCache(ls, cfg)
}
