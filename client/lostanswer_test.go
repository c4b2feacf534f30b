package client

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// cutProxy forwards loopback connections to an agent frame by frame.
// Once armed, the first frame from the agent that matches its rule is
// swallowed with everything after it, and the connection is cut both
// ways: the agent wrote an answer or a push the client never reads, as
// when a connection dies under it.
type cutProxy struct {
	t  *testing.T
	ln net.Listener
	to string

	mu    sync.Mutex
	rule  func(wire.Header, wire.Message) bool // nil while disarmed
	cut   chan wire.Message                    // the frame swallowed, once
	conns []net.Conn
	count int
	wg    sync.WaitGroup
}

func startCutProxy(t *testing.T, to string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{t: t, ln: ln, to: to}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

// arm makes the next frame from the agent that matches rule the last one
// sent on its connection, swallowed; the channel returns it.
func (p *cutProxy) arm(rule func(wire.Header, wire.Message) bool) <-chan wire.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rule, p.cut = rule, make(chan wire.Message, 1)
	return p.cut
}

func (p *cutProxy) accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.to)
		if err != nil {
			_ = down.Close()
			continue
		}
		p.mu.Lock()
		p.count++
		p.conns = append(p.conns, down, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(up, down); _ = up.Close() }()
		go func() { defer p.wg.Done(); p.forward(down, up); _ = down.Close(); _ = up.Close() }()
	}
}

// forward copies the agent's frames to the client until the rule cuts.
func (p *cutProxy) forward(down, up net.Conn) {
	l := wire.DefaultLimits()
	dec := wire.NewClientDecoder(l)
	for {
		var prefix [4]byte
		if _, err := io.ReadFull(up, prefix[:]); err != nil {
			return
		}
		frame := make([]byte, 4+binary.BigEndian.Uint32(prefix[:]))
		copy(frame, prefix[:])
		if _, err := io.ReadFull(up, frame[4:]); err != nil {
			return
		}
		h, m, err := dec.DecodeOwned(frame[4:])
		if err != nil {
			p.t.Errorf("the agent sent a frame that does not decode: %v", err)
			return
		}
		p.mu.Lock()
		rule := p.rule
		if rule != nil && rule(h, m) {
			p.rule = nil
			p.cut <- m
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		if _, err := down.Write(frame); err != nil {
			return
		}
	}
}

func (p *cutProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func replyOf(t wire.Type) func(wire.Header, wire.Message) bool {
	return func(h wire.Header, m wire.Message) bool { return h.Reply && m.Type() == t }
}

func pushOf(t wire.Type) func(wire.Header, wire.Message) bool {
	return func(h wire.Header, m wire.Message) bool { return !h.Reply && m.Type() == t }
}

// TestResumeGivesALostGrantAgain: the agent grants a lock and the
// connection dies with the grant unread. The resumed session's agent
// gives the grant again: Lock returns the lock with the token the lost
// grant carried, and unlocking it lets another client in. (Without it,
// Lock waits out its context while the session holds a lock its program
// does not know of, and the other client waits for the session to end.)
func TestResumeGivesALostGrantAgain(t *testing.T) {
	a := startAgents(t, 1, nil, nil)
	p := startCutProxy(t, a.addrs[0])
	c := dial(t, p.addr())
	other := dial(t, a.addrs[0])
	session := c.Session()

	cut := p.arm(replyOf(wire.TypeClientGrant))
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	lk, err := c.Lockspace("test").Lock(ctx, "lost-grant", modes.EX)
	if err != nil {
		t.Fatalf("Lock after its grant was lost: %v", err)
	}
	lost := within(t, cut, time.Second, "the grant swallowed").(*wire.ClientGrant)
	if lk.Token() != lost.Token || lk.Token() == 0 || lk.Mode() != modes.EX {
		t.Fatalf("lock %v with token %d, the lost grant's token %d", lk.Mode(), lk.Token(), lost.Token)
	}
	if c.Session() != session || p.accepted() != 2 {
		t.Fatalf("session %x (was %x), %d connections: want the session resumed once", c.Session(), session, p.accepted())
	}
	ols := other.Lockspace("test")
	if _, err := ols.TryLock(ctx, "lost-grant", modes.EX); !errors.Is(err, lockapi.ErrNotQueued) {
		t.Fatalf("another client's TryLock while the lock is held: %v", err)
	}
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}
	next, err := ols.Lock(ctx, "lost-grant", modes.EX)
	if err != nil {
		t.Fatalf("another client after the unlock: %v", err)
	}
	if next.Token() <= lk.Token() {
		t.Fatalf("token %d after %d", next.Token(), lk.Token())
	}
	if err := next.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// TestResumeGivesLostAnswersAgain: answers to a conversion, a SetValue
// and an Unlock, each swallowed with its connection, come again after the
// resume: Convert returns the new mode and token, SetValue returns, and
// the unlock's answer leaves no request behind.
func TestResumeGivesLostAnswersAgain(t *testing.T) {
	a := startAgents(t, 1, nil, nil)
	p := startCutProxy(t, a.addrs[0])
	c := dial(t, p.addr())
	ls := c.Lockspace("test")
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	// A resource with no lock forgets its value block: an NL lock keeps it.
	keep, err := dial(t, a.addrs[0]).Lockspace("test").Lock(ctx, "lost-answers", modes.NL)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Unlock()
	lk, err := ls.Lock(ctx, "lost-answers", modes.PR)
	if err != nil {
		t.Fatal(err)
	}
	first := lk.Token()

	cut := p.arm(replyOf(wire.TypeClientGrant))
	if err := lk.Convert(ctx, modes.EX); err != nil {
		t.Fatalf("Convert after its grant was lost: %v", err)
	}
	g := within(t, cut, time.Second, "the conversion's grant swallowed").(*wire.ClientGrant)
	if lk.Mode() != modes.EX || lk.Token() != g.Token || lk.Token() <= first {
		t.Fatalf("converted to %v with token %d; the lost grant: %v, token %d (first %d)", lk.Mode(), lk.Token(), g.Mode, g.Token, first)
	}

	cut = p.arm(replyOf(wire.TypeClientOK))
	done := make(chan error, 1)
	go func() { done <- lk.SetValue([]byte("v1")) }()
	within(t, cut, 5*time.Second, "the SetValue's answer swallowed")
	if err := within(t, done, 5*time.Second, "SetValue after its answer was lost"); err != nil {
		t.Fatal(err)
	}

	cut = p.arm(replyOf(wire.TypeClientOK))
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}
	within(t, cut, 5*time.Second, "the unlock's answer swallowed")
	waitFor(t, 5*time.Second, "the unlock's answer to come again", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, cl := range c.pending {
			if _, ok := cl.msg.(*wire.ClientUnlock); ok {
				return false
			}
		}
		return c.cn != nil
	})
	// The value was written back by the unlock.
	again, err := ls.Lock(ctx, "lost-answers", modes.PR)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := again.Value(); !ok || string(v) != "v1" {
		t.Fatalf("value %q (valid %v) after the lost SetValue answer, want v1", v, ok)
	}
	if got := p.accepted(); got != 4 {
		t.Fatalf("%d connections, want 4 (three cuts, each resumed)", got)
	}
}

// TestResumeGivesALostBlockingNotificationAgain: a blocking notification
// swallowed with its connection reaches the lock's holder after the
// resume, and the waiter gets the lock once it is let go.
func TestResumeGivesALostBlockingNotificationAgain(t *testing.T) {
	a := startAgents(t, 1, nil, nil)
	p := startCutProxy(t, a.addrs[0])
	c := dial(t, p.addr())
	other := dial(t, a.addrs[0])
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	blocked := make(chan modes.Mode, 4)
	lk, err := c.Lockspace("test").Lock(ctx, "lost-blocking", modes.EX, lockapi.OnBlocking(func(m modes.Mode) { blocked <- m }))
	if err != nil {
		t.Fatal(err)
	}
	cut := p.arm(pushOf(wire.TypeClientBlocking))
	got := make(chan error, 1)
	go func() {
		lk2, err := other.Lockspace("test").Lock(ctx, "lost-blocking", modes.PR)
		if err == nil {
			err = lk2.Unlock()
		}
		got <- err
	}()
	within(t, cut, 5*time.Second, "the blocking notification swallowed")
	if m := within(t, blocked, 5*time.Second, "the blocking notification after the resume"); m != modes.PR {
		t.Fatalf("blocking notification for %v, want PR", m)
	}
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := within(t, got, 5*time.Second, "the waiter"); err != nil {
		t.Fatal(err)
	}
}

// TestCloseWaitsForTheWatcher: Close returns only once every goroutine the
// client started has ended, the connection's watcher included, also when
// it closes while a reconnection's hello is on its way: the connection
// that completes after Close is closed, not watched. (The package's
// TestMain checks with goleak that nothing outlives the tests.)
func TestCloseWaitsForTheWatcher(t *testing.T) {
	a := startAgents(t, 1, nil, nil)
	p := startGateProxy(t, a.addrs[0])
	c := dial(t, p.addr())
	p.hold()
	waitFor(t, 5*time.Second, "the client to reconnect into the held proxy", func() bool { return p.accepted() >= 2 })
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	waitFor(t, 5*time.Second, "Close to begin", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.closed
	})
	p.release()
	if err := within(t, closed, 10*time.Second, "Close"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "client.(*conn).watch") {
		t.Fatalf("a connection's watcher runs after Close returned:\n%s", stacks)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cn != nil {
		t.Fatal("a connection was attached after Close")
	}
}
