package clientport

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// conn is one client connection: its reader (the goroutine running
// serve, or run once it was parked), its writer, and the session it
// carries once the ClientHello is in.
type conn struct {
	srv *Server
	tcp net.Conn // the accepted connection
	// w.nc is what frames are read from and written to: tcp as netConn
	// sees it, or TLS over tcp.
	w  writer
	rd *reading // nil while parked
	s  *session

	// wait is where the reader is as the poller's sweeps see it:
	// waitNone, or blocked between frames (waitBlocked), seen so by a
	// sweep (waitSeen), interrupted to park (waitPark).
	wait atomic.Int32
	// buffered is how many bytes read from the socket are not yet taken
	// as frames: the reader parks only with none. The reader's alone, as
	// is parkable: the reader may park (the poller watches it).
	buffered int32
	parkable bool
	poll     pollState // guarded by the poller's mu
}

// reading is what a connection needs only while a goroutine reads it: a
// parked one gives it back to its server.
type reading struct {
	fr  *transport.FrameReader
	dec *wire.Decoder
}

const (
	waitNone = iota
	waitBlocked
	waitSeen
	waitPark
)

// errPark is what a read interrupted to park returns.
var errPark = errors.New("idle: parked")

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{srv: s, tcp: nc}
	c.w = writer{nc: (*netConn)(c), limits: &s.limits, max: s.cfg.MaxOutbox, slow: c.slow, flusher: &s.answers}
	if tc, ok := nc.(*net.TCPConn); ok && s.tls == nil {
		c.w.raw, _ = tc.SyscallConn()
	}
	return c
}

func (c *conn) remote() string { return c.tcp.RemoteAddr().String() }

func (c *conn) slow() {
	c.srv.met.refused[refusedSlowClient].Inc()
	c.srv.log.Warn("client does not read what it is sent; connection closed", "remote", c.remote(), "queued over", c.srv.cfg.MaxOutbox)
}

// close ends the connection; its session, if any, waits to be resumed.
func (c *conn) close() {
	c.w.stop()
	_ = c.w.nc.Close()
}

// serve runs a new connection: TLS, the ClientHello, then requests until
// the connection ends.
func (c *conn) serve() {
	if !c.open() {
		c.end()
		return
	}
	c.run(true)
}

// open does TLS and the ClientHello, and reports whether the session is
// in.
func (c *conn) open() bool {
	start := time.Now()
	_ = c.w.nc.SetDeadline(start.Add(c.srv.cfg.HelloTimeout))
	if c.srv.tls != nil {
		tc := tls.Server(c.tcp, c.srv.tls)
		ctx, cancel := context.WithDeadline(c.srv.ctx, start.Add(c.srv.cfg.HelloTimeout))
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			// No certificate, another CA's, an expired one, or no TLS at
			// all: an operator must hear of it, as of a wrong token.
			c.srv.met.refused[refusedHandshake].Inc()
			c.srv.log.Info("client refused: TLS handshake failed", "remote", c.remote(), "err", err)
			return false
		}
		c.w.nc = tc
		if err := c.srv.clientCert(tc.ConnectionState()); err != nil {
			c.srv.met.refused[refusedCertificate].Inc()
			c.srv.log.Warn("client refused", "remote", c.remote(), "reason", refusedCertificate, "err", err)
			c.w.queue(wire.Header{}, &wire.ClientError{Code: wire.CodeUnauthorized, Text: truncate(err.Error())}, true)
			return false
		}
	}
	c.rd = c.srv.reading(c.w.nc, 0)
	if _, err := c.hello(); err != nil {
		return false
	}
	_ = c.w.nc.SetDeadline(time.Time{})
	c.rd.fr.SetIdle(c.idle())
	// TLS may hold decrypted bytes its socket no longer shows: only a
	// plain connection is watched.
	c.parkable = c.srv.tls == nil && c.srv.poll.watch(c)
	return true
}

// idle is the read idle timeout once the session is in. A client keeps
// alive at least every TTL/3; silence for longer than the TTL means it
// is gone, and its session is left to expire.
func (c *conn) idle() time.Duration { return c.s.ttl + c.srv.cfg.HelloTimeout }

// run reads and handles requests until the connection ends, or until it
// parks (the poller then starts run again once there is something to
// read, or the connection is closed).
func (c *conn) run(fresh bool) {
	if c.rd == nil {
		c.rd = c.srv.reading(c.w.nc, c.idle())
	}
	// A connection whose Welcome left with nothing more to read parks at
	// once: the client's next request comes at its program's pace.
	if fresh && c.parkable && c.buffered == 0 && c.park() {
		return
	}
	if c.loop(c.s) {
		return
	}
	c.end()
}

// park hands the idle connection to the poller and gives back its read
// buffer and decoder, and reports whether it did; if so, the caller's
// goroutine must leave c alone, as another may be reading it already.
func (c *conn) park() bool {
	rd := c.rd
	c.rd = nil
	c.w.trim()
	if c.s != nil {
		c.s.trimKept()
	}
	if !c.srv.poll.park(c) {
		c.rd = rd
		return false
	}
	c.srv.putReading(rd)
	return true
}

// end is the connection's end: the session waits for a resume, the
// server forgets the connection.
func (c *conn) end() {
	if c.s != nil {
		c.s.detach(c)
	}
	c.close()
	c.srv.poll.forget(c)
	if c.rd != nil {
		c.srv.putReading(c.rd)
		c.rd = nil
	}
	c.srv.ended(c)
}

// readSocket reads the socket for the frame reader. Between frames (all
// read taken) it lets the poller's sweeps see it blocked, and returns
// errPark once interrupted to park.
func (c *conn) readSocket(p []byte) (int, error) {
	between := c.parkable && c.buffered == 0
	if between {
		c.wait.Store(waitBlocked)
	}
	n, err := c.tcp.Read(p)
	if between && c.wait.Swap(waitNone) == waitPark && n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, errPark
	}
	c.buffered += int32(n)
	return n, err
}

// closeSocket closes the connection, out of the poller's epoll set first
// so that its fd, once reused, is not watched for it; a parked connection
// gets a reader to end it.
func (c *conn) closeSocket() error {
	parked := c.srv.poll.release(c)
	err := c.tcp.Close()
	if parked {
		c.srv.wake(c)
	}
	return err
}

// netConn is a plain connection's socket as its reader and writer use it:
// reads counted (readSocket), and every close through closeSocket.
type netConn conn

func (n *netConn) Read(p []byte) (int, error)         { return (*conn)(n).readSocket(p) }
func (n *netConn) Write(p []byte) (int, error)        { return n.tcp.Write(p) }
func (n *netConn) Close() error                       { return (*conn)(n).closeSocket() }
func (n *netConn) LocalAddr() net.Addr                { return n.tcp.LocalAddr() }
func (n *netConn) RemoteAddr() net.Addr               { return n.tcp.RemoteAddr() }
func (n *netConn) SetDeadline(t time.Time) error      { return n.tcp.SetDeadline(t) }
func (n *netConn) SetReadDeadline(t time.Time) error  { return n.tcp.SetReadDeadline(t) }
func (n *netConn) SetWriteDeadline(t time.Time) error { return n.tcp.SetWriteDeadline(t) }

// hello reads and answers the ClientHello, which must come first and
// within HelloTimeout.
func (c *conn) hello() (*session, error) {
	payload, err := c.rd.fr.Next()
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.srv.met.refused[refusedHandshake].Inc()
			c.srv.log.Debug("no ClientHello in time", "remote", c.remote())
			return nil, err
		}
		c.badFrame(err)
		return nil, err
	}
	c.buffered -= int32(wire.PrefixSize + len(payload))
	h, m, err := c.rd.dec.Decode(payload)
	if err != nil {
		c.badFrame(err)
		return nil, err
	}
	hello, ok := m.(*wire.ClientHello)
	if !ok || h.ID == 0 || h.Reply {
		return nil, c.protocolError(fmt.Sprintf("the first frame must be a ClientHello request, not %v", h.Type))
	}
	c.srv.met.requests[wire.TypeClientHello].Inc()
	if t := c.srv.cfg.Token; t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(hello.Token)) != 1 {
		return nil, c.unauthorized("wrong or missing token")
	}
	s, resumed, err := c.srv.openSession(hello)
	if errors.Is(err, errNoSession) {
		c.w.queue(wire.Header{}, errorMsg(err), true)
		return nil, err
	}
	if err != nil {
		return nil, c.unauthorized(err.Error())
	}
	if err := s.attach(c, h.ID, hello, resumed); err != nil {
		c.w.queue(wire.Header{}, errorMsg(err), true)
		return nil, err
	}
	return s, nil
}

func (c *conn) unauthorized(why string) error {
	c.srv.met.refused[refusedUnauthorized].Inc()
	c.srv.log.Info("client refused", "remote", c.remote(), "why", why)
	c.w.queue(wire.Header{}, &wire.ClientError{Code: wire.CodeUnauthorized, Text: truncate(why)}, true)
	return errors.New(why)
}

// loop reads requests and handles them; replies to the requests of one
// read leave in one write. It reports whether it parked the connection.
func (c *conn) loop(s *session) bool {
	for {
		payload, err := c.rd.fr.Next()
		if errors.Is(err, errPark) {
			if c.park() {
				return true
			}
			continue // the read goes on; its deadline is the frame reader's again
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.badFrame(err)
			}
			return false
		}
		c.buffered -= int32(wire.PrefixSize + len(payload))
		h, m, err := c.rd.dec.Decode(payload)
		if err != nil {
			c.badFrame(err)
			return false
		}
		if h.ID == 0 || h.Reply {
			_ = c.protocolError("a client sends requests only: a non-zero id, no reply flag")
			return false
		}
		c.w.beginBatch()
		err = s.handle(c, h.ID, m)
		if !c.rd.fr.Buffered() || err != nil {
			c.w.endBatch()
		}
		if err != nil {
			_ = c.protocolError(err.Error())
			return false
		}
	}
}

// badFrame counts a frame refused as bad input (or a read that failed)
// and tells the client, if it can still be told, before the connection
// closes.
func (c *conn) badFrame(err error) {
	reason := wire.Reason(err)
	if reason == "other" {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return // silent past the idle timeout: the session waits for a resume
		}
		c.srv.met.rejected["read_error"].Inc()
		return
	}
	c.srv.met.rejected[reason].Inc()
	if errors.Is(err, wire.ErrFrameTooLarge) {
		c.srv.met.refused[refusedFrame].Inc()
	} else {
		c.srv.met.refused[refusedProtocol].Inc()
	}
	c.srv.log.Info("bad frame from a client; connection closed", "remote", c.remote(), "reason", reason, "err", err)
	c.w.queue(wire.Header{}, &wire.ClientError{Code: wire.CodeProtocol, Text: truncate(err.Error())}, true)
}

func (c *conn) protocolError(why string) error {
	c.srv.met.refused[refusedProtocol].Inc()
	c.srv.log.Info("client broke the protocol; connection closed", "remote", c.remote(), "why", why)
	c.w.queue(wire.Header{}, &wire.ClientError{Code: wire.CodeProtocol, Text: truncate(why)}, true)
	return errors.New(why)
}
