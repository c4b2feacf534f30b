package transport

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// peerState is where a peer's link stands.
type peerState uint8

const (
	// connecting: the first attempt since SetPeer is under way; messages
	// queue (bounded) so that a freshly added peer can be used at once.
	connecting peerState = iota
	// up: connected; messages queue and the writer sends them.
	up
	// down: the last attempt failed; messages fail fast with
	// ErrUnreachable while the manager retries with backoff.
	down
	// stopped: removed or closed; nothing is accepted any more.
	stopped
)

// peer is this node's side of the link to one node: its write buffer, its
// pending calls and the manager goroutine (run) that dials, writes and
// redials, or, if the other node is the one that dials, waits for its
// connection. Lock order: Links.mu before peer.mu; never the other way.
type peer struct {
	l          *Links
	name, addr string
	// accepts: the peer dials this node (its name sorts first), and run
	// waits for its connections on incoming instead of dialling.
	accepts  bool
	incoming chan *inConn  // 1-buffered: the latest connection the peer dialled
	wake     chan struct{} // 1-buffered: the write buffer became non-empty
	redial   chan struct{} // 1-buffered: dial now, cutting a backoff short (Redial)
	ctx      context.Context
	cancel   context.CancelCauseFunc
	rng      *rand.Rand // backoff jitter; used by run only
	// reader is the reading side of the link while it is up, for Await.
	reader atomic.Pointer[inReader]

	mu        sync.Mutex
	state     peerState
	lastErr   error // why the peer is down
	broken    error // set by a sender to make the manager fail the link
	buf       []byte
	conn      net.Conn
	raw       syscall.RawConn // conn's socket, for inline writes; nil for TLS and pipes
	writing   bool            // a write of earlier bytes is under way: keep order
	inlineBuf []byte          // the spare buffer of the inline path
	// lazy: what buf holds was all piggybacked: nobody has been asked to
	// write it yet; the next message or the parked watcher will.
	// Written under mu; read without it by the watcher's quick look.
	lazy atomic.Bool

	// Used by writeInline's raw write only, by the goroutine that set writing.
	rawWrite func(fd uintptr) bool
	wbuf     []byte
	wn       int
	werr     error
	deferred bool // in Links.deferred; guarded by Links.deferMu

	sent       sendCounts      // for the metrics (trafficCollector)
	drained    []chan struct{} // Flush callers waiting for the buffer to empty
	remoteBoot uint64          // boot ID in the peer's Hello on the current connection
	queuedBoot uint64          // boot ID of replies queued while connecting
	pending    map[uint64]pendingCall
	upCh       chan struct{} // closed while up; replaced when the link goes down
	upClosed   bool

	// The send session (session.go): its id, the boot of the peer it is
	// with and whether any of it may have reached it, the frames queued
	// and acknowledged so far, and the frames after acked, kept for a
	// resend. downSince is when the link went down.
	session      uint64
	sessBoot     uint64
	sessUp       bool
	nsent, acked uint64
	retain       []byte
	downSince    time.Time
	overflowed   bool // the queue passed WriteBufferLimit: the session ends
	// renewing is when a new session was started for a connection about
	// to be installed (the handshake found the old one could not go on):
	// sends queue for it, as for a first connection, for a handshake's
	// time.
	renewing time.Time
}

func newPeer(l *Links, name, addr string) *peer {
	ctx, cancel := context.WithCancelCause(context.Background())
	p := &peer{
		l:        l,
		name:     name,
		addr:     addr,
		accepts:  dialsFirst(name, l.cfg.Name),
		incoming: make(chan *inConn, 1),
		wake:     make(chan struct{}, 1),
		redial:   make(chan struct{}, 1),
		ctx:      ctx,
		cancel:   cancel,
		rng:      rand.New(rand.NewPCG(l.cfg.Seed, hashName(name))),
		pending:  map[uint64]pendingCall{},
		upCh:     make(chan struct{}),
		session:  firstSession(l.cfg.BootID, name),
	}
	p.rawWrite = p.rawWriteFD
	l.met.traffic.join(p)
	return p
}

// dialsFirst says whether node a is the one that dials the pair's link to
// b: the name that sorts first.
func dialsFirst(a, b string) bool { return a < b }

// offer gives the peer a connection it dialled to this node, to use as the
// link if this node waits for it (accepts); an older one not taken yet is
// closed, since the peer has moved on from it.
func (p *peer) offer(ic *inConn) {
	if !p.accepts {
		return
	}
	for {
		select {
		case p.incoming <- ic:
			return
		default:
		}
		select {
		case old := <-p.incoming:
			_ = old.conn.Close()
			old.settle()
		default:
		}
	}
}

func hashName(s string) uint64 {
	h := uint64(14695981039346656037) // FNV-1a
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

// stop makes the manager fail everything with err and exit.
func (p *peer) stop(err error) {
	p.mu.Lock()
	p.state = stopped
	p.notifyDrainedLocked()
	p.mu.Unlock()
	p.cancel(err)
}

// writableLocked says whether a message may be queued now: while the link
// is up or connecting for the first time, and while it is down within its
// session's timeout (the next connection resends it).
func (p *peer) writableLocked() error {
	switch p.state {
	case connecting, up:
		return nil
	case down:
		if p.sessionAliveLocked() || time.Since(p.renewing) < p.l.cfg.HandshakeTimeout {
			return nil
		}
		return fmt.Errorf("%w: %s: %v", ErrUnreachable, p.name, p.lastErr)
	default:
		return fmt.Errorf("%w: %s", context.Cause(p.ctx), p.name)
	}
}

// failLocked marks the link broken; the manager tears it down (and fails
// the pending calls on its own goroutine, never on the sender's).
func (p *peer) failLocked(err error) {
	p.broken = err
	p.lastErr = err
	if p.state != stopped {
		p.state = down
	}
	if p.conn != nil {
		_ = p.conn.Close()
	}
	p.signal()
}

func (p *peer) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// lender is Links.Lender for this peer: its link's reader, if it lends.
func (p *peer) lender() *Lender {
	if r := p.reader.Load(); r != nil && r.lend {
		return &r.lender
	}
	return nil
}
