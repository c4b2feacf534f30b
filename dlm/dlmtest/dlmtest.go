// Package dlmtest starts a cluster of dlm nodes inside one process, for the
// tests of code that uses dlm (and for demos).
//
//	func TestTransfer(t *testing.T) {
//		c := dlmtest.Start(t, 3) // closed by t.Cleanup
//		ls, err := c.Node(0).Lockspace("accounts")
//		...
//	}
//
// By default the nodes talk over the in-process network of
// transport/memnet: no socket is opened, and the cluster runs inside a
// testing/synctest bubble, where its timers (leases, failure detection,
// timeouts) run on the bubble's fake clock, so a test of a crash or a
// partition takes milliseconds and is deterministic. Network gives access
// to its faults (Partition, Isolate, Crash, Heal, ...). With TCP the nodes
// use real loopback sockets instead.
//
// Every node lists every other as a gossip seed, so over TCP the gossip
// ports are chosen before any node starts: each is one the kernel handed
// out for TCP and UDP a moment earlier. Another process could take one in
// between; the start is then tried again with fresh ports.
//
// # Goroutines after Close
//
// Close stops every goroutine of the nodes but one: memberlist's prober
// may still wait, for up to 1.6 s, for the answer to a probe sent just
// before (see dlm.Node.Close). Inside a synctest bubble that wait runs on
// fake time and ends before the bubble does. A test process that checks
// for leaked goroutines (go.uber.org/goleak) should use VerifyTestMain,
// which gives it that long to end.
package dlmtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/internal/leakcheck"
	"github.com/seed-a6839e30/dlm/transport/memnet"
)

// Option changes how New and Start build a cluster.
type Option func(*options)

type options struct {
	tcp       bool
	configure func(i int, cfg *dlm.Config)
	timeout   time.Duration
	attempts  int
}

// TCP runs the nodes over loopback TCP (127.0.0.1) instead of the
// in-process network, with real sockets and real time.
func TCP() Option { return func(o *options) { o.tcp = true } }

// Configure adjusts node i's configuration (0-based) before it starts:
// lockspaces, limits, timing, a Logger or a Registerer. dlmtest has set
// Name, Members, ClusterID, Seeds and the network fields by then; change
// those only if you know why.
func Configure(f func(i int, cfg *dlm.Config)) Option {
	return func(o *options) { o.configure = f }
}

// StartTimeout bounds how long Start and New wait for the cluster to form
// (default 60 s; inside a synctest bubble that is fake time).
func StartTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// defaultAttempts is how often a TCP start is tried with fresh ports.
const defaultAttempts = 3

// Cluster is a running cluster of n nodes named node1..nodeN.
type Cluster struct {
	nodes []*dlm.Node
	names []string
	net   *memnet.Network // nil over TCP

	closeOnce sync.Once
}

// Start starts an n-node cluster for a test and closes it when the test
// ends (t.Cleanup). It fails the test if the cluster does not form. Call
// it inside synctest.Test to run the cluster on fake time.
func Start(tb testing.TB, n int, opts ...Option) *Cluster {
	tb.Helper()
	c, err := New(context.Background(), n, opts...)
	if err != nil {
		tb.Fatalf("dlmtest: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// New starts an n-node cluster and returns once every node has started
// (dlm.Start returned for each). ctx bounds the wait, as does
// StartTimeout. The caller closes the cluster.
func New(ctx context.Context, n int, opts ...Option) (*Cluster, error) {
	o := options{timeout: 60 * time.Second, attempts: defaultAttempts}
	for _, opt := range opts {
		opt(&o)
	}
	if n < 1 {
		return nil, fmt.Errorf("dlmtest: a cluster needs at least one node, not %d", n)
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if !o.tcp {
		return startMem(ctx, n, o)
	}
	var errs []error
	for range o.attempts {
		c, err := startTCP(ctx, n, o)
		if err == nil {
			return c, nil
		}
		if errors.Is(err, dlm.ErrInvalidConfig) {
			return nil, err
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("dlmtest: %d attempts with fresh ports: %w", len(errs), errors.Join(errs...))
}

func names(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("node%d", i+1)
	}
	return s
}

// clusterID is unique per cluster, so that nodes of two clusters on one
// machine (a port reused between two tests, say) refuse each other.
func clusterID() string { return "dlmtest-" + rand.Text()[:12] }

func startMem(ctx context.Context, n int, o options) (*Cluster, error) {
	network, err := memnet.New(memnet.DefaultConfig())
	if err != nil {
		return nil, fmt.Errorf("dlmtest: %w", err)
	}
	c := &Cluster{names: names(n), net: network}
	mns := make([]*memnet.Node, n)
	seeds := make([]string, n)
	for i, name := range c.names {
		if mns[i], err = network.AddNode(name); err != nil {
			network.Close()
			return nil, fmt.Errorf("dlmtest: %w", err)
		}
		seeds[i] = name + "/" + mns[i].GossipAddr()
	}
	err = c.start(ctx, clusterID(), func(i int, cfg *dlm.Config) {
		cfg.Streams, cfg.GossipTransport, cfg.Seeds = mns[i].StreamLayer(), mns[i].Transport(), seeds
	}, o)
	if err != nil {
		network.Close()
		settleBubble()
		return nil, err
	}
	return c, nil
}

func startTCP(ctx context.Context, n int, o options) (*Cluster, error) {
	c := &Cluster{names: names(n)}
	addrs := make([]string, n)
	for i := range addrs {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", port)
	}
	err := c.start(ctx, clusterID(), func(i int, cfg *dlm.Config) {
		cfg.GossipAddr, cfg.LinkAddr, cfg.Seeds = addrs[i], "127.0.0.1:0", addrs
	}, o)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// start starts every node at once (each waits for a quorum of the others;
// one failing stops the rest).
func (c *Cluster) start(ctx context.Context, id string, network func(int, *dlm.Config), o options) error {
	c.nodes = make([]*dlm.Node, len(c.names))
	cfgs := make([]dlm.Config, len(c.names))
	for i, name := range c.names {
		cfg := dlm.DefaultConfig()
		cfg.Name, cfg.Members, cfg.ClusterID = name, c.names, id
		network(i, &cfg)
		if o.configure != nil {
			o.configure(i, &cfg)
		}
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("dlmtest: node %d: %w", i, err)
		}
		cfgs[i] = cfg
	}
	g, ctx := errgroup.WithContext(ctx)
	for i := range cfgs {
		g.Go(func() error {
			nd, err := dlm.Start(ctx, cfgs[i])
			if err != nil {
				return fmt.Errorf("%s: %w", cfgs[i].Name, err)
			}
			c.nodes[i] = nd
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		c.closeNodes()
		return err
	}
	return nil
}

// freePort returns a loopback port that was free for both TCP and UDP a
// moment ago (memberlist binds both on one port).
func freePort() (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("dlmtest: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, uerr := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		_ = l.Close()
		if uerr == nil {
			_ = u.Close()
			return port, nil
		}
	}
	return 0, errors.New("dlmtest: no loopback port free for both TCP and UDP")
}

// Nodes returns the nodes, node1 first. A node crashed with Crash stays
// in the slice (closed).
func (c *Cluster) Nodes() []*dlm.Node { return c.nodes }

// Node returns node i (0-based).
func (c *Cluster) Node(i int) *dlm.Node { return c.nodes[i] }

// Names returns the nodes' names, the cluster's configured members.
func (c *Cluster) Names() []string { return c.names }

// Network returns the in-process network the nodes talk over, to inject
// faults; nil over TCP.
func (c *Cluster) Network() *memnet.Network { return c.net }

// Lockspaces opens lockspace name on every node, in node order.
func (c *Cluster) Lockspaces(name string) ([]*dlm.Lockspace, error) {
	out := make([]*dlm.Lockspace, len(c.nodes))
	for i, nd := range c.nodes {
		ls, err := nd.Lockspace(name)
		if err != nil {
			return nil, fmt.Errorf("dlmtest: %s: %w", nd.Name(), err)
		}
		out[i] = ls
	}
	return out, nil
}

// Crash stops node i as if its process died (dlm.Node.Halt): it releases
// nothing and tells nobody, and on the in-process network its endpoints
// close at once. The others find out through failure detection and
// re-grant its locks after the lock-delay.
func (c *Cluster) Crash(i int) {
	if c.net != nil {
		_ = c.net.Crash(c.names[i])
	}
	c.nodes[i].Halt()
}

// Close closes every node (releasing their locks) and the in-process
// network. It is safe to call more than once.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		c.closeNodes()
		if c.net != nil {
			c.net.Close()
			settleBubble()
		}
	})
	return nil
}

// settleBubble, inside a synctest bubble, waits for the memberlist
// goroutines of closed nodes to end (see waitGone).
func settleBubble() {
	if b := bubble(); b != "" {
		waitGone(b, memberlistFrame, Linger)
	}
}

// memberlistFrame is in the traceback of every goroutine memberlist runs.
const memberlistFrame = "github.com/hashicorp/memberlist."

// bubble returns how tracebacks mark the goroutines of the calling
// goroutine's synctest bubble ("synctest bubble 3]"), or "" outside one.
func bubble() string {
	buf := make([]byte, 512)
	header, _, _ := strings.Cut(string(buf[:runtime.Stack(buf, false)]), "\n")
	i := strings.Index(header, "synctest bubble ")
	if i < 0 {
		return ""
	}
	return header[i:]
}

// waitGone waits, up to limit, until no goroutine of bubble b has frame in
// its traceback. Inside the bubble the wait runs on fake time: the bubble
// cannot end while a goroutine of its own still waits for a timer, and
// memberlist's prober outlives Shutdown by that much.
func waitGone(b, frame string, limit time.Duration) {
	buf := make([]byte, 1<<16)
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		n := runtime.Stack(buf, true)
		for n == len(buf) {
			buf = make([]byte, 2*len(buf))
			n = runtime.Stack(buf, true)
		}
		if !hasGoroutine(string(buf[:n]), b, frame) {
			return
		}
	}
}

// hasGoroutine reports whether a traceback of all goroutines holds one
// whose header names bubble b and whose frames include frame.
func hasGoroutine(stacks, b, frame string) bool {
	for _, g := range strings.Split(stacks, "\n\n") {
		header, frames, _ := strings.Cut(g, "\n")
		if strings.Contains(header, b) && strings.Contains(frames, frame) {
			return true
		}
	}
	return false
}

func (c *Cluster) closeNodes() {
	for _, nd := range c.nodes {
		if nd != nil {
			_ = nd.Close()
		}
	}
}

// VerifyTestMain runs the tests of a package that starts clusters and then
// checks, with go.uber.org/goleak, that no goroutine outlived them. It
// first waits up to Linger for goroutines that end by themselves after a
// node's Close (memberlist's prober), so that only a goroutine that never
// ends fails the run. Use it as the package's TestMain:
//
//	func TestMain(m *testing.M) { dlmtest.VerifyTestMain(m) }
func VerifyTestMain(m *testing.M) { leakcheck.Main(m) }

// Linger bounds VerifyTestMain's wait for goroutines that end by themselves.
const Linger = leakcheck.Linger
