package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
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
	// TLS, when set, turns on mutual TLS: both ends present a certificate
	// signed by one of TLS.CAs and refuse a peer that does not.
	TLS *TLSConfig
	// KeepAlive is the TCP keep-alive period of every connection; 0 means
	// Go's default (15 s). The links' own heartbeat detects dead peers
	// sooner; keep-alive only cleans up after half-open connections.
	KeepAlive time.Duration
}

// TLSConfig is the mutual TLS setup of a cluster: one CA (or a few) signs
// every node's certificate. Peers are authenticated by the CA alone, not by
// host name, because nodes dial each other by the addresses that
// membership gossips, not by names a certificate could list.
type TLSConfig struct {
	// Certificate is this node's certificate chain and key. Its leaf must
	// allow both server and client authentication (ExtKeyUsageServerAuth and
	// ExtKeyUsageClientAuth), since every node both dials and accepts.
	Certificate tls.Certificate
	// CAs are the cluster's certificate authorities.
	CAs *x509.CertPool
}

func (c *TLSConfig) validate() error {
	if len(c.Certificate.Certificate) == 0 || c.Certificate.PrivateKey == nil {
		return errors.New("transport: TLS needs a certificate and its key")
	}
	if c.CAs == nil {
		return errors.New("transport: TLS needs the cluster CAs")
	}
	return nil
}

func (c *TLSConfig) server() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.Certificate},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    c.CAs,
	}
}

// client verifies the server's chain against the CAs but not its host name
// (see TLSConfig); InsecureSkipVerify only turns off the built-in check that
// VerifyConnection replaces.
func (c *TLSConfig) client() *tls.Config {
	cas := c.CAs
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		Certificates:       []tls.Certificate{c.Certificate},
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("transport: peer sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
				Roots:         cas,
				Intermediates: inter,
				KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			return err
		},
	}
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
		if err := cfg.TLS.validate(); err != nil {
			return nil, err
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
