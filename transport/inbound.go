package transport

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// inConn is a connection a peer dialed to this node. Only its reader
// goroutine reads or writes it (the Hello and heartbeat answers); from is
// set once the handshake is done, under Links.mu.
type inConn struct {
	conn net.Conn
	from string
}

// serveInbound runs the reader goroutine of an accepted connection:
// handshake, then decode every frame and dispatch it, until the connection
// ends or sends bad input. Bad input closes this connection only.
func (l *Links) serveInbound(ic *inConn) {
	defer l.wg.Done()
	defer l.forgetInbound(ic)
	remote := ic.conn.RemoteAddr().String()
	fr := newFrameReader(ic.conn, l.cfg.HandshakeTimeout, &l.cfg.Limits)
	hello, err := l.handshakeIn(ic.conn, fr)
	if err != nil {
		reason := handshakeReason(err)
		l.met.handshakeRejected.WithLabelValues(reason).Inc()
		l.log.Warn("refused connection", "remote", remote, "reason", reason, "err", err)
		return
	}
	l.mu.Lock()
	ic.from = hello.Node
	l.mu.Unlock()
	l.met.connsIn.Inc()
	defer l.met.connsIn.Dec()
	r := newInReader(l, ic, fr, hello, lendsReading(ic.conn))
	l.setReader(hello.Node, r)
	defer l.dropReader(hello.Node, r)
	err = r.watch()
	if reason := rejectReason(err); reason != "" {
		l.met.reject(reason)
		l.log.Warn("closed connection on bad input", "peer", hello.Node, "remote", remote, "reason", reason, "err", err)
	} else {
		l.log.Debug("incoming connection ended", "peer", hello.Node, "err", err)
	}
	// replies that were queued behind the failure are lost with it
	if p, _ := l.peer(hello.Node); p != nil {
		p.failPending(fmt.Errorf("%w: %s: incoming connection: %v", ErrConnLost, hello.Node, err))
	}
}

// lendsReading says whether waiting goroutines may read c (reader.go):
// plain TCP only.
func lendsReading(c net.Conn) bool {
	_, ok := c.(*net.TCPConn)
	return ok
}

// setReader makes r the reader of peer's incoming traffic that await uses.
func (l *Links) setReader(peer string, r *inReader) {
	l.mu.Lock()
	m := maps.Clone(*l.readers.Load())
	m[peer] = r
	l.readers.Store(&m)
	l.mu.Unlock()
}

func (l *Links) dropReader(peer string, r *inReader) {
	l.mu.Lock()
	if (*l.readers.Load())[peer] == r {
		m := maps.Clone(*l.readers.Load())
		delete(m, peer)
		l.readers.Store(&m)
	}
	l.mu.Unlock()
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
func (l *Links) dispatch(ic *inConn, hello *wire.Hello, h wire.Header, m wire.Message) error {
	switch {
	case h.Type == wire.TypeHello:
		return &errProtocol{"unexpected_hello", "second Hello on a connection"}
	case h.Type == wire.TypePing:
		if h.ID != 0 {
			return &errProtocol{"malformed", "Ping with a request id"}
		}
		return l.pong(ic.conn)
	}
	in := Inbound{From: hello.Node, BootID: hello.BootID, Msg: m}
	if h.ID != 0 {
		in.ReplyTo = ReplyTo{Peer: hello.Node, BootID: hello.BootID, ID: h.ID}
	}
	l.cfg.Handler(in)
	return nil
}

// pong answers a heartbeat on the incoming connection itself, so that the
// dialer can tell that this node still reads.
func (l *Links) pong(c net.Conn) error {
	if err := c.SetWriteDeadline(time.Now().Add(l.cfg.WriteTimeout)); err != nil {
		return err
	}
	_, err := c.Write(l.pingFrame)
	return err
}

// deliverReply decodes a reply and completes the pending call it answers: a
// blocked Call gets a message of its own (DecodeOwned), a Go callback the
// decoder's, valid during the callback. A reply nobody waits for (the call
// failed or timed out) is still decoded, as bad input must end the
// connection, and dropped.
func (l *Links) deliverReply(from string, dec *wire.Decoder, payload []byte, id uint64) error {
	var pc pendingCall
	ok := false
	if p, err := l.peer(from); err == nil {
		pc, ok = p.take(id)
	}
	var m wire.Message
	var err error
	if ok && pc.cb == nil {
		_, m, err = dec.DecodeOwned(payload) // the blocked caller keeps it
	} else {
		_, m, err = dec.Decode(payload)
	}
	switch {
	case err != nil && ok:
		pc.finish(nil, fmt.Errorf("%w: %s: bad reply: %v", ErrConnLost, from, err))
	case ok:
		pc.finish(m, nil)
	}
	return err
}

// watch reads the outgoing connection's return direction, where the peer
// only answers heartbeats. It returns when the connection fails, the peer
// stays silent past the idle timeout, or sends anything but a Ping.
func (l *Links) watch(fr *frameReader, peer string) error {
	dec := wire.NewDecoder(l.cfg.Limits)
	for {
		payload, err := fr.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("peer %s closed the connection", peer)
			}
			return err
		}
		h, _, err := dec.Decode(payload)
		if err != nil {
			l.met.reject(wire.Reason(err))
			return err
		}
		if h.Type != wire.TypePing {
			l.met.reject("malformed")
			return &errProtocol{"malformed", fmt.Sprintf("peer %s sent %v on the return path", peer, h.Type)}
		}
	}
}
