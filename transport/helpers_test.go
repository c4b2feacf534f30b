package transport_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/memnet"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

const cluster = "test-cluster"

// recorder is a Handler that keeps what it was sent and answers every
// LockRequest with a granted Completion carrying the request's lock id.
type recorder struct {
	links *transport.Links // set after New
	mu    sync.Mutex
	got   []received
	hook  func(transport.Inbound) // runs first, if set (under no lock)
}

// setHook installs a function every incoming message goes through first.
func (r *recorder) setHook(f func(transport.Inbound)) {
	r.mu.Lock()
	r.hook = f
	r.mu.Unlock()
}

type received struct {
	from string
	typ  wire.Type
	lock uint64
}

func (r *recorder) handle(in transport.Inbound) {
	r.mu.Lock()
	hook := r.hook
	r.mu.Unlock()
	if hook != nil {
		hook(in)
	}
	var lock uint64
	switch m := in.Msg.(type) {
	case *wire.LockRequest:
		lock = m.Lock
	case *wire.Blocking:
		lock = m.Lock
	}
	r.mu.Lock()
	r.got = append(r.got, received{in.From, in.Msg.Type(), lock})
	r.mu.Unlock()
	if req, ok := in.Msg.(*wire.LockRequest); ok && in.ReplyTo.IsRequest() {
		_ = r.links.Reply(in.ReplyTo, grant(req.Lock))
	}
}

func (r *recorder) messages() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func grant(lock uint64) *wire.Completion {
	return &wire.Completion{Epoch: 1, Lockspace: "ls", Lock: lock, Status: wire.StatusGranted, Mode: modes.EX, Token: lock * 10}
}

func lockReq(lock uint64) *wire.LockRequest {
	return &wire.LockRequest{Epoch: 1, Lockspace: "ls", Resource: "res", Lock: lock, Mode: modes.EX}
}

type node struct {
	links *transport.Links
	rec   *recorder
	reg   *prometheus.Registry
	addr  string
}

// newNode starts Links on a stream layer with a recorder.
func newNode(t testing.TB, name string, sl transport.StreamLayer, tweak func(*transport.Config)) *node {
	t.Helper()
	rec := &recorder{}
	reg := prometheus.NewRegistry()
	cfg := transport.DefaultConfig()
	cfg.Name, cfg.ClusterID, cfg.StreamLayer, cfg.Handler, cfg.Registerer = name, cluster, sl, rec.handle, reg
	cfg.BootID = uint64(len(name))*1000 + 7
	if tweak != nil {
		tweak(&cfg)
	}
	l, err := transport.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec.links = l
	return &node{links: l, rec: rec, reg: reg, addr: sl.Addr().String()}
}

// memNodes starts Links for names on a memnet network, not told of each
// other.
func memNodes(t testing.TB, net *memnet.Network, tweak func(*transport.Config), names ...string) map[string]*node {
	t.Helper()
	nodes := map[string]*node{}
	for _, name := range names {
		mn, err := net.AddNode(name)
		if err != nil {
			t.Fatal(err)
		}
		nodes[name] = newNode(t, name, mn.StreamLayer(), tweak)
	}
	return nodes
}

// memCluster starts Links for names on a memnet network and connects every
// pair.
func memCluster(t testing.TB, net *memnet.Network, tweak func(*transport.Config), names ...string) map[string]*node {
	t.Helper()
	nodes := memNodes(t, net, tweak, names...)
	for a, na := range nodes {
		for b, nb := range nodes {
			if a != b {
				if err := na.links.SetPeer(b, nb.addr); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return nodes
}

func closeAll(nodes map[string]*node) {
	for _, n := range nodes {
		_ = n.links.Close()
	}
}

func newNet(t testing.TB) *memnet.Network {
	n, err := memnet.New(memnet.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// callOK makes a call that must succeed with the grant for lock.
func callOK(t testing.TB, from *node, to string, lock uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rep, err := from.links.Call(ctx, to, lockReq(lock))
	if err != nil {
		t.Fatalf("call %s→%s: %v", from.links.Name(), to, err)
	}
	if c, ok := rep.(*wire.Completion); !ok || c.Lock != lock {
		t.Fatalf("call %s→%s: reply %#v", from.links.Name(), to, rep)
	}
}

func counter(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			if c := m.GetCounter(); c != nil {
				total += c.GetValue()
			} else if g := m.GetGauge(); g != nil {
				total += g.GetValue()
			}
		}
	}
	return total
}
