package memnet_test

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/goleak"

	"github.com/seed-a6839e30/dlm/transport/memnet"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newNet(t *testing.T, names ...string) (*memnet.Network, map[string]*memnet.Node) {
	t.Helper()
	n, err := memnet.New(memnet.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*memnet.Node{}
	for _, name := range names {
		if nodes[name], err = n.AddNode(name); err != nil {
			t.Fatal(err)
		}
	}
	return n, nodes
}

// received drains what is queued for a node right now.
func received(nd *memnet.Node) []string {
	var out []string
	for {
		select {
		case p := <-nd.Transport().PacketCh():
			out = append(out, string(p.Buf))
		default:
			return out
		}
	}
}

func TestPacketsPartitionBlockHeal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net, nd := newNet(t, "a", "b")
		defer net.Close()
		a, b := nd["a"].Transport(), nd["b"].Transport()
		send := func(from *memnet.Transport, to *memnet.Node, s string) {
			if _, err := from.WriteToAddress([]byte(s), memberlist.Address{Addr: to.GossipAddr(), Name: to.Name()}); err != nil {
				t.Fatal(err)
			}
		}
		send(a, nd["b"], "1")
		if _, err := a.WriteTo([]byte("2"), nd["b"].GossipAddr()); err != nil {
			t.Fatal(err)
		}
		if got := received(nd["b"]); len(got) != 2 || got[0] != "1" || got[1] != "2" {
			t.Fatalf("b got %q", got)
		}
		net.Block("a", "b") // one way
		send(a, nd["b"], "lost")
		send(b, nd["a"], "through")
		if got := received(nd["b"]); len(got) != 0 {
			t.Fatalf("blocked direction delivered %q", got)
		}
		if got := received(nd["a"]); len(got) != 1 {
			t.Fatalf("open direction delivered %q", got)
		}
		net.Heal()
		net.Partition("a", "b")
		send(b, nd["a"], "lost")
		if got := received(nd["a"]); len(got) != 0 {
			t.Fatalf("partition delivered %q", got)
		}
		net.Heal()
		send(a, nd["b"], "back")
		if got := received(nd["b"]); len(got) != 1 {
			t.Fatalf("after heal: %q", got)
		}
	})
}

func TestLossIsSeededAndDelayUsesTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		count := func() int {
			net, nd := newNet(t, "a", "b")
			defer net.Close()
			net.SetLoss(0.3)
			for range 1000 {
				_, _ = nd["a"].Transport().WriteTo([]byte("x"), nd["b"].GossipAddr())
			}
			return len(received(nd["b"]))
		}
		first, second := count(), count()
		if first != second || first < 600 || first > 800 {
			t.Fatalf("30%% loss delivered %d then %d of 1000", first, second)
		}

		net, nd := newNet(t, "a", "b")
		defer net.Close()
		net.SetDelay(250 * time.Millisecond)
		start := time.Now()
		_, _ = nd["a"].Transport().WriteTo([]byte("late"), nd["b"].GossipAddr())
		p := <-nd["b"].Transport().PacketCh()
		if d := time.Since(start); d != 250*time.Millisecond || string(p.Buf) != "late" {
			t.Fatalf("delayed packet %q after %v", p.Buf, d)
		}
	})
}

func TestSendersNeverBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := memnet.DefaultConfig()
		cfg.PacketQueue = 10
		net, err := memnet.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer net.Close()
		a, _ := net.AddNode("a")
		b, _ := net.AddNode("b")
		for range 100 { // nobody reads b's queue
			_, _ = a.Transport().WriteTo([]byte("x"), b.GossipAddr())
		}
		if got := len(received(b)); got != 10 {
			t.Fatalf("queue of 10 holds %d", got)
		}
	})
}

func TestDialsAndStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net, nd := newNet(t, "a", "b", "c")
		defer net.Close()
		ctx := context.Background()
		la, lb := nd["a"].StreamLayer(), nd["b"].StreamLayer()

		c, err := la.Dial(ctx, lb.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := lb.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if s.RemoteAddr().String() != la.Addr().String() {
			t.Fatalf("remote address %v", s.RemoteAddr())
		}
		go func() { _, _ = c.Write([]byte("hi")) }()
		buf := make([]byte, 2)
		if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "hi" {
			t.Fatalf("stream read %q %v", buf, err)
		}

		// a partition breaks the stream and makes dials time out
		net.Partition("a", "b")
		if _, err := s.Read(buf); err == nil {
			t.Fatal("stream survived the partition")
		}
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		start := time.Now()
		_, err = la.Dial(dctx, lb.Addr().String())
		if !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) != 2*time.Second {
			t.Fatalf("dial across a partition: %v after %v", err, time.Since(start))
		}
		// c is unaffected
		if _, err := la.Dial(ctx, nd["c"].StreamLayer().Addr().String()); err != nil {
			t.Fatal(err)
		}
		net.Heal()

		// a crashed node refuses dials at once; a restart reuses its address
		if err := net.Crash("b"); err != nil {
			t.Fatal(err)
		}
		if _, err := la.Dial(ctx, lb.Addr().String()); !errors.Is(err, memnet.ErrRefused) {
			t.Fatalf("dial to crashed node: %v", err)
		}
		if _, err := lb.Accept(); err == nil {
			t.Fatal("crashed listener accepted")
		}
		b2, err := net.AddNode("b")
		if err != nil {
			t.Fatal(err)
		}
		if b2.LinkAddr() != lb.Addr().String() {
			t.Fatalf("restart moved b from %s to %s", lb.Addr(), b2.LinkAddr())
		}
		if _, err := la.Dial(ctx, b2.LinkAddr()); err != nil {
			t.Fatalf("dial to restarted node: %v", err)
		}
		if _, err := net.AddNode("b"); !errors.Is(err, memnet.ErrNodeExists) {
			t.Fatalf("second AddNode: %v", err)
		}
	})
}

func TestAcceptQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := memnet.DefaultConfig()
		cfg.AcceptQueue = 2
		net, err := memnet.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer net.Close()
		a, _ := net.AddNode("a")
		b, _ := net.AddNode("b")
		for i := range 3 {
			_, err := a.StreamLayer().Dial(context.Background(), b.LinkAddr())
			if (i < 2) != (err == nil) || (i == 2 && !errors.Is(err, memnet.ErrAcceptQueueFull)) {
				t.Fatalf("dial %d: %v", i, err)
			}
		}
	})
}
