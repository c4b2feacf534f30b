package transport

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// FrameReader reads length-prefixed frames from a connection with the
// links' reader: a declared length over the limit is refused before
// anything is read or allocated, a frame larger than the buffer grows a
// scratch buffer only as its bytes arrive, and a peer silent for the idle
// timeout is cut off. The agent's client port reads its connections with
// it. Not safe for concurrent use.
type FrameReader struct{ r *frameReader }

// NewFrameReader returns a reader of c with a buffer of bufSize bytes
// (frames that fit are returned without a copy) that ends the connection
// after idle of silence (0: never; the caller's deadlines then apply).
func NewFrameReader(c net.Conn, idle time.Duration, l *wire.Limits, bufSize int) *FrameReader {
	return &FrameReader{newFrameReaderSize(c, idle, l, bufSize)}
}

// Next returns the payload (everything after the length prefix) of the
// next frame, valid until the following call. A clean end of stream
// between frames is io.EOF; a connection that ends inside a frame is
// wire.ErrTruncated; a declared length over the limit is
// wire.ErrFrameTooLarge.
func (f *FrameReader) Next() ([]byte, error) { return f.r.next() }

// Buffered reports whether a whole frame is buffered, so that Next will
// not read from the connection: a server can answer a batch of requests
// with one write.
func (f *FrameReader) Buffered() bool { return f.r.hasFrame() }

// SetIdle changes the idle timeout.
func (f *FrameReader) SetIdle(d time.Duration) { f.r.setIdle(d) }

// Reset makes f a reader of c with idle timeout idle, dropping whatever
// it had buffered and keeping its buffer: a server that stops reading an
// idle connection can give the reader to another one. Reset(nil, 0)
// drops the connection.
func (f *FrameReader) Reset(c net.Conn, idle time.Duration) { f.r.reset(c, idle) }

// ServerConfig is the TLS configuration of a server of the cluster's
// mutual TLS: this node's certificate, and only clients with a certificate
// from the cluster's CAs.
func (c *TLSConfig) ServerConfig() (*tls.Config, error) {
	if _, err := c.load(); err != nil {
		return nil, err
	}
	return c.server(), nil
}

// ClientConfig is the TLS configuration of a client of the cluster's
// mutual TLS: its certificate, and only servers with a certificate from
// the cluster's CAs (whatever their host name; see TLSConfig).
func (c *TLSConfig) ClientConfig() (*tls.Config, error) {
	if _, err := c.load(); err != nil {
		return nil, err
	}
	return c.client(), nil
}
