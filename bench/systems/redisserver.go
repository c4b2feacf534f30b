package systems

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed-a6839e30/dlm/bench/lockbench"
	"github.com/seed-a6839e30/dlm/bench/servers"
)

// stopGrace is how long a server gets to exit on SIGTERM before SIGKILL.
const stopGrace = 10 * time.Second

// redisServers runs n independent redis-servers (no replication: Redlock's
// servers are independent by design, and the single-server pattern has one).
type redisServers struct {
	env    lockbench.Env
	binary string
	n      int

	mu      sync.Mutex
	group   *servers.Group
	addrs   []string
	version string
}

// start launches the servers. Persistence is off (no RDB snapshots, no AOF):
// a lock server's keys are worth nothing after a restart, and snapshot forks
// would add noise. Redis does not fsync lock writes, unlike etcd and
// ZooKeeper; the reports say so.
func (s *redisServers) start(ctx context.Context, name string) error {
	path, err := s.env.LookPath(s.binary)
	if err != nil {
		return lockbench.Unavailable(s.binary + " not found; run bench/install-peers.sh")
	}
	g, err := servers.NewGroup(s.env.TempDir, name, s.env.Logger)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.group = g
	s.mu.Unlock()
	ports, err := servers.FreePorts(s.n)
	if err != nil {
		return err
	}
	var addrs []string
	for i, port := range ports {
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		p, err := g.Start(servers.Spec{
			Name: fmt.Sprintf("%s-%d", name, i),
			Path: path,
			Args: []string{
				"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
				"--save", "", "--appendonly", "no", "--daemonize", "no",
				"--dir", fmt.Sprintf("%s/data-%d", g.Dir, i),
				"--loglevel", "warning", "--maxclients", "10000",
			},
			Dir: fmt.Sprintf("data-%d", i),
		})
		if err != nil {
			return err
		}
		if err := servers.WaitReady(ctx, p, s.env.ReadyTimeout, pingRedis(addr)); err != nil {
			return err
		}
		addrs = append(addrs, addr)
	}
	s.mu.Lock()
	s.addrs = addrs
	s.version = redisVersion(path)
	s.mu.Unlock()
	return nil
}

// pingRedis is a readiness probe.
func pingRedis(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1})
		defer c.Close()
		return c.Ping(ctx).Err()
	}
}

var redisVersionRE = regexp.MustCompile(`v=(\S+)`)

func redisVersion(path string) string {
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return ""
	}
	if m := redisVersionRE.FindSubmatch(out); m != nil {
		return "redis " + string(m[1])
	}
	return ""
}

// started returns the addresses once start succeeded.
func (s *redisServers) started() ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.addrs == nil {
		return nil, lockbench.ErrNotStarted
	}
	return s.addrs, nil
}

func (s *redisServers) cpu() time.Duration {
	s.mu.Lock()
	g := s.group
	s.mu.Unlock()
	if g == nil {
		return 0
	}
	return g.CPU()
}

func (s *redisServers) stop() error {
	s.mu.Lock()
	g := s.group
	s.group, s.addrs = nil, nil
	s.mu.Unlock()
	if g == nil {
		return nil
	}
	return g.Stop(stopGrace)
}

// newRedisClient opens one go-redis client for one bench client: a pool of
// one connection, since a bench client issues one command at a time.
func newRedisClient(ctx context.Context, addr string) (*redis.Client, error) {
	c := redis.NewClient(&redis.Options{
		Addr:         addr,
		PoolSize:     1,
		MinIdleConns: 1,
		DialTimeout:  5 * time.Second,
	})
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("systems: redis %s: %w", addr, err)
	}
	return c, nil
}
