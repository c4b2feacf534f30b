package systems

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed-a6839e30/dlm/bench/lockbench"
)

// Redis registers the single-server SET NX PX lock.
func (catalog) Redis() Entry {
	return Entry{Name: "redis", Rank: 10, New: func(env lockbench.Env) (lockbench.System, error) {
		return NewRedis(env, DefaultRedisConfig())
	}}
}

// Sentinel errors of the Redis-based systems.
var (
	// ErrGaveUp is returned when Lock exhausted its tries before ctx ended.
	ErrGaveUp = errors.New("systems: lock not acquired within the allowed tries")
	// ErrLost is returned by Unlock when the grant had already expired (or
	// been taken over) on the server: the holder ran past its TTL.
	ErrLost = errors.New("systems: lock expired before unlock")
)

// RedisConfig configures the redis system.
type RedisConfig struct {
	// Binary is the server binary looked up in PATH.
	Binary string
	// RetryDelay is the mean pause between SET NX attempts; each pause is
	// drawn uniformly from [RetryDelay/2, 3·RetryDelay/2) so that waiters
	// spread out. 5 ms is the seed's retry interval.
	RetryDelay time.Duration
	// MaxTries bounds the attempts of one Lock (the context usually ends
	// first); 1,000,000 at 5 ms is over an hour.
	MaxTries int
}

// DefaultRedisConfig returns the defaults documented on RedisConfig.
func DefaultRedisConfig() RedisConfig {
	return RedisConfig{Binary: "redis-server", RetryDelay: 5 * time.Millisecond, MaxTries: 1_000_000}
}

// Validate reports the first problem with c.
func (c RedisConfig) Validate() error {
	if c.Binary == "" || c.RetryDelay <= 0 || c.MaxTries <= 0 {
		return fmt.Errorf("systems: bad redis config %+v", c)
	}
	return nil
}

// unlockScript deletes the key only if it still holds this holder's value,
// so a holder whose grant expired cannot delete its successor's.
const unlockScript = `if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
end
return 0`

// Redis is the single-server lock.
type Redis struct {
	env    lockbench.Env
	cfg    RedisConfig
	srv    redisServers
	unlock *redis.Script
}

// NewRedis builds the system; Start launches its server.
func NewRedis(env lockbench.Env, cfg RedisConfig) (*Redis, error) {
	if err := errors.Join(env.Validate(), cfg.Validate()); err != nil {
		return nil, err
	}
	return &Redis{
		env: env, cfg: cfg,
		srv:    redisServers{env: env, binary: cfg.Binary, n: 1},
		unlock: redis.NewScript(unlockScript),
	}, nil
}

// Info implements lockbench.System.
func (r *Redis) Info() lockbench.Info {
	r.srv.mu.Lock()
	v := r.srv.version
	r.srv.mu.Unlock()
	return lockbench.Info{
		Name:       "redis",
		Summary:    "SET key value NX PX ttl; unlock = Lua compare-and-delete; retry after a jittered sleep",
		Servers:    1,
		Fencing:    lockbench.FencingOpaque,
		Cancelable: true,
		Version:    v,
		Notes: []string{
			fmt.Sprintf("contended Lock retries every %v ±50%%: no queue, so no FIFO order", r.cfg.RetryDelay),
			"the grant lives for its TTL; a holder past it loses the lock without notice",
			"no persistence or fsync (save and appendonly off)",
		},
	}
}

// Start implements lockbench.System.
func (r *Redis) Start(ctx context.Context) error {
	if err := r.srv.start(ctx, "redis"); err != nil {
		r.srv.stop()
		return err
	}
	return nil
}

// ServerCPU implements lockbench.CPUReporter.
func (r *Redis) ServerCPU() time.Duration { return r.srv.cpu() }

// Close implements lockbench.System.
func (r *Redis) Close() error { return r.srv.stop() }

// NewClient implements lockbench.System.
func (r *Redis) NewClient(ctx context.Context, cfg lockbench.ClientConfig) (lockbench.Client, error) {
	addrs, err := r.srv.started()
	if err != nil {
		return nil, err
	}
	c, err := newRedisClient(ctx, addrs[0])
	if err != nil {
		return nil, err
	}
	return &redisClient{
		sys: r, rdb: c, ttl: cfg.TTL,
		rng: mrand.New(mrand.NewPCG(uint64(cfg.ID), 0x5eed)),
	}, nil
}

type redisClient struct {
	sys   *Redis
	rdb   *redis.Client
	ttl   time.Duration
	rng   *mrand.Rand
	timer *time.Timer
}

// Lock implements lockbench.Client. Redis has no shared mode: both modes
// take the same exclusive key.
func (c *redisClient) Lock(ctx context.Context, resource string, _ lockbench.Mode) (lockbench.Held, error) {
	key := "lock:" + resource
	val := randomValue()
	for try := 0; try < c.sys.cfg.MaxTries; try++ {
		ok, err := c.rdb.SetNX(ctx, key, val, c.ttl).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			return &redisHeld{c: c, key: key, val: val}, nil
		}
		if err := c.pause(ctx); err != nil {
			return nil, err
		}
	}
	return nil, ErrGaveUp
}

// pause sleeps a jittered retry delay or until ctx ends.
func (c *redisClient) pause(ctx context.Context) error {
	d := c.sys.cfg.RetryDelay/2 + time.Duration(c.rng.Int64N(int64(c.sys.cfg.RetryDelay)))
	if c.timer == nil {
		c.timer = time.NewTimer(d)
	} else {
		c.timer.Reset(d)
	}
	select {
	case <-ctx.Done():
		c.timer.Stop()
		return ctx.Err()
	case <-c.timer.C:
		return nil
	}
}

// randomValue is the holder's identity in the key: 128 random bits, as the
// Redis documentation's lock pattern asks, so no other holder can match it.
func randomValue() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b[:])
}

// Close implements lockbench.Client.
func (c *redisClient) Close() error { return c.rdb.Close() }

type redisHeld struct {
	c        *redisClient
	key, val string
}

// Fence implements lockbench.Held: the random value orders nothing.
func (h *redisHeld) Fence() lockbench.Fence { return lockbench.Fence{} }

// Unlock implements lockbench.Held.
func (h *redisHeld) Unlock(ctx context.Context) error {
	n, err := h.c.sys.unlock.Run(ctx, h.c.rdb, []string{h.key}, h.val).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrLost
	}
	return nil
}
