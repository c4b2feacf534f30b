package transport

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// inConn is one connection to a peer after its handshake, dialled or
// accepted, and the goroutine reading it. Both directions of a pair's
// traffic travel on one connection (see the package doc): the peer whose
// link it is writes on it, and whoever holds its reading role reads it.
type inConn struct {
	conn net.Conn
	seq  uint64 // order of acceptance; 0 for a dialled connection
	// from, hello and r are set once the handshake is done, under Links.mu.
	from  string
	hello *wire.Hello
	r     *inReader
	// ended receives the reading's end (1-buffered): the peer writing on
	// the connection learns from it that the link is gone.
	ended chan error
	// settled is closed once the peer the connection was offered to has
	// made it its link, or will not (see serveInbound).
	settled    chan struct{}
	settleOnce sync.Once
	// readDone is closed when nothing more of the connection will be
	// handled: a newer connection from the same peer resumes from there.
	readDone chan struct{}

	// mu orders a heartbeat answer written by the reader against the peer
	// taking the connection over: only an unattached connection is
	// answered, and from then on the peer's writer is the only one writing.
	// It also orders the start of the reading against a newer connection
	// from the same peer dropping this one (see resumeIn): reading says
	// frames of it may have been handled, dropped that none will be.
	mu       sync.Mutex
	attached bool
	reading  bool
	dropped  chan struct{}
}

func newInConn(c net.Conn) *inConn {
	return &inConn{conn: c, ended: make(chan error, 1), settled: make(chan struct{}), readDone: make(chan struct{}),
		dropped: make(chan struct{})}
}

// errDropped ends a connection that a newer one from the same peer
// replaced before any of its frames was read.
var errDropped = errors.New("transport: a newer connection from the peer replaced it before it was read")

// startReading reports whether the connection may be read: not dropped.
// From then on a newer connection waits for its reading to end.
func (ic *inConn) startReading() bool {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	select {
	case <-ic.dropped:
		return false
	default:
	}
	ic.reading = true
	return true
}

// drop makes a connection whose reading has not started end without
// reading, and reports whether it did; one being read is left to end.
func (ic *inConn) drop() bool {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.reading {
		return false
	}
	select {
	case <-ic.dropped:
	default:
		close(ic.dropped)
	}
	return true
}

func (ic *inConn) isDropped() bool {
	select {
	case <-ic.dropped:
		return true
	default:
		return false
	}
}

func (ic *inConn) settle() { ic.settleOnce.Do(func() { close(ic.settled) }) }

// attach hands the writing of the connection to a peer.
func (ic *inConn) attach() {
	ic.mu.Lock()
	ic.attached = true
	ic.mu.Unlock()
}

// serveInbound runs the reader goroutine of an accepted connection:
// handshake, offer the connection to its peer if this node is the one that
// waits to be dialled, then decode every frame and dispatch it, until the
// connection ends or sends bad input. Bad input closes this connection only.
func (l *Links) serveInbound(ic *inConn) {
	defer l.wg.Done()
	defer l.forgetInbound(ic)
	defer close(ic.readDone)
	remote := ic.conn.RemoteAddr().String()
	fr := newFrameReader(ic.conn, 0, &l.cfg.Limits) // the handshake sets its deadlines
	var recv *recvCounter
	hello, err := l.handshakeIn(ic.conn, fr, func(h *wire.Hello) *wire.Hello {
		recv = l.resumeIn(ic, h)
		return l.helloFor(h.Node, l.sessionFor(h))
	})
	if err != nil {
		reason := handshakeReason(err)
		l.met.handshakeRejected.WithLabelValues(reason).Inc()
		l.log.Warn("refused connection", "remote", remote, "reason", reason, "err", err)
		return
	}
	r := newInReader(l, ic, fr, hello, lendsReading(ic.conn))
	r.recv = recv
	l.mu.Lock()
	ic.from, ic.hello, ic.r = hello.Node, hello, r
	p := l.peers[hello.Node]
	l.mu.Unlock()
	l.met.connsIn.Inc()
	defer l.met.connsIn.Dec()
	if p != nil && p.accepts {
		// Replies to what arrives here go out on the peer's link: reading
		// starts once this connection is it, or the peer settled otherwise.
		p.offer(ic)
		select {
		case <-ic.settled:
		case <-p.ctx.Done():
		case <-ic.dropped:
		}
	}
	if !ic.startReading() {
		ic.ended <- errDropped
		return
	}
	err = l.read(r, remote)
	ic.ended <- err
}

// resumeIn readies the acceptor's side of a new connection from the
// dialler's Hello h: older connections from the same node are closed and
// their reading has ended (so that the count of what was handled is
// final), and it returns the counter of the dialler's session. An older
// connection whose reading has not started (offered to its peer, which has
// not taken it yet) has handled nothing: it is dropped, not waited for.
// Waiting for it would chain the handshakes: each new one waiting out the
// previous one's, which the dialler has given up on, until it gives up on
// the new one too (a restarted member that could not join for a minute).
func (l *Links) resumeIn(ic *inConn, h *wire.Hello) *recvCounter {
	l.mu.Lock()
	var old []*inConn
	for c := range l.inbound {
		if c != ic && c.from == h.Node {
			old = append(old, c)
		}
	}
	l.mu.Unlock()
	wait := time.NewTimer(l.cfg.HandshakeTimeout)
	defer wait.Stop()
	for _, c := range old {
		_ = c.conn.Close()
		if c.drop() {
			continue
		}
		select {
		case <-c.readDone:
		case <-wait.C:
			l.log.Warn("an older connection from the peer is still being read", "peer", h.Node)
		}
	}
	return l.countFrom(h)
}

// countFrom returns the counter of the frames handled of the send session
// a peer's Hello h announces, and tells the application if it replaced an
// unfinished session of the same boot.
func (l *Links) countFrom(h *wire.Hello) *recvCounter {
	c, lost := l.recvFor(h.Node, h.BootID, h.Session)
	if lost {
		l.log.Warn("link session lost: the peer started a new one; frames from it may be lost", "peer", h.Node)
		l.sessionLost(h.Node, fmt.Errorf("%w: %s started a new session", errSessionLost, h.Node))
	}
	return c
}

// sessionFor is the send session this node announces to the dialler of h:
// the one of its peer for that node, once it can be resumed on this
// connection (a new one if not), or the first it will have if the peer is
// not set yet.
func (l *Links) sessionFor(h *wire.Hello) uint64 {
	l.mu.RLock()
	p := l.peers[h.Node]
	l.mu.RUnlock()
	if p == nil || !p.accepts {
		return firstSession(l.cfg.BootID, h.Node)
	}
	p.mu.Lock()
	ok := p.resumableLocked(h)
	p.mu.Unlock()
	if !ok {
		p.endSession(fmt.Errorf("the peer (boot %x) did not resume this node's session", h.BootID))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !ok {
		p.renewing = time.Now()
	}
	return p.session
}

// read runs the reading of a connection until it ends, and logs why. Bad
// input also ends the count of the session it came in: the frame must not
// come again (see forgetRecv).
func (l *Links) read(r *inReader, remote string) error {
	err := r.watch()
	if reason := rejectReason(err); reason != "" {
		if r.recv != nil {
			l.forgetRecv(r.hello.Node, r.recv)
		}
		l.met.reject(reason)
		l.log.Warn("closed connection on bad input", "peer", r.hello.Node, "remote", remote, "reason", reason, "err", err)
	} else {
		l.log.Debug("connection ended", "peer", r.hello.Node, "err", err)
	}
	return err
}

// lendsReading says whether waiting goroutines may read c (reader.go):
// plain TCP only.
func lendsReading(c net.Conn) bool {
	_, ok := c.(*net.TCPConn)
	return ok
}

func (l *Links) forgetInbound(ic *inConn) {
	_ = ic.conn.Close()
	l.mu.Lock()
	delete(l.inbound, ic)
	l.mu.Unlock()
}

// errProtocol marks frames that decode but break the links' own rules.
type errProtocol struct{ reason, msg string }

func (e *errProtocol) Error() string { return "transport: " + e.msg }

// rejectReason returns the frames_rejected reason for err, or "" when err is
// not bad input (the peer closed, went idle, or this node closed).
func rejectReason(err error) string {
	if pe, ok := errors.AsType[*errProtocol](err); ok {
		return pe.reason
	}
	if r := wire.Reason(err); r != "other" {
		return r
	}
	return ""
}

// dispatch handles a decoded request or one-way message.
func (l *Links) dispatch(ic *inConn, hello *wire.Hello, owner *peer, h wire.Header, m wire.Message) error {
	switch {
	case h.Type == wire.TypeHello:
		return &errProtocol{"unexpected_hello", "second Hello on a connection"}
	case h.Type == wire.TypePing:
		if h.ID != 0 {
			return &errProtocol{"malformed", "Ping with a request id"}
		}
		if ping := m.(*wire.Ping); owner != nil && (ping.Received > 0 || ping.Closing) {
			owner.onAck(ping)
		}
		return l.pong(ic)
	}
	in := Inbound{From: hello.Node, BootID: hello.BootID, Msg: m}
	if h.ID != 0 {
		in.ReplyTo = ReplyTo{Peer: hello.Node, BootID: hello.BootID, ID: h.ID, p: owner}
	}
	l.cfg.Handler(in)
	return nil
}

// pong answers a heartbeat on a connection no peer of this node writes on
// (one dialled by a node this node was not told about yet, or not as its
// link), so that the dialler does not take it for dead. On a peer's link
// the heartbeats of both ends keep it alive and nothing is answered.
func (l *Links) pong(ic *inConn) error {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.attached {
		return nil
	}
	if err := ic.conn.SetWriteDeadline(time.Now().Add(l.cfg.WriteTimeout)); err != nil {
		return err
	}
	_, err := ic.conn.Write(l.pingFrame)
	return err
}

// deliverReply decodes a reply and completes the pending call it answers: a
// Call gets a message of its own (DecodeOwned), a CallInto its reply
// decoded into the message it gave (DecodeInto; one of another type fails
// it with ErrWrongReply), a Go callback the decoder's, valid during the
// callback. A reply nobody waits for (the call
// failed or timed out) is still decoded, as bad input must end the
// connection, and dropped. p is the peer whose link the connection is, nil
// if not known yet (then it is looked up by from).
func (l *Links) deliverReply(p *peer, from string, dec *wire.Decoder, payload []byte, h wire.Header) error {
	var pc pendingCall
	ok := false
	if p == nil {
		p, _ = l.peer(from)
	}
	if p != nil {
		pc, ok = p.take(h.ID)
	}
	var m wire.Message
	var err error
	switch {
	case ok && pc.into != nil && pc.into.Type() == h.Type:
		m = pc.into
		_, err = dec.DecodeInto(payload, m)
	case ok && pc.cb == nil && pc.into == nil:
		_, m, err = dec.DecodeOwned(payload) // the blocked caller keeps it
	default: // a callback's (valid during the call), nobody's, or of the wrong type
		_, m, err = dec.Decode(payload)
	}
	switch {
	case !ok:
	case err != nil:
		pc.finish(nil, fmt.Errorf("%w: %s: bad reply: %v", ErrConnLost, from, err))
	case pc.into != nil && m != pc.into:
		pc.finish(nil, fmt.Errorf("%w: %s: a %v, not a %v", ErrWrongReply, from, h.Type, pc.into.Type()))
	default:
		pc.finish(m, nil)
	}
	return err
}
