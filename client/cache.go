package client

import "github.com/seed-a6839e30/dlm/lockapi"

// NewCache returns a cache of shared locks taken through this lockspace:
// one PR lock per resource (by default) held by this client, shared by
// every hold the program takes on it, so that a reader's hold costs no
// round trip to the agent while the lock is cached. A writer elsewhere
// that waits for the lock retires it through its blocking notification
// (lockapi.Cache says what a hold is and is not). Unlike lockapi.Cached,
// which shares the agent's cache among its clients at the cost of a round
// trip each, the holds of this cache never leave the process. Close the
// cache before the client.
func (ls *Lockspace) NewCache(cfg lockapi.CacheConfig) (*lockapi.Cache, error) {
	return lockapi.NewCache(ls, cfg)
}
