package systems

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/seed-a6839e30/dlm/bench/lockbench"
	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/dlm/dlmtest"
	"github.com/seed-a6839e30/dlm/modes"
)

// DLM registers this project's lock manager: a 3-node cluster over
// loopback TCP, with the clients embedded in the nodes as a storage node
// would embed them.
func (catalog) DLM() Entry {
	return Entry{Name: "dlm", Rank: 0, New: func(env lockbench.Env) (lockbench.System, error) {
		return NewDLM(env, DefaultDLMConfig())
	}}
}

// DLMConfig configures the dlm system.
type DLMConfig struct {
	// Nodes is the cluster size.
	Nodes int
	// Lockspace is the lockspace every client uses.
	Lockspace string
	// Node, if not nil, adjusts each node's configuration after the
	// defaults are set (tests lengthen the quorum lease, so that a machine
	// starved by parallel test runs does not cost a node its quorum).
	Node func(*dlm.Config)
}

// DefaultDLMConfig returns 3 nodes and lockspace "bench".
func DefaultDLMConfig() DLMConfig { return DLMConfig{Nodes: 3, Lockspace: "bench"} }

// Validate reports the first problem with c.
func (c DLMConfig) Validate() error {
	if c.Nodes < 1 || c.Lockspace == "" {
		return fmt.Errorf("systems: bad dlm config %+v", c)
	}
	return nil
}

// DLM is the dlm system.
type DLM struct {
	env lockbench.Env
	cfg DLMConfig

	mu      sync.Mutex
	cluster *dlmtest.Cluster
	spaces  []*dlm.Lockspace
	caches  []*dlm.Cache // one per node: its shared locks
}

// NewDLM builds the system; Start starts its nodes.
func NewDLM(env lockbench.Env, cfg DLMConfig) (*DLM, error) {
	if err := errors.Join(env.Validate(), cfg.Validate()); err != nil {
		return nil, err
	}
	return &DLM{env: env, cfg: cfg}, nil
}

// Info implements lockbench.System.
func (d *DLM) Info() lockbench.Info {
	return lockbench.Info{
		Name:       "dlm",
		Summary:    "VMS-mode lock manager: EX for exclusive, PR for shared (one cached PR lock per node and resource); master by rendezvous hash",
		Servers:    d.cfg.Nodes,
		Shared:     true,
		Fencing:    lockbench.FencingMonotonic,
		Cancelable: true,
		Version:    "this tree",
		Notes: []string{
			fmt.Sprintf("%d nodes in the harness's process over loopback TCP; client i is embedded in node i mod %d", d.cfg.Nodes, d.cfg.Nodes),
			"FIFO queues: a waiter is granted in arrival order, no retry loop",
			"shared requests are holds on the node's dlm.Cache: one PR lock at the master serves the node's readers until a writer's blocking callback retires it",
			"the nodes' CPU counts as the harness's (no separate server processes)",
			"ignores the TTL like the session-based peers: a lock lives until unlock or its node fails",
		},
	}
}

// Start implements lockbench.System.
func (d *DLM) Start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.env.ReadyTimeout)
	defer cancel()
	opts := []dlmtest.Option{dlmtest.TCP()}
	if d.cfg.Node != nil {
		opts = append(opts, dlmtest.Configure(func(_ int, cfg *dlm.Config) { d.cfg.Node(cfg) }))
	}
	c, err := dlmtest.New(ctx, d.cfg.Nodes, opts...)
	if err != nil {
		return err
	}
	var spaces []*dlm.Lockspace
	var caches []*dlm.Cache
	for _, n := range c.Nodes() {
		ls, err := n.Lockspace(d.cfg.Lockspace)
		if err != nil {
			_ = c.Close()
			return err
		}
		cache, err := ls.NewCache(dlm.DefaultCacheConfig())
		if err != nil {
			_ = c.Close()
			return err
		}
		spaces, caches = append(spaces, ls), append(caches, cache)
	}
	d.mu.Lock()
	d.cluster, d.spaces, d.caches = c, spaces, caches
	d.mu.Unlock()
	return nil
}

// Close implements lockbench.System.
func (d *DLM) Close() error {
	d.mu.Lock()
	c, caches := d.cluster, d.caches
	d.cluster, d.spaces, d.caches = nil, nil, nil
	d.mu.Unlock()
	for _, cache := range caches {
		_ = cache.Close()
	}
	if c != nil {
		return c.Close()
	}
	return nil
}

// NewClient implements lockbench.System.
func (d *DLM) NewClient(_ context.Context, cfg lockbench.ClientConfig) (lockbench.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.spaces == nil {
		return nil, lockbench.ErrNotStarted
	}
	i := cfg.ID % len(d.spaces)
	return &dlmClient{ls: d.spaces[i], cache: d.caches[i]}, nil
}

// dlmClient takes exclusive locks as Locks, and shared ones as holds on
// its node's Cache, the way a storage node shares one PR lock among its
// readers.
type dlmClient struct {
	ls    *dlm.Lockspace
	cache *dlm.Cache
}

// Lock implements lockbench.Client.
func (c *dlmClient) Lock(ctx context.Context, resource string, mode lockbench.Mode) (lockbench.Held, error) {
	if mode == lockbench.Shared {
		h, err := c.cache.Acquire(ctx, resource)
		if err != nil {
			return nil, err
		}
		return dlmHold{h}, nil
	}
	lk, err := c.ls.Lock(ctx, resource, modes.EX)
	if err != nil {
		return nil, err
	}
	return dlmHeld{lk}, nil
}

// Close implements lockbench.Client.
func (c *dlmClient) Close() error { return nil }

type dlmHeld struct{ lk *dlm.Lock }

// Fence implements lockbench.Held: the grant's fencing token.
func (h dlmHeld) Fence() lockbench.Fence {
	return lockbench.Fence{Token: h.lk.Token(), Monotonic: true}
}

// Unlock implements lockbench.Held.
func (h dlmHeld) Unlock(context.Context) error { return h.lk.Unlock() }

// dlmHold is a shared hold on a node's cached PR lock.
type dlmHold struct{ h *dlm.Hold }

// Fence implements lockbench.Held: the token of the node's shared grant
// (fencing orders exclusive grants).
func (h dlmHold) Fence() lockbench.Fence {
	return lockbench.Fence{Token: h.h.Token(), Monotonic: true}
}

// Unlock implements lockbench.Held.
func (h dlmHold) Unlock(context.Context) error { return h.h.Release() }
