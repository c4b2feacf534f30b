package clientport

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// hello2 opens a protocol 2 session (request id 1) on a new connection.
func (p *port) hello2() (*raw, *wire.ClientWelcome) {
	p.t.Helper()
	r := p.dialRaw()
	id := r.send(&wire.ClientHello{Name: "test", Version: wire.ClientProtocol})
	w, ok := r.reply(id).(*wire.ClientWelcome)
	if !ok {
		p.t.Fatal("no welcome")
	}
	return r, w
}

// resume2 resumes session w on a new connection with hello id id.
func (p *port) resume2(w *wire.ClientWelcome, id, read, pushes uint64, waiting ...uint64) (*raw, *wire.ClientWelcome) {
	p.t.Helper()
	r := p.dialRaw()
	r.next = id
	r.sendID(id, &wire.ClientHello{Name: "test", Session: w.Session, Key: w.Key, Version: wire.ClientProtocol, Read: read, Pushes: pushes, Waiting: waiting})
	h, m, err := r.read(10 * time.Second)
	w2, ok := m.(*wire.ClientWelcome)
	if err != nil || !ok || h.ID != id || !w2.Resumed {
		p.t.Fatalf("resume: %v %+v %v", h, m, err)
	}
	return r, w2
}

// keptOf returns what the session keeps to give again.
func (p *port) keptOf(session uint64) []kept {
	ss := p.srv.session(session)
	if ss == nil {
		p.t.Fatalf("no session %x", session)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return append([]kept(nil), ss.kept...)
}

// A resuming client names the requests it still waits for: the agent
// answers each again from the session's state (a grant rebuilt from its
// lock, a refusal with its code), the one it has no answer of with
// CodeUnknownRequest (counted), and says nothing of one it never read
// (above last_request: the client sends it again). Once acknowledged, what
// it kept is forgotten.
func TestResumeAnswersWhatTheClientWaitsFor(t *testing.T) {
	p := startPort(t, 1, nil)
	other := p.hello("")
	other.send(&wire.ClientLock{Lockspace: "ls", Resource: "held", Mode: modes.EX})
	other.reply(1 + 1)

	r, w := p.hello2()
	r.sendID(2, &wire.ClientLock{Lockspace: "ls", Resource: "mine", Mode: modes.PW})
	g, ok := r.reply(2).(*wire.ClientGrant)
	if !ok {
		t.Fatal("no grant")
	}
	// Answered, and never read: the connection dies with them.
	r.sendID(4, &wire.ClientValue{Lock: g.Lock})
	r.sendID(6, &wire.ClientLock{Lockspace: "ls", Resource: "held", Mode: modes.EX, Flags: wire.ClientTry})
	r.sendID(8, &wire.ClientUnlock{Lock: 12345})
	r.sendID(10, &wire.ClientLock{Lockspace: "ls", Resource: "mine2", Mode: modes.EX})
	waitFor(t, 5*time.Second, "the answers to be sent", func() bool { return len(p.keptOf(w.Session)) >= 6 })
	_ = r.nc.Close()

	r2, w2 := p.resume2(w, 20, 2, 0, 3, 4, 6, 8, 10, 15)
	if w2.LastRequest != 10 {
		t.Fatalf("last request %d, want 10", w2.LastRequest)
	}
	got := map[uint64]wire.Message{}
	for len(got) < 5 {
		h, m, err := r2.read(5 * time.Second)
		if err != nil {
			t.Fatalf("after %d answers: %v", len(got), err)
		}
		if !h.Reply {
			continue
		}
		if _, dup := got[h.ID]; dup {
			t.Fatalf("request %d answered twice", h.ID)
		}
		got[h.ID] = m
	}
	if v, ok := got[4].(*wire.ClientGrant); !ok || v.Lock != g.Lock || v.Token != g.Token || v.Mode != modes.PW {
		t.Errorf("value read: %+v, want the lock's state %+v", got[4], g)
	}
	if c := codeOfReply(t, got[6]); c != wire.CodeNotQueued {
		t.Errorf("refused try: %+v, want code %d", got[6], wire.CodeNotQueued)
	}
	if c := codeOfReply(t, got[8]); c != wire.CodeNotHeld {
		t.Errorf("unlock of no lock: %+v, want code %d", got[8], wire.CodeNotHeld)
	}
	if lg, ok := got[10].(*wire.ClientGrant); !ok || lg.Lock == 0 || lg.Mode != modes.EX {
		t.Errorf("lock: %+v, want its grant", got[10])
	}
	if c := codeOfReply(t, got[3]); c != wire.CodeUnknownRequest {
		t.Errorf("a request never sent: %+v, want code %d", got[3], wire.CodeUnknownRequest)
	}
	if n := p.metric("dlm_client_refused_total", map[string]string{"reason": refusedUnknownRequest}); n != 1 {
		t.Errorf("refused{unknown_request} = %v, want 1", n)
	}
	// 15 was never read: no answer, before the keep-alive's or after.
	id := r2.send(&wire.ClientKeepAlive{})
	for {
		h, m, err := r2.read(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if h.ID == 15 {
			t.Fatalf("request 15, never read, answered with %+v", m)
		}
		if h.ID == id {
			break
		}
	}
	ack := r2.send(&wire.ClientAck{Read: id})
	if _, ok := r2.reply(ack).(*wire.ClientOK); !ok {
		t.Fatal("ack not answered with OK")
	}
	if k := p.keptOf(w.Session); len(k) != 1 || k[0].id != ack {
		t.Fatalf("kept after the ack: %+v, want only the ack's answer", k)
	}
}

// Pushes the agent sent after the reply the client last read (a lock's
// loss here) are given again after a resume, and those before it are not.
func TestResumeGivesLostPushesAgain(t *testing.T) {
	p := startPort(t, 1, nil)
	r, w := p.hello2()
	r.sendID(2, &wire.ClientLock{Lockspace: "ls", Resource: "ttl", Mode: modes.EX, TTL: int64(100 * time.Millisecond)})
	g, ok := r.reply(2).(*wire.ClientGrant)
	if !ok {
		t.Fatal("no grant")
	}
	waitFor(t, 10*time.Second, "the lock's loss to be pushed", func() bool {
		for _, k := range p.keptOf(w.Session) {
			if k.kind == keptLost && k.lock == g.Lock {
				return true
			}
		}
		return false
	})
	_ = r.nc.Close() // its ClientLost unread

	r2, _ := p.resume2(w, 3, 2, 0)
	h, m, err := r2.read(5 * time.Second)
	if l, ok := m.(*wire.ClientLost); err != nil || !ok || h.ID != 0 || l.Lock != g.Lock || l.Code != wire.CodeLockLost {
		t.Fatalf("after the welcome: %+v %+v %v, want the ClientLost of lock %d", h, m, err, g.Lock)
	}
	_ = r2.nc.Close()
	// This time the client read the push after the Welcome of hello 3, and
	// says so: the push is not given again.
	r3, _ := p.resume2(w, 4, 3, 1)
	id := r3.send(&wire.ClientKeepAlive{})
	if h, m, err := r3.read(5 * time.Second); err != nil || h.ID != id {
		t.Fatalf("after the welcome: %+v %+v %v, want the keep-alive's answer and no push again", h, m, err)
	}
}

// helloFrame frames a ClientHello body by hand (one AppendFrame would
// refuse).
func helloFrame(id uint64, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(wire.HeaderSize+len(body)))
	b = append(b, wire.Version, byte(wire.TypeClientHello))
	b = binary.BigEndian.AppendUint64(b, id)
	return append(b, body...)
}

// A resume that names a request twice, out of order, or more than
// wire.MaxResumeWaiting of them is refused as a protocol error and
// counted; so is a resume in another protocol than the session's.
func TestResumeBadWaitingLists(t *testing.T) {
	p := startPort(t, 1, nil)
	_, w := p.hello2()
	head := func(n int) []byte {
		b := []byte{0x98, 0xa0, 0xa0, 0, 0xcf}
		b = binary.BigEndian.AppendUint64(b, w.Session)
		b = append(b, 0xcf)
		b = binary.BigEndian.AppendUint64(b, w.Key)
		b = append(b, wire.ClientProtocol, 1, 0xdc)
		return binary.BigEndian.AppendUint16(b, uint16(n))
	}
	many := head(wire.MaxResumeWaiting + 1)
	for i := range wire.MaxResumeWaiting + 1 {
		many = append(many, 0xcd, byte((i+1)>>8), byte(i+1))
	}
	for name, body := range map[string][]byte{
		"duplicate":    append(head(3), 2, 5, 5),
		"out of order": append(head(2), 5, 2),
		"too many":     many,
	} {
		before := p.metric("dlm_client_frames_rejected_total", map[string]string{"reason": "invalid"})
		r := p.dialRaw()
		if _, err := r.nc.Write(helloFrame(50, body)); err != nil {
			t.Fatal(err)
		}
		if e := r.closedWith(5 * time.Second); e == nil || e.Code != wire.CodeProtocol {
			t.Errorf("%s: closed with %+v, want a protocol error", name, e)
		} else {
			t.Logf("%s: %s", name, e.Text)
		}
		if got := p.metric("dlm_client_frames_rejected_total", map[string]string{"reason": "invalid"}); got != before+1 {
			t.Errorf("%s: frames_rejected{invalid} %v, want %v", name, got, before+1)
		}
	}
	// A protocol 1 session resumed in protocol 2.
	r1 := p.dialRaw()
	old, ok := r1.reply(r1.send(&wire.ClientHello{Name: "v1"})).(*wire.ClientWelcome)
	if !ok {
		t.Fatal("no welcome")
	}
	_ = r1.nc.Close()
	r := p.dialRaw()
	r.sendID(60, &wire.ClientHello{Session: old.Session, Key: old.Key, Version: wire.ClientProtocol, Read: 2})
	if e := r.closedWith(5 * time.Second); e == nil || e.Code != wire.CodeProtocol {
		t.Errorf("protocol 1 session resumed in protocol 2: closed with %+v, want a protocol error", e)
	}
}

// A protocol 2 client that never acknowledges what it reads has its
// session ended once the agent keeps MaxOutbox for it (counted); one that
// acknowledges keeps its session however much it reads.
func TestUnacknowledgedSessionEnds(t *testing.T) {
	p := startPort(t, 1, func(c *Config) { c.MaxFrame, c.MaxOutbox = 1024, 4096 })
	for _, acks := range []bool{true, false} {
		r, _ := p.hello2()
		g, ok := r.reply(r.send(&wire.ClientLock{Lockspace: "ls", Resource: "acks-" + map[bool]string{true: "y", false: "n"}[acks], Mode: modes.EX})).(*wire.ClientGrant)
		if !ok {
			t.Fatal("no grant")
		}
		ended := false
	requests:
		for i := range 300 {
			id := r.send(&wire.ClientValue{Lock: g.Lock})
			for {
				h, m, err := r.read(5 * time.Second)
				if err != nil {
					t.Fatal(err)
				}
				if e, ok := m.(*wire.ClientError); ok && h.ID == 0 {
					if e.Code != wire.CodeSessionEnded {
						t.Fatalf("closed with %+v", e)
					}
					ended = true
					break requests
				}
				if h.ID == id {
					break
				}
			}
			if acks && i%10 == 9 {
				r.reply(r.send(&wire.ClientAck{Read: id}))
			}
		}
		if ended == acks {
			t.Fatalf("acknowledging %v: session ended %v", acks, ended)
		}
	}
	if n := p.metric("dlm_client_refused_total", map[string]string{"reason": refusedUnacknowledged}); n != 1 {
		t.Errorf("refused{unacknowledged} = %v, want 1", n)
	}
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A protocol 2 session that loses many more locks at once than its notes
// may hold (MaxOutbox) sends their ClientLost pushes only while its notes
// take less than half of MaxOutbox, queues the rest, and sends them as
// the client acknowledges what it read: every loss is told once, and the
// session does not end.
func TestLostPushesWaitForAcknowledgements(t *testing.T) {
	// About 130 B of notes each: 5 × MaxOutbox. Taken well within their
	// TTL, so that they are lost together, while the client reads nothing.
	const locks = 300
	p := startPort(t, 1, func(c *Config) { c.MaxFrame, c.MaxOutbox = 1024, 8192 })
	r, w := p.hello2()
	lost := map[uint64]int{}
	granted := map[uint64]bool{}
	// next reads one frame, counting the pushes, and returns it.
	next := func() (wire.Header, wire.Message) {
		t.Helper()
		h, m, err := r.read(10 * time.Second)
		if err != nil {
			t.Fatalf("%d of %d losses told: %v", len(lost), locks, err)
		}
		switch m := m.(type) {
		case *wire.ClientLost:
			lost[m.Lock]++
		case *wire.ClientError:
			if h.ID == 0 {
				t.Fatalf("the agent ended the connection: %+v", m)
			}
		}
		return h, m
	}
	// await reads until the reply to id.
	await := func(id uint64) wire.Message {
		t.Helper()
		for {
			if h, m := next(); h.Reply && h.ID == id {
				return m
			}
		}
	}
	read := uint64(1) // the Welcome
	for i := range locks {
		id := r.send(&wire.ClientLock{Lockspace: "ls", Resource: fmt.Sprintf("r%d", i), Mode: modes.EX, TTL: int64(2 * time.Second)})
		g, ok := await(id).(*wire.ClientGrant)
		if !ok {
			t.Fatalf("lock %d not granted", i)
		}
		granted[g.Lock], read = true, id
		if i%10 == 9 {
			read = r.send(&wire.ClientAck{Read: read})
			await(read)
		}
	}
	var queued uint64 // a lock whose loss waits to be told
	waitFor(t, 10*time.Second, "every lock's loss to be told or queued", func() bool {
		ss := p.srv.session(w.Session)
		ss.mu.Lock()
		defer ss.mu.Unlock()
		told := map[uint64]bool{}
		for lock := range lost {
			told[lock] = true
		}
		if q := ss.seen().lost; len(q) > 0 {
			queued = q[len(q)-1].lock
		}
		for _, notes := range [][]kept{ss.kept, ss.seen().lost} {
			for _, k := range notes {
				if k.kind == keptLost {
					told[k.lock] = true
				}
			}
		}
		if limit := p.srv.cfg.MaxOutbox/2 + (&kept{}).size() + wire.MaxErr; ss.keptBytes >= limit {
			t.Fatalf("notes of %d B, past half of MaxOutbox %d and a note", ss.keptBytes, p.srv.cfg.MaxOutbox)
		}
		return len(told) == locks
	})
	if queued == 0 {
		t.Fatal("no loss waited to be told")
	}
	// A request naming a lock whose loss is still queued is refused as
	// for a lost lock.
	id := r.send(&wire.ClientValue{Lock: queued})
	if e, ok := await(id).(*wire.ClientError); !ok || e.Code != wire.CodeLockLost {
		t.Fatalf("ClientValue of lock %d, lost and not yet told: %+v, want ClientError %d", queued, e, wire.CodeLockLost)
	}
	read = id
	for len(lost) < locks {
		id := r.send(&wire.ClientAck{Read: read})
		await(id)
		read = id
	}
	for lock, n := range lost {
		if !granted[lock] || n != 1 {
			t.Fatalf("lock %d: told lost %d times (granted %v)", lock, n, granted[lock])
		}
	}
	if n := p.metric("dlm_client_refused_total", map[string]string{"reason": refusedUnacknowledged}); n != 0 {
		t.Errorf("refused{unacknowledged} = %v, want 0", n)
	}
}
