package clientport

import (
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// TestToken: a ClientHello without the agent's token is refused, counted,
// and its connection closed; with it the session opens.
func TestToken(t *testing.T) {
	p := startPort(t, 1, func(c *Config) { c.Token = "s3cret" })
	r := p.dialRaw()
	r.send(&wire.ClientHello{Token: "guess"})
	if e := r.closedWith(5 * time.Second); e == nil || e.Code != wire.CodeUnauthorized {
		t.Fatalf("wrong token: %+v", e)
	}
	if got := p.metric("dlm_client_refused_total", map[string]string{"reason": "unauthorized"}); got != 1 {
		t.Fatalf("refused{unauthorized} = %v", got)
	}
	ok := p.hello("s3cret")
	id := ok.send(&wire.ClientLock{Lockspace: "ls", Resource: "r", Mode: modes.EX})
	if _, isGrant := ok.reply(id).(*wire.ClientGrant); !isGrant {
		t.Fatal("no grant with the right token")
	}
}

// TestProtocolViolations: frames that break the protocol end their
// connection with a ClientError saying why, and are counted.
func TestProtocolViolations(t *testing.T) {
	p := startPort(t, 1, nil)
	for name, f := range map[string]func(r *raw){
		"request before hello": func(r *raw) { r.send(&wire.ClientLock{Lockspace: "ls", Resource: "r", Mode: modes.EX}) },
		"links' message":       func(r *raw) { r.send(&wire.Ping{}) },
		"one-way hello":        func(r *raw) { r.sendID(0, &wire.ClientHello{}) },
		"garbage":              func(r *raw) { _, _ = r.nc.Write([]byte{0, 0, 0, 12, 1, 64, 0, 0, 0, 0, 0, 0, 0, 1, 0xc1, 0xc1}) },
		"agent's message":      func(r *raw) { r.send(&wire.ClientGrant{Lock: 1}) },
		"id not increasing":    func(r *raw) { r.sendHelloThen(&wire.ClientKeepAlive{}, 1) },
		"wrong version":        func(r *raw) { _, _ = r.nc.Write([]byte{0, 0, 0, 11, 9, 64, 0, 0, 0, 0, 0, 0, 0, 1, 0x90}) },
		"declared length bomb": func(r *raw) {
			_, _ = r.nc.Write([]byte{0, 0, 0, 15, 1, 64, 0, 0, 0, 0, 0, 0, 0, 1, 0xdd, 0x01, 0x31, 0x2d, 0x00})
		},
		"mode out of range":     func(r *raw) { r.sendHelloThen(nil, 0); r.sendBad(r.next + 1) },
		"hello twice":           func(r *raw) { r.sendHelloThen(&wire.ClientHello{}, 0) },
		"trailing bytes in one": func(r *raw) { _, _ = r.nc.Write([]byte{0, 0, 0, 12, 1, 66, 0, 0, 0, 0, 0, 0, 0, 1, 0x91, 0x00, 0x00}) },
	} {
		t.Run(name, func(t *testing.T) {
			before := p.metric("dlm_client_refused_total", map[string]string{"reason": "protocol"})
			r := p.dialRaw()
			r.t = t
			f(r)
			e := r.closedWith(5 * time.Second)
			if e == nil || e.Code != wire.CodeProtocol {
				t.Fatalf("closed with %+v, want a protocol error", e)
			}
			if got := p.metric("dlm_client_refused_total", map[string]string{"reason": "protocol"}); got != before+1 {
				t.Fatalf("refused{protocol} %v → %v", before, got)
			}
		})
	}
	// and the agent still serves
	r := p.hello("")
	if _, ok := r.reply(r.send(&wire.ClientLock{Lockspace: "ls", Resource: "after", Mode: modes.PR})).(*wire.ClientGrant); !ok {
		t.Fatal("no grant after the bad connections")
	}
}

// sendHelloThen opens a session, then sends m with id (0: the next).
func (r *raw) sendHelloThen(m wire.Message, id uint64) {
	r.t.Helper()
	if _, ok := r.reply(r.send(&wire.ClientHello{})).(*wire.ClientWelcome); !ok {
		r.t.Fatal("no welcome")
	}
	switch {
	case m == nil:
	case id == 0:
		r.send(m)
	default:
		r.sendID(id, m)
	}
}

// sendBad sends a ClientLock with mode 9, encoded by hand: the encoder
// refuses to write one.
func (r *raw) sendBad(id uint64) {
	body := []byte{0x97, 0xa2, 'l', 's', 0xa1, 'r', 9, 0, 0, 0, 0}
	frame := binary.BigEndian.AppendUint32(nil, uint32(wire.HeaderSize+len(body)))
	frame = append(frame, wire.Version, byte(wire.TypeClientLock))
	frame = binary.BigEndian.AppendUint64(frame, id)
	_, _ = r.nc.Write(append(frame, body...))
}

// TestHugeFrame: a frame declaring more than MaxFrame is refused before it
// is read, counted, and its connection closed; the other clients go on.
func TestHugeFrame(t *testing.T) {
	p := startPort(t, 1, nil)
	other := p.hello("")
	r := p.hello("")
	_, _ = r.nc.Write([]byte{0x40, 0, 0, 0}) // 1 GiB
	if e := r.closedWith(5 * time.Second); e == nil || e.Code != wire.CodeProtocol {
		t.Fatalf("huge frame: closed with %+v", e)
	}
	if got := p.metric("dlm_client_refused_total", map[string]string{"reason": "frame"}); got != 1 {
		t.Fatalf("refused{frame} = %v", got)
	}
	if got := p.metric("dlm_client_frames_rejected_total", map[string]string{"reason": "too_large"}); got != 1 {
		t.Fatalf("frames_rejected{too_large} = %v", got)
	}
	if _, ok := other.reply(other.send(&wire.ClientKeepAlive{})).(*wire.ClientAlive); !ok {
		t.Fatal("the other client is not served")
	}
}

// TestSlowloris: connections that never send their ClientHello, or send it
// a byte at a time, are cut off after HelloTimeout and counted; clients
// and peers are served meanwhile.
func TestSlowloris(t *testing.T) {
	p := startPort(t, 3, func(c *Config) { c.HelloTimeout = 300 * time.Millisecond })
	var slow []*raw
	for i := range 20 {
		r := p.dialRaw()
		if i%2 == 1 {
			_, _ = r.nc.Write([]byte{0, 0}) // half a length prefix, then nothing
		}
		slow = append(slow, r)
	}
	good := p.hello("")
	peerLs, err := p.nodes[1].Lockspace("ls")
	if err != nil {
		t.Fatal(err)
	}
	for k := range 5 {
		id := good.send(&wire.ClientLock{Lockspace: "ls", Resource: fmt.Sprint("good-", k), Mode: modes.EX})
		if _, ok := good.reply(id).(*wire.ClientGrant); !ok {
			t.Fatal("a good client is not served")
		}
		lk, err := peerLs.Lock(t.Context(), fmt.Sprint("peer-", k), modes.EX)
		if err != nil {
			t.Fatalf("a peer is not served: %v", err)
		}
		_ = lk.Unlock()
	}
	for _, r := range slow {
		r.closedWith(5 * time.Second)
	}
	if got := p.metric("dlm_client_refused_total", map[string]string{"reason": "handshake"}); got != 20 {
		t.Fatalf("refused{handshake} = %v, want 20", got)
	}
}

// TestConnectionFlood: past MaxConnections a connection is told why and
// closed, and counted; those within go on, and a slot freed is taken.
func TestConnectionFlood(t *testing.T) {
	p := startPort(t, 1, func(c *Config) { c.MaxConnections = 5 })
	var in []*raw
	for range 5 {
		in = append(in, p.hello(""))
	}
	for range 20 {
		r := p.dialRaw()
		if e := r.closedWith(5 * time.Second); e == nil || e.Code != wire.CodeLimit {
			t.Fatalf("connection over the limit closed with %+v", e)
		}
	}
	if got := p.metric("dlm_client_refused_total", map[string]string{"reason": "connections"}); got != 20 {
		t.Fatalf("refused{connections} = %v, want 20", got)
	}
	for _, r := range in {
		if _, ok := r.reply(r.send(&wire.ClientKeepAlive{})).(*wire.ClientAlive); !ok {
			t.Fatal("a connection within the limit is not served")
		}
	}
	_ = in[0].nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for p.metric("dlm_client_connections", nil) > 4 {
		if time.Now().After(deadline) {
			t.Fatal("the closed connection's slot was not freed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.hello("")
}

// TestSessionLimits: past MaxLocks and MaxPending a request is refused
// with CodeLimit, counted, and the session carries on.
func TestSessionLimits(t *testing.T) {
	p := startPort(t, 1, func(c *Config) { c.MaxLocks, c.MaxPending = 3, 2 })
	r := p.hello("")
	for k := range 3 {
		if _, ok := r.reply(r.send(&wire.ClientLock{Lockspace: "ls", Resource: fmt.Sprint("r", k), Mode: modes.EX})).(*wire.ClientGrant); !ok {
			t.Fatalf("lock %d refused", k)
		}
	}
	if c := codeOfReply(t, r.reply(r.send(&wire.ClientLock{Lockspace: "ls", Resource: "r3", Mode: modes.EX}))); c != wire.CodeLimit {
		t.Fatalf("lock over MaxLocks: code %d", c)
	}
	if got := p.metric("dlm_client_refused_total", map[string]string{"reason": "locks"}); got != 1 {
		t.Fatalf("refused{locks} = %v", got)
	}
	q := p.hello("")
	// r holds r0..r2: q's requests for them wait.
	q.send(&wire.ClientLock{Lockspace: "ls", Resource: "r0", Mode: modes.EX})
	q.send(&wire.ClientLock{Lockspace: "ls", Resource: "r1", Mode: modes.EX})
	if c := codeOfReply(t, q.reply(q.send(&wire.ClientLock{Lockspace: "ls", Resource: "r2", Mode: modes.EX}))); c != wire.CodeLimit {
		t.Fatalf("request over MaxPending: code %d", c)
	}
	if got := p.metric("dlm_client_refused_total", map[string]string{"reason": "pending"}); got != 1 {
		t.Fatalf("refused{pending} = %v", got)
	}
	if _, ok := q.reply(q.send(&wire.ClientKeepAlive{})).(*wire.ClientError); !ok {
		// a keep-alive waits too: also over the limit
		t.Fatal("keep-alive over MaxPending was not refused")
	}
}

// TestBadInputAllocation: connections that declare frames up to a gigabyte
// and send a few bytes of them cost the agent about a read buffer each, no
// more than a small multiple of the frame limit, and nothing that grows
// with what they declare.
func TestBadInputAllocation(t *testing.T) {
	const conns = 40
	p := startPort(t, 1, nil)
	frameLimit := DefaultConfig().MaxFrame
	measure := func(declared uint32) uint64 {
		var before, after runtime.MemStats
		var rs []*raw
		for range conns {
			rs = append(rs, p.hello(""))
		}
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, r := range rs {
			b := binary.BigEndian.AppendUint32(nil, declared)
			_, _ = r.nc.Write(append(b, 1, 68, 0, 0, 0, 0, 0, 0, 0, 9, 0x97, 0xa2))
		}
		for _, r := range rs {
			if declared > uint32(frameLimit) {
				r.closedWith(5 * time.Second)
			}
		}
		time.Sleep(100 * time.Millisecond) // let the agent read what was sent
		runtime.ReadMemStats(&after)
		for _, r := range rs {
			_ = r.nc.Close()
		}
		return (after.TotalAlloc - before.TotalAlloc) / conns
	}
	partial := measure(uint32(frameLimit - 4)) // within the limit, mostly never sent
	huge := measure(1 << 30)
	t.Logf("per connection: %d bytes for a partial frame of the limit's size, %d for one declaring 1 GiB (limit %d)", partial, huge, frameLimit)
	if partial > 2*uint64(frameLimit) || huge > 2*uint64(frameLimit) {
		t.Fatalf("bad input allocated %d / %d bytes per connection, over twice the %d-byte frame limit", partial, huge, frameLimit)
	}
	_ = net.ErrClosed
}
