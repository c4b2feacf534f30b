package transport_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/internal/pingpong"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// The four benchmarks live in one package so that one `go test -bench` run
// measures the links against plain TCP on the same machine at the same time.

// benchLockRequest is lock-sized: what the dlm layer sends for a lock.
func benchLockRequest(lock uint64) *wire.LockRequest {
	return &wire.LockRequest{Epoch: 42, Lockspace: "fs1", Resource: "inode/1234567", Lock: lock, Owner: 77, Mode: modes.PR, Timeout: int64(5 * time.Second)}
}

// BenchmarkTCPPingPong is the floor the round trips here are measured
// against, run in the same invocation: a plain TCP ping-pong over loopback.
func BenchmarkTCPPingPong(b *testing.B) { pingpong.Bench(b) }

// BenchmarkTCPPingPongTwoConns and BenchmarkTCPPingPongHandoff measure
// two designs the links have left behind (see package pingpong): the echo
// on a second connection, then a reader goroutine handing it to the caller.
func BenchmarkTCPPingPongTwoConns(b *testing.B) { pingpong.BenchTwoConns(b) }

func BenchmarkTCPPingPongHandoff(b *testing.B) { pingpong.BenchHandoff(b) }

// benchPair starts two Links over loopback TCP; b answers every lock request
// with a granted Completion.
func benchPair(b *testing.B) (client, server *transport.Links) {
	b.Helper()
	var srv *transport.Links
	reply := &wire.Completion{Epoch: 42, Lockspace: "fs1", Status: wire.StatusGranted, Mode: modes.PR, Token: 1}
	var mu sync.Mutex // the reply value is shared by the server's readers
	handler := func(in transport.Inbound) {
		if req, ok := in.Msg.(*wire.LockRequest); ok {
			mu.Lock()
			reply.Lock = req.Lock
			_ = srv.Reply(in.ReplyTo, reply)
			mu.Unlock()
		}
	}
	start := func(name string, h transport.Handler) *transport.Links {
		sl, err := transport.ListenTCP(transport.TCPConfig{Addr: "127.0.0.1:0"})
		if err != nil {
			b.Fatal(err)
		}
		cfg := transport.DefaultConfig()
		cfg.Name, cfg.ClusterID, cfg.StreamLayer, cfg.Handler = name, "bench", sl, h
		l, err := transport.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	client = start("client", func(transport.Inbound) {})
	srv = start("server", handler)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range []struct {
		l    *transport.Links
		peer *transport.Links
	}{{client, srv}, {srv, client}} {
		if err := p.l.SetPeer(p.peer.Name(), p.peer.Addr().String()); err != nil {
			b.Fatal(err)
		}
		if err := p.l.WaitConnected(ctx, p.peer.Name()); err != nil {
			b.Fatal(err)
		}
	}
	return client, srv
}

// BenchmarkLinkRoundTrip is one lock request and its reply through the
// links, one at a time: framing, validation, the inline writes and the
// reply matching on top of the ping-pong. The reply is decoded into one
// Completion (CallInto); Call would allocate a new one per reply.
func BenchmarkLinkRoundTrip(b *testing.B) {
	client, server := benchPair(b)
	defer server.Close()
	defer client.Close()
	ctx := context.Background()
	req := benchLockRequest(1)
	var rep wire.Completion
	b.ReportAllocs()
	for b.Loop() {
		req.Lock++
		if err := client.CallInto(ctx, "server", req, &rep); err != nil {
			b.Fatal(err)
		}
		if rep.Lock != req.Lock {
			b.Fatal("wrong reply")
		}
	}
}

// BenchmarkLinkPipelined keeps 64 requests in flight between two nodes and
// reports request/reply pairs per second.
func BenchmarkLinkPipelined(b *testing.B) {
	const window = 64
	client, server := benchPair(b)
	defer server.Close()
	defer client.Close()
	n := int64(b.N)
	var issued, completed atomic.Int64
	done := make(chan struct{})
	var send func()
	req := benchLockRequest(0) // encoded before Go returns, so it can be reused
	var reqMu sync.Mutex
	cb := func(_ wire.Message, err error) {
		if err != nil {
			b.Error(err)
		}
		if completed.Add(1) == n {
			close(done)
			return
		}
		send()
	}
	send = func() {
		if issued.Add(1) > n {
			return
		}
		reqMu.Lock()
		req.Lock++
		err := client.Go("server", req, cb)
		reqMu.Unlock()
		if err != nil {
			b.Error(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range min(window, b.N) {
		send()
	}
	<-done
	elapsed := time.Since(start)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pairs/s")
}

// BenchmarkLockRequestCodec is encode + decode of one lock request frame
// into reused buffers: the per-message cost of the codec.
func BenchmarkLockRequestCodec(b *testing.B) {
	l := wire.DefaultLimits()
	d := wire.NewDecoder(l)
	buf := make([]byte, 0, 256)
	req := benchLockRequest(1)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = wire.AppendFrame(buf[:0], wire.Header{ID: 9}, req, &l); err != nil {
			b.Fatal(err)
		}
		if _, _, err := d.DecodeFrame(buf); err != nil {
			b.Fatal(err)
		}
	}
}
