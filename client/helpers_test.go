package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/clientport"
	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/dlm/dlmtest"
)

// agents is a cluster of dlm nodes in this process, each serving a client
// port on loopback: real agents as far as a client can tell.
type agents struct {
	t       testing.TB
	cluster *dlmtest.Cluster
	nodes   []*dlm.Node
	servers []*clientport.Server
	addrs   []string
	done    []chan error
}

func startAgents(t testing.TB, n int, mut func(*clientport.Config), nodeMut func(*dlm.Config)) *agents {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := dlmtest.New(ctx, n, dlmtest.TCP(), dlmtest.Configure(func(_ int, cfg *dlm.Config) {
		cfg.DeadlockWait = 200 * time.Millisecond
		if nodeMut != nil {
			nodeMut(cfg)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	a := &agents{t: t, cluster: cl, nodes: cl.Nodes()}
	for _, nd := range a.nodes {
		a.serve(nd, mut)
	}
	t.Cleanup(a.close)
	return a
}

// serve starts a client port for nd.
func (a *agents) serve(nd *dlm.Node, mut func(*clientport.Config)) {
	a.t.Helper()
	cfg := clientport.DefaultConfig()
	cfg.Node = nd
	if mut != nil {
		mut(&cfg)
	}
	srv, err := clientport.New(cfg)
	if err != nil {
		a.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		a.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	a.servers = append(a.servers, srv)
	a.addrs = append(a.addrs, ln.Addr().String())
	a.done = append(a.done, done)
}

func (a *agents) close() {
	for i, s := range a.servers {
		if s == nil {
			continue
		}
		_ = s.Close()
		if err := <-a.done[i]; !errors.Is(err, clientport.ErrServerClosed) {
			a.t.Errorf("Serve: %v", err)
		}
	}
	_ = a.cluster.Close()
}

// kill stops agent i as if its process died: its node halts (its locks
// are re-granted after the lock-delay) and its port closes.
func (a *agents) kill(i int) {
	a.nodes[i].Halt()
	_ = a.servers[i].Close()
	<-a.done[i]
	a.servers[i] = nil
}

func dial(t testing.TB, addrs ...string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addrs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// resourceOn returns a resource (named from prefix) that node idx masters.
func (a *agents) resourceOn(idx int, prefix string) string {
	a.t.Helper()
	ls, err := a.nodes[0].Lockspace("test")
	if err != nil {
		a.t.Fatal(err)
	}
	for i := range 10000 {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if ls.MasterOf(name) == a.nodes[idx].Name() {
			return name
		}
	}
	a.t.Fatalf("no resource mastered by %s", a.nodes[idx].Name())
	return ""
}

var bg = context.Background()

func within[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s: nothing within %v", what, d)
	}
	var zero T
	return zero
}
