//go:build linux

package clientport

import (
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/internal/syncbuf"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// parkPort is a port whose idle connections park after 20 ms.
func parkPort(t *testing.T, mut func(*Config)) *port {
	return startPort(t, 1, func(c *Config) {
		c.ParkAfter = 20 * time.Millisecond
		if mut != nil {
			mut(c)
		}
	})
}

func (p *port) waitParked(t *testing.T, n int) {
	t.Helper()
	waitFor(t, 10*time.Second, fmt.Sprintf("%d parked connections", n), func() bool { return p.srv.poll.parkedConns() == n })
}

// welcome opens a session on r and returns its Welcome.
func (r *raw) welcome(h *wire.ClientHello) *wire.ClientWelcome {
	r.t.Helper()
	w, ok := r.reply(r.send(h)).(*wire.ClientWelcome)
	if !ok {
		r.t.Fatal("no welcome")
	}
	return w
}

// TestParkedWokenByRequest: a connection with nothing to read after its
// Welcome parks at once, is woken by a request, answered, and parks again
// once silent for ParkAfter (the sweeps' way); the gauge says so.
func TestParkedWokenByRequest(t *testing.T) {
	p := parkPort(t, nil)
	r := p.hello("")
	p.waitParked(t, 1)
	if got := p.metric("dlm_client_connections_parked", nil); got != 1 {
		t.Fatalf("dlm_client_connections_parked = %v, want 1", got)
	}
	for k := range 3 {
		if _, ok := r.reply(r.send(&wire.ClientKeepAlive{})).(*wire.ClientAlive); !ok {
			t.Fatalf("keep-alive %d to a parked connection: no answer", k)
		}
		p.waitParked(t, 1)
	}
	id := r.send(&wire.ClientLock{Lockspace: "ls", Resource: "r", Mode: modes.EX})
	if _, ok := r.reply(id).(*wire.ClientGrant); !ok {
		t.Fatal("lock on a parked connection: no grant")
	}
}

// TestParkedPushes: frames the agent pushes to a parked connection (a
// blocking notification, a grant after a wait) are written to it, with no
// reader woken for them.
func TestParkedPushes(t *testing.T) {
	p := parkPort(t, nil)
	holder, waiter := p.hello(""), p.hello("")
	held := holder.reply(holder.send(&wire.ClientLock{Lockspace: "ls", Resource: "r", Mode: modes.EX, Flags: wire.ClientNotify}))
	g, ok := held.(*wire.ClientGrant)
	if !ok {
		t.Fatalf("holder: %v", held)
	}
	p.waitParked(t, 2)
	wantID := waiter.send(&wire.ClientLock{Lockspace: "ls", Resource: "r", Mode: modes.EX})
	_, m, err := holder.read(10 * time.Second)
	if b, ok := m.(*wire.ClientBlocking); err != nil || !ok || b.Lock != g.Lock {
		t.Fatalf("parked holder: got %v, %v; want a blocking notification for its lock", m, err)
	}
	p.waitParked(t, 2) // the waiter's request waits; it parks again
	if u := holder.reply(holder.send(&wire.ClientUnlock{Lock: g.Lock})); codeOfReply(t, u) != 0 {
		t.Fatalf("unlock: %v", u)
	}
	if _, ok := waiter.reply(wantID).(*wire.ClientGrant); !ok {
		t.Fatal("parked waiter: no grant")
	}
}

// TestParkedHalfFrame: a parked connection that then sends half a frame
// and stalls gets its reader back and keeps it (it is never parked with a
// frame begun), and is cut: its session expires, the connection closes.
func TestParkedHalfFrame(t *testing.T) {
	p := parkPort(t, func(c *Config) { c.MinTTL, c.HelloTimeout = 100*time.Millisecond, 200*time.Millisecond })
	other := p.hello("")
	r := p.dialRaw()
	r.welcome(&wire.ClientHello{TTL: int64(300 * time.Millisecond)})
	p.waitParked(t, 2)
	_, _ = r.nc.Write([]byte{0, 0, 0, 40, 1}) // a frame of 40 bytes, 1 sent
	p.waitParked(t, 1)
	start := time.Now()
	for time.Since(start) < 150*time.Millisecond { // many sweeps
		if n := p.srv.poll.parkedConns(); n != 1 {
			t.Fatalf("%d parked connections with a frame begun on one, want 1", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.closedWith(5 * time.Second)
	if time.Since(start) > 2*time.Second {
		t.Fatalf("the stalled connection was cut after %v", time.Since(start))
	}
	// The keep-alives of the other client were answered meanwhile.
	if _, ok := other.reply(other.send(&wire.ClientKeepAlive{})).(*wire.ClientAlive); !ok {
		t.Fatal("the other client is not served")
	}
}

// TestParkedPeerClose: the client closing a parked connection ends the
// agent's side of it (the connection's slot is freed), and its session,
// locks and all, resumes on a new connection.
func TestParkedPeerClose(t *testing.T) {
	p := parkPort(t, func(c *Config) { c.MaxConnections = 1 })
	r := p.dialRaw()
	w := r.welcome(&wire.ClientHello{TTL: int64(time.Minute)})
	g, ok := r.reply(r.send(&wire.ClientLock{Lockspace: "ls", Resource: "r", Mode: modes.EX})).(*wire.ClientGrant)
	if !ok {
		t.Fatal("no grant")
	}
	p.waitParked(t, 1)
	_ = r.nc.Close()
	waitFor(t, 10*time.Second, "the connection's end", func() bool { return p.metric("dlm_client_connections", nil) == 0 })
	p.waitParked(t, 0)
	if p.srv.Sessions() != 1 {
		t.Fatalf("%d sessions after the connection dropped, want 1", p.srv.Sessions())
	}
	r2 := p.dialRaw() // within MaxConnections = 1: the slot was freed
	w2 := r2.welcome(&wire.ClientHello{Session: w.Session, Key: w.Key})
	if !w2.Resumed {
		t.Fatal("the session did not resume")
	}
	r2.next = 10
	u := r2.reply(r2.send(&wire.ClientUnlock{Lock: g.Lock}))
	if e, isErr := u.(*wire.ClientError); isErr {
		t.Fatalf("unlock of the resumed session's lock: %v", e)
	}
}

// TestCloseStopsPoller: Close ends parked connections (their sessions
// too) and stops the poller's goroutine.
func TestCloseStopsPoller(t *testing.T) {
	var logs syncbuf.Buffer
	p := parkPort(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	var rs []*raw
	for range 5 {
		rs = append(rs, p.hello(""))
	}
	p.waitParked(t, 5)
	if !pollerRunning() {
		t.Fatal("no poller goroutine with parked connections")
	}
	done := make(chan struct{})
	go func() { _ = p.srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return with parked connections")
	}
	for _, r := range rs {
		r.closedWith(5 * time.Second)
	}
	if pollerRunning() {
		t.Fatal("the poller's goroutine outlived Close")
	}
	if p.srv.poll.parkedConns() != 0 || p.metric("dlm_client_connections", nil) > 0 {
		t.Fatal("connections left after Close")
	}
	// Closing is no failure: the poller's wait ends without a word.
	if s := logs.String(); s != "" {
		t.Errorf("Close logged:\n%s", s)
	}
}

func pollerRunning() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "clientport.(*poller).run")
}

// TestIdleConnectionsGoroutines: 1,000 idle client connections cost the
// agent no goroutine each: a few in all.
func TestIdleConnectionsGoroutines(t *testing.T) {
	const conns = 1000
	p := parkPort(t, nil)
	p.hello("") // the poller's goroutine is running
	p.waitParked(t, 1)
	before := runtime.NumGoroutine()
	rs := make([]*raw, 0, conns)
	for range conns {
		rs = append(rs, p.hello(""))
	}
	p.waitParked(t, conns+1)
	if got := runtime.NumGoroutine() - before; got > 5 {
		t.Fatalf("%d idle connections added %d goroutines, want at most 5", conns, got)
	}
	// and every one of them still answers
	for _, r := range rs[:50] {
		if _, ok := r.reply(r.send(&wire.ClientKeepAlive{})).(*wire.ClientAlive); !ok {
			t.Fatal("an idle connection does not answer")
		}
	}
}

// TestParkOff: with ParkAfter 0 nothing parks, and connections are served
// as ever.
func TestParkOff(t *testing.T) {
	p := startPort(t, 1, func(c *Config) { c.ParkAfter = 0 })
	r := p.hello("")
	if p.srv.poll != nil {
		t.Fatal("a poller with ParkAfter 0")
	}
	if _, ok := r.reply(r.send(&wire.ClientKeepAlive{})).(*wire.ClientAlive); !ok {
		t.Fatal("no answer")
	}
}

// TestParkedSessionKeepsLittle: a protocol 2 session that sent sixty
// answers before its client acknowledged them keeps room for them after
// the acknowledgement (a busy client reuses it); once its connection
// parks, it gives that room back.
func TestParkedSessionKeepsLittle(t *testing.T) {
	p := parkPort(t, nil)
	r, w := p.hello2()
	var last uint64
	for k := range 60 {
		last = r.send(&wire.ClientKeepAlive{})
		if _, ok := r.reply(last).(*wire.ClientAlive); !ok {
			t.Fatalf("keep-alive %d: no answer", k)
		}
	}
	room := func() (n, c int) {
		ss := p.session(t, w.Session)
		ss.mu.Lock()
		defer ss.mu.Unlock()
		return len(ss.kept), cap(ss.kept)
	}
	if n, c := room(); n < 60 || c < 60 {
		t.Fatalf("before the ack: %d notes in room for %d, want 60 or more", n, c)
	}
	if _, ok := r.reply(r.send(&wire.ClientAck{Read: last})).(*wire.ClientOK); !ok {
		t.Fatal("ack: no OK")
	}
	p.waitParked(t, 1)
	if n, c := room(); n > 1 || c > 1 {
		t.Fatalf("parked: %d notes in room for %d, want the ack's answer alone", n, c)
	}
}

// session returns the port's session id.
func (p *port) session(t *testing.T, id uint64) *session {
	t.Helper()
	p.srv.mu.Lock()
	defer p.srv.mu.Unlock()
	ss := p.srv.sessions[id]
	if ss == nil {
		t.Fatalf("no session %d", id)
	}
	return ss
}
