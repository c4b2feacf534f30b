package systems

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seed-a6839e30/dlm/bench/lockbench"
	"github.com/seed-a6839e30/dlm/bench/servers"
)

// ZooKeeper registers go-zookeeper's lock recipe.
func (catalog) ZooKeeper() Entry {
	return Entry{Name: "zookeeper", Rank: 30, New: func(env lockbench.Env) (lockbench.System, error) {
		return NewZooKeeper(env, DefaultZooKeeperConfig())
	}}
}

// ZooKeeperConfig configures the zookeeper system.
type ZooKeeperConfig struct {
	// Java is the JVM binary looked up in PATH.
	Java string
	// ClassPath holds the server. Debian's zookeeper package installs
	// /usr/share/java/zookeeper.jar, whose manifest lists its dependencies;
	// without an SLF4J binding on the path the server logs nothing.
	ClassPath string
	// HeapMB caps the JVM heap (256 MB: ample for the lock znodes, and
	// small enough that GC pauses stay short).
	HeapMB int
	// SessionTimeout is each client's session timeout (10 s, a common
	// setting; sessions are kept alive, so it only matters if a client dies).
	SessionTimeout time.Duration
}

// DefaultZooKeeperConfig returns the defaults documented on ZooKeeperConfig.
func DefaultZooKeeperConfig() ZooKeeperConfig {
	return ZooKeeperConfig{
		Java:           "java",
		ClassPath:      "/usr/share/java/zookeeper.jar",
		HeapMB:         256,
		SessionTimeout: 10 * time.Second,
	}
}

// Validate reports the first problem with c.
func (c ZooKeeperConfig) Validate() error {
	if c.Java == "" || c.ClassPath == "" || c.HeapMB < 32 || c.SessionTimeout <= 0 {
		return fmt.Errorf("systems: bad zookeeper config %+v", c)
	}
	return nil
}

// ZooKeeper is one standalone ZooKeeper server.
type ZooKeeper struct {
	env lockbench.Env
	cfg ZooKeeperConfig

	mu      sync.Mutex
	group   *servers.Group
	addr    string
	version string
}

// NewZooKeeper builds the system; Start launches the server.
func NewZooKeeper(env lockbench.Env, cfg ZooKeeperConfig) (*ZooKeeper, error) {
	if err := errors.Join(env.Validate(), cfg.Validate()); err != nil {
		return nil, err
	}
	return &ZooKeeper{env: env, cfg: cfg}, nil
}

// Info implements lockbench.System.
func (z *ZooKeeper) Info() lockbench.Info {
	z.mu.Lock()
	v := z.version
	z.mu.Unlock()
	return lockbench.Info{
		Name:    "zookeeper",
		Summary: "go-zookeeper zk.Lock (ephemeral sequential znodes) on one standalone server",
		Servers: 1,
		Fencing: lockbench.FencingNone,
		Version: v,
		Notes: []string{
			"standalone server: no quorum round, unlike the 3-member etcd cluster",
			"go-zookeeper has no read/write lock: shared requests take the exclusive lock",
			"zk.Lock takes no context: a waiting Lock cannot be abandoned",
			"zk.Lock exposes neither its sequence number nor a zxid: no fencing token without an extra read",
			"FIFO: each waiter watches its predecessor's znode; every write is fsynced",
			"each resource's parent znode is created before the clock starts (zk.Lock would create it on first use)",
		},
	}
}

// Start implements lockbench.System.
func (z *ZooKeeper) Start(ctx context.Context) error {
	if err := z.start(ctx); err != nil {
		z.Close()
		return err
	}
	return nil
}

func (z *ZooKeeper) start(ctx context.Context) error {
	java, err := z.env.LookPath(z.cfg.Java)
	if err != nil {
		return lockbench.Unavailable(z.cfg.Java + " not found; run bench/install-peers.sh")
	}
	for _, jar := range filepath.SplitList(z.cfg.ClassPath) {
		if _, err := os.Stat(jar); err != nil {
			return lockbench.Unavailable("zookeeper: " + jar + " not found; run bench/install-peers.sh")
		}
	}
	g, err := servers.NewGroup(z.env.TempDir, "zookeeper", z.env.Logger)
	if err != nil {
		return err
	}
	z.mu.Lock()
	z.group = g
	z.mu.Unlock()
	ports, err := servers.FreePorts(1)
	if err != nil {
		return err
	}
	cfgPath, err := writeZooCfg(g.Dir, ports[0])
	if err != nil {
		return err
	}
	p, err := g.Start(servers.Spec{
		Name: "zookeeper",
		Path: java,
		Args: []string{
			fmt.Sprintf("-Xms%dm", min(64, z.cfg.HeapMB)), fmt.Sprintf("-Xmx%dm", z.cfg.HeapMB),
			"-Djava.net.preferIPv4Stack=true",
			"-cp", z.cfg.ClassPath,
			"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgPath,
		},
	})
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	var version string
	probe := func(ctx context.Context) error {
		v, err := zkServing(ctx, addr)
		version = v
		return err
	}
	if err := servers.WaitReady(ctx, p, z.env.ReadyTimeout, probe); err != nil {
		return err
	}
	z.mu.Lock()
	z.addr, z.version = addr, version
	z.mu.Unlock()
	return nil
}

// writeZooCfg writes a standalone configuration: loopback only, no admin
// HTTP server (it would take port 8080), no per-address connection limit
// (64 clients share 127.0.0.1; the default cap is 60), and the two
// four-letter words the readiness probe uses.
func writeZooCfg(dir string, port int) (string, error) {
	cfg := strings.Join([]string{
		"tickTime=2000",
		"dataDir=" + filepath.Join(dir, "data"),
		fmt.Sprintf("clientPort=%d", port),
		"clientPortAddress=127.0.0.1",
		"maxClientCnxns=0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=srvr,ruok",
		"",
	}, "\n")
	path := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return "", fmt.Errorf("systems: %w", err)
	}
	return path, nil
}

var zkVersionRE = regexp.MustCompile(`Zookeeper version: ([0-9][^\s,-]*)`)

// zkServing sends "srvr" and succeeds once the server reports its mode; it
// returns the server version.
func zkServing(ctx context.Context, addr string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	if _, err := io.WriteString(conn, "srvr"); err != nil {
		return "", err
	}
	out, err := io.ReadAll(bufio.NewReader(conn))
	if err != nil {
		return "", err
	}
	if !strings.Contains(string(out), "Mode: ") {
		return "", fmt.Errorf("not serving yet: %q", strings.TrimSpace(string(out)))
	}
	if m := zkVersionRE.FindSubmatch(out); m != nil {
		return "zookeeper " + string(m[1]), nil
	}
	return "zookeeper", nil
}

// ServerCPU implements lockbench.CPUReporter.
func (z *ZooKeeper) ServerCPU() time.Duration {
	z.mu.Lock()
	g := z.group
	z.mu.Unlock()
	if g == nil {
		return 0
	}
	return g.CPU()
}

// Close implements lockbench.System.
func (z *ZooKeeper) Close() error {
	z.mu.Lock()
	g := z.group
	z.group, z.addr = nil, ""
	z.mu.Unlock()
	if g == nil {
		return nil
	}
	return g.Stop(stopGrace)
}

// NewClient implements lockbench.System: one connection and session per
// client, returned once the session is established.
func (z *ZooKeeper) NewClient(ctx context.Context, _ lockbench.ClientConfig) (lockbench.Client, error) {
	z.mu.Lock()
	addr := z.addr
	z.mu.Unlock()
	if addr == "" {
		return nil, lockbench.ErrNotStarted
	}
	ready := make(chan struct{})
	var once sync.Once
	conn, _, err := zk.Connect([]string{addr}, z.cfg.SessionTimeout,
		zk.WithLogger(zkLogger{z.env.Logger}),
		zk.WithLogInfo(false),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.State == zk.StateHasSession {
				once.Do(func() { close(ready) })
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("systems: zookeeper connect: %w", err)
	}
	select {
	case <-ready:
	case <-ctx.Done():
		conn.Close()
		return nil, fmt.Errorf("systems: zookeeper session: %w", ctx.Err())
	}
	return &zkClient{conn: conn}, nil
}

// zkLogger sends go-zookeeper's Printf logging to slog at debug level.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Debug(fmt.Sprintf(format, args...), "system", "zookeeper")
}

type zkClient struct{ conn *zk.Conn }

// Lock implements lockbench.Client. zk.Lock has no shared mode and no
// context: once called, it returns only when granted or the session fails.
func (c *zkClient) Lock(ctx context.Context, resource string, _ lockbench.Mode) (lockbench.Held, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l := zk.NewLock(c.conn, "/lock/"+resource, zk.WorldACL(zk.PermAll))
	if err := l.Lock(); err != nil {
		return nil, err
	}
	return &zkHeld{l: l}, nil
}

// Close implements lockbench.Client; the session ends and its ephemeral
// znodes go with it.
func (c *zkClient) Close() error {
	c.conn.Close()
	return nil
}

type zkHeld struct{ l *zk.Lock }

// Fence implements lockbench.Held.
func (h *zkHeld) Fence() lockbench.Fence { return lockbench.Fence{} }

// Unlock implements lockbench.Held.
func (h *zkHeld) Unlock(context.Context) error { return h.l.Unlock() }

// prepareBatch is the number of creates per multi-op: one request and one
// fsync per batch, well under ZooKeeper's 1 MB request limit.
const prepareBatch = 1000

// Prepare implements lockbench.Preparer: it creates the parent znode of every
// resource's lock, which zk.Lock would otherwise create on first use with
// two extra round trips, making a fresh key space look slower than a
// long-running application's.
func (z *ZooKeeper) Prepare(ctx context.Context, resources []string) error {
	c, err := z.NewClient(ctx, lockbench.ClientConfig{})
	if err != nil {
		return err
	}
	defer c.Close()
	conn := c.(*zkClient).conn
	paths := []string{"/lock"}
	for _, r := range resources {
		paths = append(paths, "/lock/"+r)
	}
	if err := zkCreate(conn, paths[:1]); err != nil {
		return err
	}
	for i := 1; i < len(paths); i += prepareBatch {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := zkCreate(conn, paths[i:min(i+prepareBatch, len(paths))]); err != nil {
			return err
		}
	}
	return nil
}

// zkCreate creates persistent empty znodes in one multi-op, falling back to
// one create at a time (skipping existing ones) if the batch fails, as it
// does when any of them exists already.
func zkCreate(conn *zk.Conn, paths []string) error {
	ops := make([]any, len(paths))
	for i, p := range paths {
		ops[i] = &zk.CreateRequest{Path: p, Data: []byte{}, Acl: zk.WorldACL(zk.PermAll)}
	}
	if _, err := conn.Multi(ops...); err == nil {
		return nil
	}
	for _, p := range paths {
		if _, err := conn.Create(p, []byte{}, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("systems: zookeeper create %s: %w", p, err)
		}
	}
	return nil
}
