package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// The handshake: the dialer sends its Hello, the acceptor checks it and
// answers with its own, the dialer checks that. Each side refuses a peer of
// another cluster or protocol version; the dialer also refuses an acceptor
// that is not the node it meant to reach (an address reused by another
// node). TLS, when on, runs first, under the same deadline, and each side
// then holds the peer to the identity its certificate carries (identity.go).

func (l *Links) hello() *wire.Hello {
	return &wire.Hello{Version: wire.LinkVersion, ClusterID: l.cfg.ClusterID, Node: l.cfg.Name, BootID: l.cfg.BootID}
}

// handshakeError carries the metric reason of a refused handshake.
type handshakeError struct {
	reason string
	err    error
}

func (e *handshakeError) Error() string { return fmt.Sprintf("%v (%s)", e.err, e.reason) }
func (e *handshakeError) Unwrap() error { return e.err }

func refuse(reason, format string, args ...any) error {
	return &handshakeError{reason: reason, err: fmt.Errorf("%w: "+format, append([]any{ErrHandshake}, args...)...)}
}

// handshakeReason returns the metric label of a handshake failure.
func handshakeReason(err error) string {
	if he, ok := errors.AsType[*handshakeError](err); ok {
		return he.reason
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return "timeout"
	}
	return "io"
}

// handshakeOut runs the dialer's side on c, sending mine, and returns the
// reader to use for the rest of the connection and the acceptor's Hello.
func (l *Links) handshakeOut(ctx context.Context, c net.Conn, want string, mine *wire.Hello) (*frameReader, *wire.Hello, error) {
	ctx, cancel := l.handshakeDeadline(ctx, c)
	defer cancel()
	if err := runTLS(ctx, c); err != nil {
		return nil, nil, err
	}
	if err := l.checkDialled(c, want); err != nil {
		return nil, nil, err
	}
	if err := l.writeHello(c, mine); err != nil {
		return nil, nil, err
	}
	fr := newFrameReader(c, 0, &l.cfg.Limits) // the handshake sets its deadlines
	h, err := l.readHello(fr)
	if err != nil {
		return nil, nil, err
	}
	if h.Node != want {
		return nil, nil, refuse("wrong_node", "dialled %s but reached %s", want, h.Node)
	}
	fr.setIdle(l.cfg.IdleTimeout)
	return fr, h, c.SetDeadline(time.Time{})
}

// handshakeIn runs the acceptor's side: answer makes its Hello from the
// dialer's (the sessions' state, see session.go).
func (l *Links) handshakeIn(c net.Conn, fr *frameReader, answer func(*wire.Hello) *wire.Hello) (*wire.Hello, error) {
	ctx, cancel := l.handshakeDeadline(context.Background(), c)
	defer cancel()
	if err := runTLS(ctx, c); err != nil {
		return nil, err
	}
	id, err := l.peerNode(c)
	if err != nil {
		return nil, err
	}
	h, err := l.readHello(fr)
	if err != nil {
		return nil, err
	}
	if err := id.claims(h.Node); err != nil {
		return nil, err
	}
	if err := l.writeHello(c, answer(h)); err != nil {
		return nil, err
	}
	fr.setIdle(l.cfg.IdleTimeout)
	return h, c.SetDeadline(time.Time{})
}

// handshakeDeadline bounds the handshake and aborts it when ctx ends.
func (l *Links) handshakeDeadline(ctx context.Context, c net.Conn) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(l.cfg.HandshakeTimeout)
	_ = c.SetDeadline(deadline)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	return ctx, func() { stop(); cancel() }
}

func runTLS(ctx context.Context, c net.Conn) error {
	hs, ok := c.(handshaker)
	if !ok {
		return nil
	}
	if err := hs.HandshakeContext(ctx); err != nil {
		return &handshakeError{reason: "tls", err: fmt.Errorf("%w: tls: %v", ErrHandshake, err)}
	}
	return nil
}

func (l *Links) writeHello(c net.Conn, h *wire.Hello) error {
	frame, err := wire.AppendFrame(nil, wire.Header{}, h, &l.cfg.Limits)
	if err != nil {
		return err
	}
	_, err = c.Write(frame)
	return err
}

// readHello reads the first frame, which must be a valid one-way Hello of
// this cluster and protocol version.
func (l *Links) readHello(fr *frameReader) (*wire.Hello, error) {
	payload, err := fr.next()
	if err != nil {
		return nil, err
	}
	h, m, err := wire.NewDecoder(l.cfg.Limits).DecodeOwned(payload)
	if err != nil {
		return nil, refuse(wire.Reason(err), "bad first frame: %v", err)
	}
	hello, ok := m.(*wire.Hello)
	if !ok || h.ID != 0 || h.Reply {
		return nil, refuse("no_hello", "%v", errNoHello)
	}
	switch {
	case hello.Version != wire.LinkVersion:
		return nil, refuse("version", "peer %s speaks version %d, this node %d", hello.Node, hello.Version, wire.LinkVersion)
	case hello.ClusterID != l.cfg.ClusterID:
		return nil, refuse("cluster", "peer %s is in cluster %q, this node in %q", hello.Node, hello.ClusterID, l.cfg.ClusterID)
	case hello.Node == l.cfg.Name:
		return nil, refuse("same_name", "peer claims this node's name %q", hello.Node)
	}
	return hello, nil
}

var errNoHello = errors.New("first frame is not a Hello")
