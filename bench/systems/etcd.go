package systems

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	recipe "go.etcd.io/etcd/client/v3/experimental/recipes"
	"go.uber.org/zap"

	"github.com/seed-a6839e30/dlm/bench/lockbench"
	"github.com/seed-a6839e30/dlm/bench/servers"
)

// Etcd registers the etcd concurrency.Mutex.
func (catalog) Etcd() Entry {
	return Entry{Name: "etcd", Rank: 40, New: func(env lockbench.Env) (lockbench.System, error) {
		return NewEtcd(env, DefaultEtcdConfig())
	}}
}

// EtcdConfig configures the etcd system.
type EtcdConfig struct {
	// Binary is the server binary looked up in PATH.
	Binary string
	// Members is the cluster size (3: the smallest that tolerates a fault,
	// and what production clusters run).
	Members int
	// SessionTTL is the lease of each client's session, in seconds (60:
	// concurrency's default; the session is kept alive, so it only matters
	// when a client dies).
	SessionTTL int
	// DialTimeout bounds a client's first connection.
	DialTimeout time.Duration
}

// DefaultEtcdConfig returns the defaults documented on EtcdConfig.
func DefaultEtcdConfig() EtcdConfig {
	return EtcdConfig{Binary: "etcd", Members: 3, SessionTTL: 60, DialTimeout: 5 * time.Second}
}

// Validate reports the first problem with c.
func (c EtcdConfig) Validate() error {
	if c.Binary == "" || c.Members < 1 || c.SessionTTL <= 0 || c.DialTimeout <= 0 {
		return fmt.Errorf("systems: bad etcd config %+v", c)
	}
	return nil
}

// Etcd is a Members-node etcd cluster.
type Etcd struct {
	env lockbench.Env
	cfg EtcdConfig

	mu        sync.Mutex
	group     *servers.Group
	endpoints []string
	version   string
}

// NewEtcd builds the system; Start launches the cluster.
func NewEtcd(env lockbench.Env, cfg EtcdConfig) (*Etcd, error) {
	if err := errors.Join(env.Validate(), cfg.Validate()); err != nil {
		return nil, err
	}
	return &Etcd{env: env, cfg: cfg}, nil
}

// Info implements lockbench.System.
func (e *Etcd) Info() lockbench.Info {
	e.mu.Lock()
	v := e.version
	e.mu.Unlock()
	return lockbench.Info{
		Name:       "etcd",
		Summary:    fmt.Sprintf("concurrency.Mutex on a %d-member cluster, one session (lease) per client", e.cfg.Members),
		Servers:    e.cfg.Members,
		Shared:     true,
		Fencing:    lockbench.FencingMonotonic,
		Cancelable: true,
		Version:    v,
		Notes: []string{
			"token = revision of the acquiring response (strictly increasing per lock)",
			"FIFO: each waiter watches its predecessor's key",
			"readers: shared and exclusive both through the experimental recipes.RWMutex, which ignores contexts and issues no token",
			"every grant and release is a Raft write, fsynced on a majority",
		},
	}
}

// Start implements lockbench.System.
func (e *Etcd) Start(ctx context.Context) error {
	if err := e.start(ctx); err != nil {
		e.Close()
		return err
	}
	return nil
}

func (e *Etcd) start(ctx context.Context) error {
	path, err := e.env.LookPath(e.cfg.Binary)
	if err != nil {
		return lockbench.Unavailable(e.cfg.Binary + " not found; run bench/install-peers.sh")
	}
	g, err := servers.NewGroup(e.env.TempDir, "etcd", e.env.Logger)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.group = g
	e.mu.Unlock()
	n := e.cfg.Members
	ports, err := servers.FreePorts(2 * n)
	if err != nil {
		return err
	}
	client := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", ports[i]) }
	peer := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", ports[n+i]) }
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("m%d=%s", i, peer(i)))
	}
	procs := make([]*servers.Proc, n)
	for i := range n {
		procs[i], err = g.Start(servers.Spec{
			Name: fmt.Sprintf("etcd-%d", i),
			Path: path,
			Args: []string{
				"--name", fmt.Sprintf("m%d", i),
				"--data-dir", fmt.Sprintf("%s/m%d.etcd", g.Dir, i),
				"--listen-client-urls", client(i), "--advertise-client-urls", client(i),
				"--listen-peer-urls", peer(i), "--initial-advertise-peer-urls", peer(i),
				"--initial-cluster", strings.Join(initial, ","),
				"--initial-cluster-state", "new",
				"--initial-cluster-token", fmt.Sprintf("dlmbench-%d", ports[0]),
				"--logger", "zap", "--log-level", "warn",
			},
		})
		if err != nil {
			return err
		}
	}
	// The members elect a leader together, so all must be up before any is
	// healthy; probe each in turn under one deadline.
	var endpoints []string
	for i, p := range procs {
		if err := servers.WaitReady(ctx, p, e.env.ReadyTimeout, etcdHealthy(client(i))); err != nil {
			return err
		}
		endpoints = append(endpoints, strings.TrimPrefix(client(i), "http://"))
	}
	e.mu.Lock()
	e.endpoints, e.version = endpoints, etcdVersion(path)
	e.mu.Unlock()
	return nil
}

// etcdHealthy probes a member's /health, which reports true once the
// cluster has a leader and the member can serve.
func etcdHealthy(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var h struct {
			Health string `json:"health"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			return err
		}
		if h.Health != "true" {
			return fmt.Errorf("health %q", h.Health)
		}
		return nil
	}
}

var etcdVersionRE = regexp.MustCompile(`etcd Version: (\S+)`)

func etcdVersion(path string) string {
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return ""
	}
	if m := etcdVersionRE.FindSubmatch(out); m != nil {
		return "etcd " + string(m[1])
	}
	return ""
}

// ServerCPU implements lockbench.CPUReporter.
func (e *Etcd) ServerCPU() time.Duration {
	e.mu.Lock()
	g := e.group
	e.mu.Unlock()
	if g == nil {
		return 0
	}
	return g.CPU()
}

// Close implements lockbench.System.
func (e *Etcd) Close() error {
	e.mu.Lock()
	g := e.group
	e.group, e.endpoints = nil, nil
	e.mu.Unlock()
	if g == nil {
		return nil
	}
	return g.Stop(etcdStopGrace)
}

// etcdStopGrace is short because a stopping leader spends up to its request
// timeout (7 s) trying to hand leadership to members that are stopping too;
// the data is thrown away, so there is nothing to lose by killing it.
const etcdStopGrace = time.Second

// NewClient implements lockbench.System: a client over every member (the
// client balances requests over them) and a session whose lease is granted
// under ctx.
func (e *Etcd) NewClient(ctx context.Context, cfg lockbench.ClientConfig) (lockbench.Client, error) {
	e.mu.Lock()
	endpoints := e.endpoints
	e.mu.Unlock()
	if endpoints == nil {
		return nil, lockbench.ErrNotStarted
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: e.cfg.DialTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("systems: etcd client: %w", err)
	}
	lease, err := cli.Grant(ctx, int64(e.cfg.SessionTTL))
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("systems: etcd lease: %w", err)
	}
	s, err := concurrency.NewSession(cli, concurrency.WithLease(lease.ID), concurrency.WithTTL(e.cfg.SessionTTL))
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("systems: etcd session: %w", err)
	}
	return &etcdClient{cli: cli, s: s, mixed: cfg.MixedModes}, nil
}

type etcdClient struct {
	cli   *clientv3.Client
	s     *concurrency.Session
	mixed bool
}

// Lock implements lockbench.Client. Exclusive locks use concurrency.Mutex,
// which honours ctx and yields a token. Shared locks need recipes.RWMutex,
// and a Mutex does not see an RWMutex's readers, so a client configured for
// mixed modes takes its exclusive locks through the RWMutex as well.
func (c *etcdClient) Lock(ctx context.Context, resource string, mode lockbench.Mode) (lockbench.Held, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if mode == lockbench.Shared || c.mixed {
		return c.lockRW(resource, mode)
	}
	m := concurrency.NewMutex(c.s, "/lock/"+resource)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return &etcdHeld{m: m, fence: lockbench.Fence{Token: uint64(m.Header().Revision), Monotonic: true}}, nil
}

// lockRW takes an RWMutex lock; the recipe waits on context.Background, so
// it returns only once granted or the client is closed.
func (c *etcdClient) lockRW(resource string, mode lockbench.Mode) (lockbench.Held, error) {
	rw := recipe.NewRWMutex(c.s, "/rwlock/"+resource)
	lock, unlock := rw.Lock, rw.Unlock
	if mode == lockbench.Shared {
		lock, unlock = rw.RLock, rw.RUnlock
	}
	if err := lock(); err != nil {
		return nil, err
	}
	return &etcdHeld{unlockRW: unlock}, nil
}

// Close implements lockbench.Client: it revokes the session's lease and
// closes the connections.
func (c *etcdClient) Close() error {
	serr := c.s.Close()
	return errors.Join(serr, c.cli.Close())
}

type etcdHeld struct {
	m        *concurrency.Mutex
	unlockRW func() error
	fence    lockbench.Fence
}

// Fence implements lockbench.Held.
func (h *etcdHeld) Fence() lockbench.Fence { return h.fence }

// Unlock implements lockbench.Held.
func (h *etcdHeld) Unlock(ctx context.Context) error {
	if h.unlockRW != nil {
		return h.unlockRW()
	}
	return h.m.Unlock(ctx)
}
