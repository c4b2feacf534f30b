package membership_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/transport/membership"
	"github.com/seed-a6839e30/dlm/transport/memnet"
)

// recorder keeps a node's events and signals every new one, so that tests
// wait for conditions on events rather than for time.
type recorder struct {
	mu      sync.Mutex
	events  []membership.Event
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1)} }

func (r *recorder) on(ev membership.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) snapshot() []membership.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// alive replays the events into the set of alive members and their boots.
func (r *recorder) alive() map[string]uint64 {
	out := map[string]uint64{}
	for _, ev := range r.snapshot() {
		switch ev.Kind {
		case membership.Leave:
			delete(out, ev.Member.Name)
		default:
			out[ev.Member.Name] = ev.Member.BootID
		}
	}
	return out
}

type mnode struct {
	name string
	net  *memnet.Node
	m    *membership.Membership
	rec  *recorder
	reg  *prometheus.Registry
	boot uint64
}

type cluster struct {
	t     *testing.T
	net   *memnet.Network
	id    string
	nodes map[string]*mnode
	seeds []string
	tweak func(*membership.Config)
}

func newCluster(t *testing.T, id string, names ...string) *cluster {
	t.Helper()
	return newClusterWith(t, id, nil, names...)
}

// newClusterWith is newCluster with a change to every node's configuration.
func newClusterWith(t *testing.T, id string, tweak func(*membership.Config), names ...string) *cluster {
	t.Helper()
	net, err := memnet.New(memnet.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, net: net, id: id, nodes: map[string]*mnode{}, tweak: tweak}
	mns := make([]*memnet.Node, len(names))
	for i, name := range names {
		if mns[i], err = net.AddNode(name); err != nil {
			t.Fatal(err)
		}
		c.seeds = append(c.seeds, name+"/"+mns[i].GossipAddr())
	}
	for i, mn := range mns {
		c.start(mn, uint64(i+1))
	}
	return c
}

// restart starts a crashed node's name again with a new boot ID.
func (c *cluster) restart(name string) *mnode {
	c.t.Helper()
	mn, err := c.net.AddNode(name)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.start(mn, c.nodes[name].boot+1<<32)
}

// start runs membership on a memnet node, with every cluster node as seed.
func (c *cluster) start(mn *memnet.Node, boot uint64) *mnode {
	c.t.Helper()
	var err error
	name := mn.Name()
	n := &mnode{name: name, net: mn, rec: newRecorder(), reg: prometheus.NewRegistry(), boot: boot}
	cfg := membership.DefaultConfig()
	cfg.Name, cfg.ClusterID, cfg.BootID = name, c.id, n.boot
	cfg.LinkAddr = mn.LinkAddr()
	cfg.Transport = mn.Transport()
	cfg.Seeds = c.seeds
	cfg.OnEvent = n.rec.on
	cfg.Registerer = n.reg
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	n.m, err = membership.Start(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.nodes[name] = n
	return n
}

func (c *cluster) closeAll() {
	for _, n := range c.nodes {
		_ = n.m.Close()
	}
	c.net.Close()
	drain()
}

// drain lets fake time run on after Close: memberlist's Shutdown does not
// wait for its probe and stream goroutines, which end on their own timers
// (at most TCPTimeout later). synctest stops the clock once the test
// function returns, so the test must give them that time first.
func drain() { time.Sleep(3 * time.Second) }

// waitUntil waits, in fake time, for cond to hold on the events of every
// node in names, failing after d.
func (c *cluster) waitUntil(d time.Duration, what string, names []string, cond func(n *mnode) bool) time.Duration {
	c.t.Helper()
	start := time.Now()
	deadline := time.After(d)
	for _, name := range names {
		n := c.nodes[name]
		for !cond(n) {
			select {
			case <-n.rec.changed:
			case <-deadline:
				c.t.Fatalf("%s: not reached on %s within %v; events: %v", what, name, d, n.rec.snapshot())
			}
		}
	}
	return time.Since(start)
}

// converged: the node's events say every other running node is alive with
// its current boot.
func (c *cluster) converged(running []string) func(n *mnode) bool {
	return func(n *mnode) bool {
		alive := n.rec.alive()
		want := 0
		for _, o := range running {
			if o == n.name {
				continue
			}
			want++
			if alive[o] != c.nodes[o].boot {
				return false
			}
		}
		return len(alive) == want
	}
}

func others(all []string, not string) []string {
	out := []string{}
	for _, n := range all {
		if n != not {
			out = append(out, n)
		}
	}
	return out
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("n%d", i+1)
	}
	return out
}

func counterValue(t *testing.T, n *mnode, name string) float64 {
	t.Helper()
	mfs, err := n.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	v := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue()
			}
		}
	}
	return v
}
