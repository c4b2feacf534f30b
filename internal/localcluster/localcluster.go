// Package localcluster starts a cluster of dlm nodes in one process over
// loopback TCP, for the demo, the benchmarks and the examples.
//
// Every node must know a seed before it starts, and Start waits for every
// member, so gossip ports are chosen before any node starts: each is a port
// the kernel handed out for both TCP and UDP a moment earlier. Another
// process could take one in between; Start then fails to bind, and is tried
// again with fresh ports.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"

	"golang.org/x/sync/errgroup"

	"github.com/seed-a6839e30/dlm/dlm"
)

// Cluster is a running local cluster.
type Cluster []*dlm.Node

// Close closes every node, releasing their locks.
func (c Cluster) Close() {
	for _, n := range c {
		if n != nil {
			_ = n.Close()
		}
	}
}

// attempts is how often Start picks fresh ports after a bind failure.
const attempts = 3

// Start starts n nodes named node1..nodeN. configure, if not nil, adjusts
// each node's configuration (index i) before it starts.
func Start(ctx context.Context, n int, configure func(i int, cfg *dlm.Config)) (Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("localcluster: need at least one node, not %d", n)
	}
	var err error
	for range attempts {
		var c Cluster
		if c, err = start(ctx, n, configure); err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

func start(ctx context.Context, n int, configure func(int, *dlm.Config)) (Cluster, error) {
	names := make([]string, n)
	addrs := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("node%d", i+1)
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", port)
	}
	c := make(Cluster, n)
	g, ctx := errgroup.WithContext(ctx) // one node failing stops the others waiting
	for i := range n {
		cfg := dlm.DefaultConfig()
		cfg.Name, cfg.Members, cfg.Seeds, cfg.GossipAddr = names[i], names, addrs, addrs[i]
		if configure != nil {
			configure(i, &cfg)
		}
		g.Go(func() error {
			nd, err := dlm.Start(ctx, cfg)
			c[i] = nd
			return err
		})
	}
	if err := g.Wait(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// freePort returns a loopback port free for both TCP and UDP (memberlist
// binds both on one port).
func freePort() (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, uerr := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		_ = l.Close()
		if uerr == nil {
			_ = u.Close()
			return port, nil
		}
	}
	return 0, errors.New("localcluster: no port free for both TCP and UDP")
}
