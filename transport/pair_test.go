package transport_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed-a6839e30/dlm/transport"
)

// conns returns a node's open connections by direction.
func conns(t testing.TB, n *node) (out, in float64) {
	t.Helper()
	return counter(t, n.reg, "dlm_transport_connections", "direction", "out"),
		counter(t, n.reg, "dlm_transport_connections", "direction", "in")
}

// A pair of nodes shares one connection, dialled by the node whose name
// sorts first, and traffic in both directions (requests, replies, one-way
// messages) travels on it.
func TestOnePairOneConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newNet(t)
		nodes := memCluster(t, net, nil, "a", "b", "c")
		defer closeAll(nodes)
		for i, from := range []string{"a", "b", "c"} {
			for _, to := range []string{"a", "b", "c"} {
				if from != to {
					callOK(t, nodes[from], to, uint64(i+1))
					if err := nodes[from].links.Send(to, lockReq(9)); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		synctest.Wait()
		want := map[string][2]float64{"a": {2, 0}, "b": {1, 1}, "c": {0, 2}}
		for name, w := range want {
			if out, in := conns(t, nodes[name]); out != w[0] || in != w[1] {
				t.Errorf("%s: %v out, %v in; want %v, %v", name, out, in, w[0], w[1])
			}
		}
	})
}

// A node waits to be dialled by a peer whose name sorts first: messages to it
// queue until the first connection, for a dial and a handshake timeout, then
// fail fast until the peer connects.
func TestWaitsToBeDialled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := memNodes(t, newNet(t), nil, "a", "b")
		defer closeAll(nodes)
		a, b := nodes["a"], nodes["b"]
		if err := b.links.SetPeer("a", a.addr); err != nil {
			t.Fatal(err)
		}
		if err := b.links.Send("a", lockReq(1)); err != nil {
			t.Fatalf("Send while waiting for the first connection: %v", err)
		}
		cfg := transport.DefaultConfig()
		time.Sleep(cfg.DialTimeout + cfg.HandshakeTimeout)
		synctest.Wait()
		if err := b.links.Send("a", lockReq(2)); !errors.Is(err, transport.ErrUnreachable) {
			t.Fatalf("Send after the wait: %v, want ErrUnreachable", err)
		}
		if err := a.links.SetPeer("b", b.addr); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := b.links.WaitConnected(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		callOK(t, b, "a", 3)
		callOK(t, a, "b", 4)
		if got := a.rec.messages(); len(got) != 1 || got[0].lock != 3 {
			t.Fatalf("a received %+v: the queued message went with the failed wait", got)
		}
	})
}

// A connection dialled before the dialled node knew the dialler is read at
// once (its messages reach the Handler), answered to the heartbeats so that
// it stays up, and becomes the link when the dialler is added: no redial.
func TestEarlyConnectionAdopted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nodes := memNodes(t, newNet(t), nil, "a", "b")
		defer closeAll(nodes)
		a, b := nodes["a"], nodes["b"]
		if err := a.links.SetPeer("b", b.addr); err != nil {
			t.Fatal(err)
		}
		if err := a.links.Send("b", lockReq(1)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * transport.DefaultConfig().IdleTimeout) // b only answers heartbeats
		synctest.Wait()
		if got := b.rec.messages(); len(got) != 1 || got[0].from != "a" {
			t.Fatalf("b received %+v", got)
		}
		if err := b.links.SetPeer("a", a.addr); err != nil {
			t.Fatal(err)
		}
		callOK(t, b, "a", 2)
		callOK(t, a, "b", 3)
		if got := counter(t, a.reg, "dlm_transport_reconnects_total"); got != 0 {
			t.Errorf("a reconnected %v times", got)
		}
		if out, in := conns(t, b); out != 0 || in != 1 {
			t.Errorf("b: %v out, %v in; want 0, 1", out, in)
		}
	})
}

// When the dialler restarts, the new process's connection replaces the old
// one at once, even before the old one is seen to fail: calls waiting on the
// old one fail with ErrConnLost, and replies go to the new process.
func TestRestartedDiallerReplacesConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newNet(t)
		nodes := memCluster(t, net, nil, "a", "b")
		defer closeAll(nodes)
		b := nodes["b"]
		callOK(t, b, "a", 1)
		pending := make(chan error, 1)
		go func() {
			_, err := b.links.Call(context.Background(), "a", cancelReq(2)) // never answered
			pending <- err
		}()
		synctest.Wait()

		// a second process named a, on another address, with a new boot
		mn, err := net.AddNode("a2")
		if err != nil {
			t.Fatal(err)
		}
		a2 := newNode(t, "a", mn.StreamLayer(), func(c *transport.Config) { c.BootID = 99 })
		defer a2.links.Close()
		if err := a2.links.SetPeer("b", b.addr); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := a2.links.WaitConnected(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-pending:
			if !errors.Is(err, transport.ErrConnLost) {
				t.Fatalf("call on the replaced connection: %v, want ErrConnLost", err)
			}
		case <-time.After(time.Second):
			t.Fatal("the call on the replaced connection still waits")
		}
		before := len(nodes["a"].rec.messages())
		callOK(t, b, "a", 3)
		if got := a2.rec.messages(); len(got) != 1 || got[0].lock != 3 {
			t.Fatalf("new a received %+v", got)
		}
		if got := nodes["a"].rec.messages(); len(got) != before {
			t.Fatalf("old a received %+v after the replacement", got[before:])
		}
	})
}

// A request that arrives on a connection the dialler just made is answered
// on it, even when the other end has not yet dropped the connection it
// replaces: the reading of a new connection starts once it is the link.
func TestCallRightAfterReconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newNet(t)
		nodes := memCluster(t, net, nil, "a", "b")
		defer closeAll(nodes)
		a := nodes["a"]
		callOK(t, a, "b", 1)
		for i := range 40 {
			net.Partition("a", "b")
			time.Sleep(transport.DefaultConfig().IdleTimeout) // both ends see it fail
			net.Heal()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := a.links.WaitConnected(ctx, "b"); err != nil {
				t.Fatalf("cycle %d: %v", i, err)
			}
			cancel()
			callOK(t, a, "b", uint64(i+2))
		}
	})
}

// A peer that restarts after its link's redials backed off is dialled as
// soon as Redial says it is back (membership saw it join), not when the
// backoff runs out: the backoff spaces attempts at a peer that does not
// answer, and a restarted peer answers the first.
func TestRedialCutsTheBackoffShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newNet(t)
		slow := func(c *transport.Config) { c.Backoff.Max = 20 * time.Second }
		nodes := memCluster(t, net, slow, "a", "b")
		defer closeAll(nodes)
		a := nodes["a"] // a dials b
		callOK(t, a, "b", 1)
		if err := net.Crash("b"); err != nil {
			t.Fatal(err)
		}
		_ = nodes["b"].links.Close()
		// Long enough for a's redials to back off to the 20 s cap.
		time.Sleep(time.Minute)

		mn, err := net.AddNode("b") // same name, same address, a new boot
		if err != nil {
			t.Fatal(err)
		}
		b2 := newNode(t, "b", mn.StreamLayer(), func(c *transport.Config) { slow(c); c.BootID = 99 })
		defer b2.links.Close()
		if err := b2.links.SetPeer("a", a.addr); err != nil {
			t.Fatal(err)
		}
		a.links.Redial("b")
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := a.links.WaitConnected(ctx, "b"); err != nil {
			t.Fatalf("a did not dial the restarted b within 100 ms of Redial: %v", err)
		}
		callOK(t, a, "b", 2)
	})
}
