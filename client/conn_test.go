package client

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// hookConn is a net.Conn whose next Read that returns data first runs
// onRead, and which reports a read deadline moved to the past.
type hookConn struct {
	net.Conn
	mu       sync.Mutex
	onRead   func()
	deadline chan struct{} // gets a value when the read deadline is set in the past
}

func (h *hookConn) Read(b []byte) (int, error) {
	n, err := h.Conn.Read(b)
	h.mu.Lock()
	f := h.onRead
	if n > 0 {
		h.onRead = nil
	}
	h.mu.Unlock()
	if n > 0 && f != nil {
		f()
	}
	return n, err
}

func (h *hookConn) SetReadDeadline(t time.Time) error {
	if !t.IsZero() && t.Before(time.Now()) {
		select {
		case h.deadline <- struct{}{}:
		default:
		}
	}
	return h.Conn.SetReadDeadline(t)
}

// pipeClient is a client whose connection is nc, with no agent behind it
// but what the test writes, and no watcher.
func pipeClient(nc net.Conn) (*Client, *conn) {
	cfg := DefaultConfig()
	cfg.Addrs = []string{"127.0.0.1:1"} // where a reconnect would go: nowhere
	c := &Client{cfg: cfg, log: slog.New(slog.DiscardHandler), pending: map[uint64]*call{}, locks: map[uint64]*Lock{},
		up: make(chan struct{}), callbacks: newDispatcher(), stop: make(chan struct{}), ackKick: make(chan struct{}, 1)}
	cn := newConn(c, nc, "pipe")
	c.cn = cn
	return c, cn
}

// readFrame reads one frame the client wrote on r and decodes it.
func readFrame(r io.Reader, dec *wire.Decoder) (wire.Message, error) {
	l := wire.DefaultLimits()
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	n, err := wire.FrameLength(prefix[:], &l)
	if err != nil {
		return nil, err
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return nil, err
	}
	_, m, err := dec.DecodeOwned(payload)
	return m, err
}

// answerAlive writes the agent's answer to keep-alive id on w.
func answerAlive(t *testing.T, w net.Conn, id uint64) {
	l := wire.DefaultLimits()
	b, err := wire.AppendFrame(nil, wire.Header{ID: id, Reply: true}, &wire.ClientAlive{Lease: int64(time.Second)}, &l)
	if err != nil {
		t.Error(err)
		return
	}
	_, _ = w.Write(b)
}

// TestAwaitLeavesNoReadDeadline: a caller that reads the connection for
// its own answer, and whose context ends just as that read brings a frame
// in (the context's interrupt moves the read deadline to the past after
// the frame arrived), must not leave the deadline behind: the next read,
// whoever makes it, would time out, and the connection be dropped for
// nothing. Made deterministic by holding the read until the interrupt
// has set the deadline.
func TestAwaitLeavesNoReadDeadline(t *testing.T) {
	agentEnd, clientEnd := net.Pipe()
	defer agentEnd.Close()
	hc := &hookConn{Conn: clientEnd, deadline: make(chan struct{}, 1)}
	c, cn := pipeClient(hc)
	defer func() {
		close(c.stop)
		c.wg.Wait()
	}()
	answer := func(id uint64) { answerAlive(t, agentEnd, id) }

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := c.newCall(&wire.ClientKeepAlive{})
	hc.mu.Lock()
	hc.onRead = func() {
		cancel() // the caller's context ends as its answer comes in
		select {
		case <-hc.deadline:
		case <-time.After(10 * time.Second):
			t.Error("the ended context did not interrupt the read")
		}
	}
	hc.mu.Unlock()
	go answer(first.id)
	if err := cn.await(ctx, first); err != nil && !c.isDone(first) {
		t.Fatalf("first call: %v", err)
	}

	second := c.newCall(&wire.ClientKeepAlive{})
	go answer(second.id)
	if err := cn.await(context.Background(), second); err != nil {
		t.Fatalf("the read after an interrupted one failed (%v): the interrupt's deadline was left on the connection", err)
	}
	if !c.isDone(second) {
		t.Fatal("second call not answered")
	}
}

// TestContextKeptAcrossReads: a caller's context is registered once for
// the reads of the requests made under it, and its end still interrupts
// a later read under it (a wait that never gets its answer), after reads
// under other contexts too; the connection then reads on.
func TestContextKeptAcrossReads(t *testing.T) {
	agentEnd, clientEnd := net.Pipe()
	defer agentEnd.Close()
	c, cn := pipeClient(clientEnd)
	answer := func(id uint64) { answerAlive(t, agentEnd, id) }
	answered := func(ctx context.Context) {
		t.Helper()
		cl := c.newCall(&wire.ClientKeepAlive{})
		go answer(cl.id)
		if err := cn.await(ctx, cl); err != nil || !c.isDone(cl) {
			t.Fatalf("answered call: %v", err)
		}
	}
	unanswered := func(ctx context.Context, cancel func()) {
		t.Helper()
		cl := c.newCall(&wire.ClientKeepAlive{})
		errc := make(chan error, 1)
		go func() { errc <- cn.await(ctx, cl) }()
		time.Sleep(10 * time.Millisecond) // the caller reads, or is about to: either way its ctx ends it
		cancel()
		if err := within(t, errc, 10*time.Second, "await whose context ended"); !errors.Is(err, context.Canceled) {
			t.Fatalf("await whose context ended: %v", err)
		}
	}
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	answered(ctxA)
	answered(ctxA)
	answered(ctxB)
	unanswered(ctxB, cancelB)      // B replaced A's registration
	answered(context.Background()) // the interrupt's deadline is not left behind
	answered(ctxA)
	answered(ctxA)
	unanswered(ctxA, cancelA)
	answered(context.Background())
}
