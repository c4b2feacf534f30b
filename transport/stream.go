package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"
)

// StreamLayer is where connections come from: it accepts the connections
// peers dial to this node (net.Listener) and dials peers. TCPStreamLayer is
// the real one; transport/memnet provides an in-process one for tests.
type StreamLayer interface {
	net.Listener
	// Dial connects to a peer's listener at addr. It returns when ctx ends.
	Dial(ctx context.Context, addr string) (net.Conn, error)
}

// handshaker is a connection with a handshake of its own to run first
// (tls.Conn); the links run it under the handshake deadline so that a failure
// is reported as such.
type handshaker interface {
	HandshakeContext(ctx context.Context) error
}

// TCPConfig configures a TCP stream layer.
type TCPConfig struct {
	// Addr is the address to listen on, "host:port"; port 0 picks one.
	Addr string
	// TLS, when set, turns on mutual TLS: both ends present a node
	// certificate signed by one of TLS.CAs and refuse a peer that does not
	// (see Identity for what the links check beyond the CA).
	TLS *TLSConfig
	// KeepAlive is the TCP keep-alive period of every connection; 0 means
	// Go's default (15 s). The links' own heartbeat detects dead peers
	// sooner; keep-alive only cleans up after half-open connections.
	KeepAlive time.Duration
}

// TCPStreamLayer is a StreamLayer over TCP, optionally with mutual TLS.
// Connections have TCP_NODELAY set: the links coalesce writes themselves,
// and Nagle's algorithm would only add latency to a lone request.
type TCPStreamLayer struct {
	ln        net.Listener
	dialer    net.Dialer
	serverTLS *tls.Config
	clientTLS *tls.Config
}

var _ StreamLayer = (*TCPStreamLayer)(nil)

// ListenTCP starts listening on cfg.Addr.
func ListenTCP(cfg TCPConfig) (*TCPStreamLayer, error) {
	s := &TCPStreamLayer{dialer: net.Dialer{KeepAlive: cfg.KeepAlive}}
	if cfg.TLS != nil {
		id, err := cfg.TLS.Identity()
		if err != nil {
			return nil, err
		}
		if id.Role != RoleNode {
			return nil, fmt.Errorf("transport: the links need a node certificate, not %s", id)
		}
		s.serverTLS, s.clientTLS = cfg.TLS.server(), cfg.TLS.client()
	}
	lc := net.ListenConfig{KeepAlive: cfg.KeepAlive}
	ln, err := lc.Listen(context.Background(), "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("transport: listen %s: %w", cfg.Addr, err)
	}
	s.ln = ln
	return s, nil
}

// Accept implements net.Listener. The TLS handshake, if any, is not run
// here but by the links under their handshake deadline, so that one slow
// client cannot hold up the accept loop.
func (s *TCPStreamLayer) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	setNoDelay(c)
	if s.serverTLS != nil {
		return tls.Server(c, s.serverTLS), nil
	}
	return c, nil
}

// Close implements net.Listener.
func (s *TCPStreamLayer) Close() error { return s.ln.Close() }

// Addr implements net.Listener.
func (s *TCPStreamLayer) Addr() net.Addr { return s.ln.Addr() }

// Dial implements StreamLayer.
func (s *TCPStreamLayer) Dial(ctx context.Context, addr string) (net.Conn, error) {
	c, err := s.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	setNoDelay(c)
	if s.clientTLS != nil {
		return tls.Client(c, s.clientTLS), nil
	}
	return c, nil
}

func setNoDelay(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true) // Go's default already; made explicit
	}
}
