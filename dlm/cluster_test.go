package dlm

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/memnet"
)

// cluster is a test cluster of nodes in this process, over the in-process
// network (inside a synctest bubble) or over real loopback TCP.
type cluster struct {
	t     testing.TB
	net   *memnet.Network // nil over TCP
	nodes []*Node
	ls    []*Lockspace // lockspace "test" on each node
	names []string     // configured members
	seeds []string
	mut   func(*Config)
	knobs testKnobs // every node's test-only seams
}

func nodeNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i+1)
	}
	return names
}

// startMem starts an n-node cluster on memnet. Call it inside synctest.
func startMem(t testing.TB, n int, mut func(*Config)) *cluster {
	return startMemOf(t, n, n, mut)
}

// startMemOf configures a cluster of n members and starts the first k.
func startMemOf(t testing.TB, n, k int, mut func(*Config)) *cluster {
	t.Helper()
	return startMemWith(t, n, k, mut, testKnobs{})
}

// startMemWith is startMemOf with the nodes' test-only seams set.
func startMemWith(t testing.TB, n, k int, mut func(*Config), knobs testKnobs) *cluster {
	t.Helper()
	net, err := memnet.New(memnet.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, net: net, names: nodeNames(n), mut: mut, knobs: knobs}
	mns := make([]*memnet.Node, n)
	for i, name := range c.names {
		if mns[i], err = net.AddNode(name); err != nil {
			t.Fatal(err)
		}
		c.seeds = append(c.seeds, name+"/"+mns[i].GossipAddr())
	}
	for i := k; i < n; i++ {
		_ = net.Crash(c.names[i]) // configured, not started
	}
	if err := c.start(c.names[:k], func(i int, cfg *Config) {
		c.memConfig(cfg, mns[i])
	}); err != nil {
		t.Fatal(err)
	}
	for len(c.nodes) < n {
		c.nodes = append(c.nodes, nil)
		c.ls = append(c.ls, nil)
	}
	return c
}

func (c *cluster) memConfig(cfg *Config, mn *memnet.Node) {
	if os.Getenv("DLM_TEST_LOG") != "" { // DLM_TEST_LOG=1 go test -v -run X: the nodes' logs
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	cfg.Members = c.names
	cfg.Streams = mn.StreamLayer()
	cfg.GossipTransport = mn.Transport()
	cfg.Seeds = c.seeds
	if c.mut != nil {
		c.mut(cfg)
	}
}

// startNode starts (or restarts, with a new boot) node i on memnet.
func (c *cluster) startNode(i int) *Node {
	c.t.Helper()
	nd, ls, err := c.launch(i)
	if err != nil {
		c.t.Fatal(err)
	}
	c.nodes[i], c.ls[i] = nd, ls
	return nd
}

// launch starts node i on memnet and opens its lockspace "test", leaving
// c.nodes alone: several may run at once.
func (c *cluster) launch(i int) (*Node, *Lockspace, error) {
	mn, err := c.net.AddNode(c.names[i])
	if err != nil {
		return nil, nil, err
	}
	cfg := DefaultConfig()
	cfg.Name, cfg.ClusterID = c.names[i], "test"
	c.memConfig(&cfg, mn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nd, err := start(ctx, cfg, c.knobs)
	if err != nil {
		return nil, nil, err
	}
	ls, err := nd.Lockspace("test")
	if err != nil {
		_ = nd.Close()
		return nil, nil, err
	}
	return nd, ls, nil
}

// startTCP starts an n-node cluster over loopback TCP with real time.
// Gossip ports are picked first, so that every node can list every other
// as a seed before any of them starts (Start waits for a quorum); a
// port taken meanwhile by someone else fails the start, which is then
// tried again with fresh ports.
func startTCP(t testing.TB, n int, mut func(*Config)) *cluster {
	t.Helper()
	var err error
	for range 3 {
		c := &cluster{t: t}
		addrs := make([]string, n)
		for i := range addrs {
			addrs[i] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		}
		if err = c.start(nodeNames(n), func(i int, cfg *Config) {
			cfg.GossipAddr = addrs[i]
			cfg.Seeds = addrs
			if mut != nil {
				mut(cfg)
			}
		}); err == nil {
			return c
		}
		t.Logf("cluster start failed, trying fresh ports: %v", err)
	}
	t.Fatal(err)
	return nil
}

// freePort returns a loopback port that was free for TCP and UDP a moment
// ago, for memberlist, which binds both on one port.
func freePort(t testing.TB) int {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, uerr := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		_ = l.Close()
		if uerr == nil {
			_ = u.Close()
			return port
		}
	}
	t.Fatal("no port free for both TCP and UDP")
	return 0
}

// start starts one node per name concurrently (each waits for the others;
// one failing stops the rest) and opens lockspace "test" on each.
func (c *cluster) start(names []string, configure func(int, *Config)) error {
	c.t.Helper()
	c.nodes = make([]*Node, len(names))
	g, ctx := errgroup.WithContext(context.Background())
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second+time.Duration(len(names))*time.Second) // big clusters take longer to agree their first view
	defer cancel()
	for i, name := range names {
		cfg := DefaultConfig()
		cfg.Name, cfg.Members, cfg.ClusterID = name, names, "test"
		if c.names != nil {
			cfg.Members = c.names
		}
		configure(i, &cfg)
		g.Go(func() error {
			nd, err := start(ctx, cfg, c.knobs)
			c.nodes[i] = nd
			return err
		})
	}
	if err := g.Wait(); err != nil {
		c.close()
		return err
	}
	for _, nd := range c.nodes {
		ls, err := nd.Lockspace("test")
		if err != nil {
			c.t.Fatal(err)
		}
		c.ls = append(c.ls, ls)
	}
	return nil
}

func (c *cluster) close() {
	for _, nd := range c.nodes {
		if nd != nil {
			_ = nd.Close()
		}
	}
	if c.net != nil {
		c.net.Close()
		// memberlist's Shutdown does not wait for its probe and stream
		// goroutines; they end on their own timers, which in a synctest
		// bubble run only while the test does.
		time.Sleep(3 * time.Second)
	}
}

// resourceOn returns a resource name (with the given prefix) that node
// idx masters.
func (c *cluster) resourceOn(idx int, prefix string) string {
	c.t.Helper()
	for i := range 10000 {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if c.ls[0].MasterOf(name) == c.nodes[idx].Name() {
			return name
		}
	}
	c.t.Fatalf("no resource mastered by %s", c.nodes[idx].Name())
	return ""
}

// both runs a cluster test over memnet in synctest and over loopback TCP,
// with 3 and 5 nodes.
func both(t *testing.T, f func(t *testing.T, c *cluster)) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("memnet-%d", n), func(t *testing.T) {
			synctestRun(t, func(t *testing.T) {
				c := startMem(t, n, nil)
				defer c.close()
				f(t, c)
			})
		})
		t.Run(fmt.Sprintf("tcp-%d", n), func(t *testing.T) {
			c := startTCP(t, n, nil)
			defer c.close()
			f(t, c)
		})
	}
}

// settle waits until the cluster has nothing more to do: in a synctest
// bubble, until every goroutine is blocked; over TCP, until cond holds.
func (c *cluster) settle(cond func() bool) {
	c.t.Helper()
	if c.net != nil {
		synctestWait()
		if cond != nil && !cond() {
			c.t.Fatal("condition does not hold once the cluster is idle")
		}
		return
	}
	if cond == nil {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatal("condition did not hold within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// live returns the lockspaces of the nodes still running: a killed node's
// tables are stale.
func (c *cluster) live() []*Lockspace {
	var out []*Lockspace
	for i, ls := range c.ls {
		if c.nodes[i] != nil {
			out = append(out, ls)
		}
	}
	return out
}

// queued reports whether resource has n requests queued at its master.
func (c *cluster) queued(resource string, n int) func() bool {
	return func() bool {
		for _, ls := range c.live() {
			if rs, ok := ls.masterState(resource); ok {
				q := 0
				for _, l := range rs.Locks {
					if l.Queue != master.QueueGranted {
						q++
					}
				}
				return q == n
			}
		}
		return n == 0
	}
}

// free reports whether no lock is left on resource at its master.
func (c *cluster) free(resource string) func() bool {
	return func() bool {
		for _, ls := range c.live() {
			if _, ok := ls.masterState(resource); ok {
				return false
			}
		}
		return true
	}
}

var bg = context.Background()

func mustLock(t testing.TB, ls *Lockspace, res string, mode modes.Mode, opts ...LockOption) *Lock {
	t.Helper()
	lk, err := ls.Lock(bg, res, mode, opts...)
	if err != nil {
		t.Fatalf("%s: lock %s %v: %v", ls.node.Name(), res, mode, err)
	}
	return lk
}

func mustUnlock(t testing.TB, lk *Lock) {
	t.Helper()
	if err := lk.Unlock(); err != nil {
		t.Fatalf("unlock %s: %v", lk.Resource(), err)
	}
}
