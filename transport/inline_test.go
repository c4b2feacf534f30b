package transport_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// tcpPair starts two Links over loopback TCP (where senders write inline
// when the link is idle) and connects them both ways.
func tcpPair(t *testing.T) (a, b *node) {
	t.Helper()
	return tcpPairWith(t, nil)
}

// tcpPairWith is tcpPair with tweak applied to both nodes' configs.
func tcpPairWith(t *testing.T, tweak func(*transport.Config)) (a, b *node) {
	t.Helper()
	nodes := map[string]*node{}
	for _, name := range []string{"a", "b"} {
		sl, err := transport.ListenTCP(transport.TCPConfig{Addr: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		nodes[name] = newNode(t, name, sl, tweak)
	}
	a, b = nodes["a"], nodes["b"]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range [][2]*node{{a, b}, {b, a}} {
		name := "b"
		if p[1] == a {
			name = "a"
		}
		if err := p[0].links.SetPeer(name, p[1].addr); err != nil {
			t.Fatal(err)
		}
		if err := p[0].links.WaitConnected(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// TestInlineWritesKeepOrder: goroutines send, post and call concurrently
// over TCP; the inline writes, the writer goroutine and the writes deferred
// to the end of a handler batch must never reorder one sender's messages.
func TestInlineWritesKeepOrder(t *testing.T) {
	a, b := tcpPair(t)
	defer a.links.Close()
	defer b.links.Close()
	const senders, each = 8, 300
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := uint64(s)<<32 | uint64(i+1)
				var err error
				switch i % 3 {
				case 0:
					err = a.links.Send("b", lockReq(id))
				case 1:
					err = a.links.Post("b", lockReq(id))
				default:
					_, err = a.links.Call(context.Background(), "b", lockReq(id))
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for len(b.rec.messages()) < senders*each && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	next := map[uint64]uint64{}
	for _, m := range b.rec.messages() {
		s, i := m.lock>>32, m.lock&0xffffffff
		if i != next[s]+1 {
			t.Fatalf("sender %d: message %d after %d", s, i, next[s])
		}
		next[s] = i
	}
	if got := len(b.rec.messages()); got != senders*each {
		t.Fatalf("b received %d messages, want %d", got, senders*each)
	}
}

// TestHandlerRepliesBatched: replies sent by handlers while a burst of
// requests is read leave together, in fewer writes than replies.
func TestHandlerRepliesBatched(t *testing.T) {
	a, b := tcpPair(t)
	defer a.links.Close()
	defer b.links.Close()
	callOK(t, a, "b", 1) // warm up
	writes0 := counter(t, b.reg, "dlm_transport_write_syscalls_total")
	const n = 2000
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		if err := a.links.Go("b", lockReq(uint64(i+2)), func(rep wire.Message, err error) {
			if err != nil || rep.(*wire.Completion).Lock != uint64(i+2) {
				t.Errorf("reply %d: %v %v", i, rep, err)
			}
			wg.Done()
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	writes := counter(t, b.reg, "dlm_transport_write_syscalls_total") - writes0
	t.Logf("%d replies in %v writes", n, writes)
	if writes >= n/2 {
		t.Fatalf("%d replies took %v writes: not batched", n, writes)
	}
}

// TestFlushWaitsForQueuedMessages: what was queued before Flush has left
// when it returns, so a closing node does not lose its last messages.
func TestFlushWaitsForQueuedMessages(t *testing.T) {
	a, b := tcpPair(t)
	defer b.links.Close()
	const n = 5000
	for i := range n {
		if err := a.links.Post("b", lockReq(uint64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.links.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.links.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(b.rec.messages()) < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := b.rec.messages(); len(got) != n {
		t.Fatalf("b received %d of %d messages queued before Flush and Close (last lock %d)", len(got), n, got[len(got)-1].lock)
	}
}
