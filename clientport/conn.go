package clientport

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// conn is one client connection: its reader (this goroutine, serve) and
// its writer; the session it carries once the ClientHello is in.
type conn struct {
	srv    *Server
	nc     net.Conn
	remote string
	fr     *transport.FrameReader
	dec    *wire.Decoder
	w      writer
	s      *session
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{srv: s, nc: nc, remote: nc.RemoteAddr().String()}
	c.w = writer{nc: nc, limits: &s.limits, max: s.cfg.MaxOutbox, slow: c.slow}
	if tc, ok := nc.(*net.TCPConn); ok && s.tls == nil {
		c.w.raw, _ = tc.SyscallConn()
	}
	return c
}

func (c *conn) slow() {
	c.srv.met.refused[refusedSlowClient].Inc()
	c.srv.log.Warn("client does not read what it is sent; connection closed", "remote", c.remote, "queued over", c.srv.cfg.MaxOutbox)
}

// close ends the connection; its session, if any, waits to be resumed.
func (c *conn) close() {
	c.w.stop()
	_ = c.nc.Close()
}

// serve runs the connection: TLS, the ClientHello, then requests until the
// connection ends.
func (c *conn) serve() {
	defer c.close()
	start := time.Now()
	_ = c.nc.SetDeadline(start.Add(c.srv.cfg.HelloTimeout))
	if c.srv.tls != nil {
		tc := tls.Server(c.nc, c.srv.tls)
		ctx, cancel := context.WithDeadline(c.srv.ctx, start.Add(c.srv.cfg.HelloTimeout))
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			// No certificate, another CA's, an expired one, or no TLS at
			// all: an operator must hear of it, as of a wrong token.
			c.srv.met.refused[refusedHandshake].Inc()
			c.srv.log.Info("client refused: TLS handshake failed", "remote", c.remote, "err", err)
			return
		}
		c.nc = tc
		c.w.nc = tc
		if err := c.srv.clientCert(tc.ConnectionState()); err != nil {
			c.srv.met.refused[refusedCertificate].Inc()
			c.srv.log.Warn("client refused", "remote", c.remote, "reason", refusedCertificate, "err", err)
			c.w.queue(wire.Header{}, &wire.ClientError{Code: wire.CodeUnauthorized, Text: truncate(err.Error())}, true)
			return
		}
	}
	c.fr = transport.NewFrameReader(c.nc, 0, &c.srv.limits, c.srv.cfg.ReadBuffer)
	c.dec = wire.NewClientDecoder(c.srv.limits)
	s, err := c.hello()
	if err != nil {
		return
	}
	_ = c.nc.SetDeadline(time.Time{})
	// A client keeps alive at least every TTL/3; silence for longer than
	// the TTL means it is gone, and its session is left to expire.
	c.fr.SetIdle(s.ttl + c.srv.cfg.HelloTimeout)
	defer s.detach(c)
	c.loop(s)
}

// hello reads and answers the ClientHello, which must come first and
// within HelloTimeout.
func (c *conn) hello() (*session, error) {
	payload, err := c.fr.Next()
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.srv.met.refused[refusedHandshake].Inc()
			c.srv.log.Debug("no ClientHello in time", "remote", c.remote)
			return nil, err
		}
		c.badFrame(err)
		return nil, err
	}
	h, m, err := c.dec.Decode(payload)
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
	c.srv.log.Info("client refused", "remote", c.remote, "why", why)
	c.w.queue(wire.Header{}, &wire.ClientError{Code: wire.CodeUnauthorized, Text: truncate(why)}, true)
	return errors.New(why)
}

// loop reads requests and handles them; replies to the requests of one
// read leave in one write.
func (c *conn) loop(s *session) {
	for {
		payload, err := c.fr.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.badFrame(err)
			}
			return
		}
		h, m, err := c.dec.Decode(payload)
		if err != nil {
			c.badFrame(err)
			return
		}
		if h.ID == 0 || h.Reply {
			_ = c.protocolError("a client sends requests only: a non-zero id, no reply flag")
			return
		}
		c.w.beginBatch()
		err = s.handle(c, h.ID, m)
		if !c.fr.Buffered() || err != nil {
			c.w.endBatch()
		}
		if err != nil {
			_ = c.protocolError(err.Error())
			return
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
	c.srv.log.Info("bad frame from a client; connection closed", "remote", c.remote, "reason", reason, "err", err)
	c.w.queue(wire.Header{}, &wire.ClientError{Code: wire.CodeProtocol, Text: truncate(err.Error())}, true)
}

func (c *conn) protocolError(why string) error {
	c.srv.met.refused[refusedProtocol].Inc()
	c.srv.log.Info("client broke the protocol; connection closed", "remote", c.remote, "why", why)
	c.w.queue(wire.Header{}, &wire.ClientError{Code: wire.CodeProtocol, Text: truncate(why)}, true)
	return errors.New(why)
}
