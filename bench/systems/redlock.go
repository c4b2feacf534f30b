package systems

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/seed-a6839e30/dlm/bench/lockbench"
)

// Redlock registers redsync over independent redis-servers.
func (catalog) Redlock() Entry {
	return Entry{Name: "redlock", Rank: 20, New: func(env lockbench.Env) (lockbench.System, error) {
		return NewRedlock(env, DefaultRedlockConfig())
	}}
}

// RedlockConfig configures the redlock system.
type RedlockConfig struct {
	// Binary is the server binary looked up in PATH.
	Binary string
	// Servers is the number of independent redis-servers (3: the smallest
	// majority that survives one failure).
	Servers int
	// MaxTries replaces redsync's default of 32 so that Lock waits until
	// its context ends, as every other system's does; the pause between
	// tries stays redsync's default, rand(50 ms, 250 ms).
	MaxTries int
}

// DefaultRedlockConfig returns the defaults documented on RedlockConfig.
func DefaultRedlockConfig() RedlockConfig {
	return RedlockConfig{Binary: "redis-server", Servers: 3, MaxTries: 1_000_000}
}

// Validate reports the first problem with c.
func (c RedlockConfig) Validate() error {
	if c.Binary == "" || c.Servers < 1 || c.MaxTries <= 0 {
		return fmt.Errorf("systems: bad redlock config %+v", c)
	}
	return nil
}

// Redlock is redsync's Redlock over Servers redis-servers.
type Redlock struct {
	env lockbench.Env
	cfg RedlockConfig
	srv redisServers
}

// NewRedlock builds the system; Start launches its servers.
func NewRedlock(env lockbench.Env, cfg RedlockConfig) (*Redlock, error) {
	if err := errors.Join(env.Validate(), cfg.Validate()); err != nil {
		return nil, err
	}
	return &Redlock{env: env, cfg: cfg, srv: redisServers{env: env, binary: cfg.Binary, n: cfg.Servers}}, nil
}

// Info implements lockbench.System.
func (r *Redlock) Info() lockbench.Info {
	r.srv.mu.Lock()
	v := r.srv.version
	r.srv.mu.Unlock()
	return lockbench.Info{
		Name:       "redlock",
		Summary:    fmt.Sprintf("redsync Mutex: SET NX PX on %d independent redis-servers, majority wins", r.cfg.Servers),
		Servers:    r.cfg.Servers,
		Fencing:    lockbench.FencingOpaque,
		Cancelable: true,
		Version:    v,
		Notes: []string{
			"contended Lock retries after rand(50 ms, 250 ms) (redsync's default): no queue, no FIFO order",
			"each attempt must finish within 5% of the TTL (redsync's timeout factor), or it fails",
			"a failed attempt also releases on every server: two rounds per failed try",
			"no persistence or fsync (save and appendonly off)",
		},
	}
}

// Start implements lockbench.System.
func (r *Redlock) Start(ctx context.Context) error {
	if err := r.srv.start(ctx, "redlock"); err != nil {
		r.srv.stop()
		return err
	}
	return nil
}

// ServerCPU implements lockbench.CPUReporter.
func (r *Redlock) ServerCPU() time.Duration { return r.srv.cpu() }

// Close implements lockbench.System.
func (r *Redlock) Close() error { return r.srv.stop() }

// NewClient implements lockbench.System: one go-redis client per server and
// one redsync instance over them.
func (r *Redlock) NewClient(ctx context.Context, cfg lockbench.ClientConfig) (lockbench.Client, error) {
	addrs, err := r.srv.started()
	if err != nil {
		return nil, err
	}
	c := &redlockClient{ttl: cfg.TTL, tries: r.cfg.MaxTries}
	var pools []redsyncredis.Pool
	for _, a := range addrs {
		rc, err := newRedisClient(ctx, a)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.rdbs = append(c.rdbs, rc)
		pools = append(pools, goredis.NewPool(rc))
	}
	c.rs = redsync.New(pools...)
	return c, nil
}

type redlockClient struct {
	rdbs  []*redis.Client
	rs    *redsync.Redsync
	ttl   time.Duration
	tries int
}

// Lock implements lockbench.Client. Redsync has no shared mode.
func (c *redlockClient) Lock(ctx context.Context, resource string, _ lockbench.Mode) (lockbench.Held, error) {
	m := c.rs.NewMutex("lock:"+resource, redsync.WithExpiry(c.ttl), redsync.WithTries(c.tries))
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return &redlockHeld{m: m}, nil
}

// Close implements lockbench.Client.
func (c *redlockClient) Close() error {
	var errs []error
	for _, rc := range c.rdbs {
		errs = append(errs, rc.Close())
	}
	return errors.Join(errs...)
}

type redlockHeld struct{ m *redsync.Mutex }

// Fence implements lockbench.Held: redsync's value is random, not ordered.
func (h *redlockHeld) Fence() lockbench.Fence { return lockbench.Fence{} }

// Unlock implements lockbench.Held.
func (h *redlockHeld) Unlock(ctx context.Context) error {
	ok, err := h.m.UnlockContext(ctx)
	switch {
	case ok:
		return nil
	case err == nil || errors.Is(err, redsync.ErrLockAlreadyExpired):
		return fmt.Errorf("%w (%v)", ErrLost, err)
	default:
		return err
	}
}
