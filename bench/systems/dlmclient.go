package systems

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/bench/lockbench"
	"github.com/seed-a6839e30/dlm/bench/servers"
	"github.com/seed-a6839e30/dlm/client"
	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/modes"
)

// DLMClient registers this project's lock manager in the peers' shape:
// agents as separate processes (dlmnode agent), and the workloads' clients
// over TCP through the Go client, each with its own connection.
func (catalog) DLMClient() Entry {
	return Entry{Name: "dlm-client", Rank: 1, New: func(env lockbench.Env) (lockbench.System, error) {
		return NewDLMClient(env, DefaultDLMClientConfig())
	}}
}

// DLMClientConfig configures the dlm-client system.
type DLMClientConfig struct {
	// Agents is the cluster size.
	Agents int
	// Lockspace is the lockspace every client uses.
	Lockspace string
	// Module and Package are what go build builds the agent from: the
	// package, in the library's module (this harness's replace directive
	// names its directory), built there so that the library's own
	// dependencies apply.
	Module, Package string
	// Args are added to every agent's command line.
	Args []string
}

// DefaultDLMClientConfig returns 3 agents built from this tree's
// cmd/dlmnode and lockspace "bench".
func DefaultDLMClientConfig() DLMClientConfig {
	return DLMClientConfig{Agents: 3, Lockspace: "bench", Module: "github.com/seed-a6839e30/dlm", Package: "./cmd/dlmnode"}
}

// Validate reports the first problem with c.
func (c DLMClientConfig) Validate() error {
	if c.Agents < 1 || c.Lockspace == "" || c.Module == "" || c.Package == "" {
		return fmt.Errorf("systems: bad dlm-client config %+v", c)
	}
	return nil
}

// DLMClient is the dlm-client system.
type DLMClient struct {
	env lockbench.Env
	cfg DLMClientConfig

	mu      sync.Mutex
	group   *servers.Group
	addrs   []string // the agents' client ports
	clients []*client.Client
}

// NewDLMClient builds the system; Start builds and starts its agents.
func NewDLMClient(env lockbench.Env, cfg DLMClientConfig) (*DLMClient, error) {
	if err := errors.Join(env.Validate(), cfg.Validate()); err != nil {
		return nil, err
	}
	return &DLMClient{env: env, cfg: cfg}, nil
}

// Info implements lockbench.System.
func (d *DLMClient) Info() lockbench.Info {
	return lockbench.Info{
		Name:       "dlm-client",
		Summary:    "VMS-mode lock manager through its client port: EX for exclusive, PR for shared (holds on the agent's cached PR lock); master by rendezvous hash",
		Servers:    d.cfg.Agents,
		Shared:     true,
		Fencing:    lockbench.FencingMonotonic,
		Cancelable: true,
		Version:    "this tree",
		Notes: []string{
			fmt.Sprintf("%d dlmnode agent processes on loopback; client i connects to agent i mod %d over TCP through the Go client (package client), one connection and one session each", d.cfg.Agents, d.cfg.Agents),
			"FIFO queues: a waiter is granted in arrival order, no retry loop",
			"shared requests are holds on the agent's dlm.Cache (lockapi.Cached): one PR lock at the master serves the agent's readers until a writer's blocking notification retires it",
			"ignores the TTL like the session-based peers: a lock lives until unlock, its session's expiry or its agent's failure",
		},
	}
}

// Start implements lockbench.System: it builds dlmnode and starts the
// agents, and returns once each serves clients.
func (d *DLMClient) Start(ctx context.Context) error {
	g, err := servers.NewGroup(d.env.TempDir, "dlm-client", d.env.Logger)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.group = g
	d.mu.Unlock()
	goBin, err := d.env.LookPath("go")
	if err != nil {
		return lockbench.Unavailable("go not found: dlm-client builds its agents from this tree (go build " + d.cfg.Package + ")")
	}
	dir, err := exec.CommandContext(ctx, goBin, "list", "-m", "-f", "{{.Dir}}", d.cfg.Module).Output()
	if err != nil || strings.TrimSpace(string(dir)) == "" {
		return lockbench.Unavailable(fmt.Sprintf("go list -m %s: %v: dlm-client builds its agents from this tree", d.cfg.Module, err))
	}
	bin := filepath.Join(g.Dir, "dlmnode")
	build := exec.CommandContext(ctx, goBin, "build", "-o", bin, d.cfg.Package)
	build.Dir = strings.TrimSpace(string(dir))
	if out, err := build.CombinedOutput(); err != nil {
		return lockbench.Unavailable(fmt.Sprintf("go build %s: %v: %s", d.cfg.Package, err, strings.TrimSpace(string(out))))
	}
	n := d.cfg.Agents
	ports, err := servers.FreePorts(4 * n)
	if err != nil {
		return err
	}
	names, gossip := make([]string, n), make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("agent%d", i+1)
		gossip[i] = fmt.Sprintf("127.0.0.1:%d", ports[4*i])
	}
	var procs []*servers.Proc
	var addrs []string
	for i := range n {
		addr := fmt.Sprintf("127.0.0.1:%d", ports[4*i+3])
		args := append([]string{"agent",
			"--name", names[i], "--members", strings.Join(names, ","), "--seeds", strings.Join(gossip, ","),
			"--gossip-addr", gossip[i],
			"--link-addr", fmt.Sprintf("127.0.0.1:%d", ports[4*i+1]),
			"--admin-addr", fmt.Sprintf("127.0.0.1:%d", ports[4*i+2]),
			"--client-addr", addr,
			"--log-level", "warn",
		}, d.cfg.Args...)
		p, err := g.Start(servers.Spec{Name: names[i], Path: bin, Args: args, Dir: ".", LogPath: names[i] + ".log"})
		if err != nil {
			return err
		}
		procs, addrs = append(procs, p), append(addrs, addr)
	}
	// The agents wait for each other (a node serves once its cluster has a
	// quorum), so readiness is probed after all have started.
	for i, p := range procs {
		if err := servers.WaitReady(ctx, p, d.env.ReadyTimeout, d.probe(addrs[i])); err != nil {
			return fmt.Errorf("%w\n%s", err, p.LogTail(2000))
		}
	}
	d.mu.Lock()
	d.addrs = addrs
	d.mu.Unlock()
	return nil
}

// probe is ready once the agent grants a lock to a client.
func (d *DLMClient) probe(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		c, err := client.Dial(ctx, addr)
		if err != nil {
			return err
		}
		defer c.Close()
		lk, err := c.Lockspace(d.cfg.Lockspace).Lock(ctx, "ready-"+addr, modes.EX)
		if err != nil {
			return err
		}
		return lk.Unlock()
	}
}

// ServerCPU implements lockbench.CPUReporter.
func (d *DLMClient) ServerCPU() time.Duration {
	d.mu.Lock()
	g := d.group
	d.mu.Unlock()
	if g == nil {
		return 0
	}
	return g.CPU()
}

// Close implements lockbench.System.
func (d *DLMClient) Close() error {
	d.mu.Lock()
	g, clients := d.group, d.clients
	d.group, d.addrs, d.clients = nil, nil, nil
	d.mu.Unlock()
	for _, c := range clients {
		_ = c.Close()
	}
	if g == nil {
		return nil
	}
	return g.Stop(stopGrace)
}

// NewClient implements lockbench.System: client i connects to agent
// i mod Agents.
func (d *DLMClient) NewClient(ctx context.Context, cfg lockbench.ClientConfig) (lockbench.Client, error) {
	d.mu.Lock()
	addrs := d.addrs
	d.mu.Unlock()
	if addrs == nil {
		return nil, lockbench.ErrNotStarted
	}
	ccfg := client.DefaultConfig()
	ccfg.Addrs = []string{addrs[cfg.ID%len(addrs)]}
	ccfg.Name = fmt.Sprintf("bench-%d", cfg.ID)
	c, err := client.DialConfig(ctx, ccfg)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.clients = append(d.clients, c)
	d.mu.Unlock()
	return &dlmClientClient{c: c, ls: c.Lockspace(d.cfg.Lockspace)}, nil
}

// dlmClientClient takes exclusive locks as EX locks, and shared ones as
// holds on its agent's shared-lock cache.
type dlmClientClient struct {
	c  *client.Client
	ls *client.Lockspace
}

// Lock implements lockbench.Client.
func (c *dlmClientClient) Lock(ctx context.Context, resource string, mode lockbench.Mode) (lockbench.Held, error) {
	var lk *client.Lock
	var err error
	if mode == lockbench.Shared {
		lk, err = c.ls.Lock(ctx, resource, modes.PR, lockapi.Cached())
	} else {
		lk, err = c.ls.Lock(ctx, resource, modes.EX)
	}
	if err != nil {
		return nil, err
	}
	return dlmClientHeld{lk}, nil
}

// Close implements lockbench.Client.
func (c *dlmClientClient) Close() error { return c.c.Close() }

type dlmClientHeld struct{ lk *client.Lock }

// Fence implements lockbench.Held: the grant's fencing token.
func (h dlmClientHeld) Fence() lockbench.Fence {
	return lockbench.Fence{Token: h.lk.Token(), Monotonic: true}
}

// Unlock implements lockbench.Held.
func (h dlmClientHeld) Unlock(context.Context) error { return h.lk.Unlock() }
