package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Sessions: a link that loses nothing when its connection breaks.
//
// Each node numbers the frames it sends a peer (every frame but Ping and
// Hello) within a send session, and keeps each until the peer acknowledges
// it (the Pings both ends send every HeartbeatInterval, and every ackEvery
// frames, carry how many of the other's session they handled). When the
// connection breaks, frames keep queueing; on the next connection each
// end's Hello says how many frames of the other's session it handled, and
// the other resends the rest, in order, before anything new. The receiver
// counts only what it handled, and the connection before has ended on both
// ends by then (the dialler waits for its reader to end before it redials,
// the acceptor closes the old connection and waits for its reader before it
// answers), so the count is exact: nothing is lost, nothing arrives twice.
//
// A session ends when it cannot go on: the link stayed down longer than
// SessionTimeout, the queue passed WriteBufferLimit, the peer restarted (a
// new boot), or the peer lost count (it read a frame it refused as bad
// input, which must not be sent again). The sender then starts a new
// session, the frames of the old one it still held are dropped, its pending
// calls fail, and both ends call OnSessionLost: the receiver learns of it
// from the sender's next Hello, which names a session it did not resume.

// ackEvery is how many frames a receiver handles between acknowledgements
// besides the heartbeat's: the sender keeps at most about that many frames
// of a healthy link.
const ackEvery = 256

// errSessionLost wraps why a session ended.
var errSessionLost = errors.New("transport: session lost")

// recvCounter counts the frames this node handled of one send session of a
// peer: what its next Hello to that peer says, and its Pings acknowledge.
type recvCounter struct {
	boot, session uint64
	n             atomic.Uint64 // frames handled
	acked         atomic.Uint64 // n as of the last acknowledgement queued
}

// recvFor returns the counter of the frames handled of name's send session
// (boot, session), starting one if it is new. lost says a session of the
// same boot was replaced: its sender gave it up, and what of it this node
// had not handled is lost.
func (l *Links) recvFor(name string, boot, session uint64) (c *recvCounter, lost bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.recv == nil {
		l.recv = map[string]*recvCounter{}
	}
	old := l.recv[name]
	if old != nil && old.boot == boot && old.session == session {
		return old, false
	}
	c = &recvCounter{boot: boot, session: session}
	l.recv[name] = c
	return c, old != nil && old.boot == boot && old.n.Load() > 0
}

// recvOf says what this node handled of name's latest send session, for a
// Hello: zeroes if it knows of none.
func (l *Links) recvOf(name string) (boot, session, n uint64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if c := l.recv[name]; c != nil {
		return c.boot, c.session, c.n.Load()
	}
	return 0, 0, 0
}

// forgetRecv drops the count of c's session after bad input from it: the
// frame refused must not come again, so the next Hello shows the peer that
// this node lost count, and it starts a new session.
func (l *Links) forgetRecv(name string, c *recvCounter) {
	l.mu.Lock()
	if l.recv[name] == c {
		delete(l.recv, name)
	}
	l.mu.Unlock()
}

// sessionLost tells the application, on a goroutine of its own (it may be
// called with locks held).
func (l *Links) sessionLost(peer string, err error) {
	if f := l.cfg.OnSessionLost; f != nil {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			f(peer, err)
		}()
	}
}

// firstSession is the id of a peer's first send session: derived from the
// boot and the name, so that an acceptor can announce it before the peer
// is set (a connection from a node this one was not told about yet).
func firstSession(boot uint64, name string) uint64 {
	return mix(boot^hashName(name)) | 1
}

func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// helloFor is this node's Hello to the peer: its send session, and what it
// handled of the peer's.
func (l *Links) helloFor(name string, session uint64) *wire.Hello {
	h := l.hello()
	h.Session = session
	h.RecvBoot, h.RecvSession, h.Received = l.recvOf(name)
	return h
}

// retainLocked keeps a frame just queued until the peer acknowledges it,
// and reports whether the session is over its limit. Caller holds p.mu.
func (p *peer) retainLocked(frame []byte) bool {
	p.retain = append(p.retain, frame...)
	p.nsent++
	return len(p.retain) > p.l.cfg.WriteBufferLimit
}

// ackedLocked forgets the frames the peer acknowledged handling (of this
// session only: an acknowledgement of an older one says nothing). Caller
// holds p.mu.
func (p *peer) ackedLocked(session, received uint64) {
	if session != p.session || received <= p.acked || received > p.nsent {
		return
	}
	off := 0
	for range received - p.acked {
		off += wire.PrefixSize + int(binary.BigEndian.Uint32(p.retain[off:]))
	}
	p.acked = received
	rest := len(p.retain) - off
	if off > rest { // move the rest down rather than let the array grow
		copy(p.retain, p.retain[off:])
		p.retain = p.retain[:rest]
	} else {
		p.retain = p.retain[off:]
	}
	if rest == 0 && cap(p.retain) > maxIdleBuffer {
		p.retain = nil
	}
}

// resumableLocked says whether the session can go on over a connection
// whose peer sent h: either nothing of it ever reached a peer (it starts
// over, from its first frame, with whoever connected), or the peer is the
// boot the session is with and handled a count of its frames that this
// node still holds the rest of. Caller holds p.mu.
func (p *peer) resumableLocked(h *wire.Hello) bool {
	mine := h.RecvBoot == p.l.cfg.BootID && h.RecvSession == p.session
	if !p.sessUp {
		return !mine || h.Received == 0
	}
	return h.BootID == p.sessBoot && mine && h.Received >= p.acked && h.Received <= p.nsent
}

// resumeLocked puts in the write buffer what the peer did not handle of
// the session, in order; the session must be resumable. Caller holds p.mu.
func (p *peer) resumeLocked(h *wire.Hello) {
	if h.RecvBoot == p.l.cfg.BootID && h.RecvSession == p.session {
		p.ackedLocked(p.session, h.Received)
	}
	p.buf = append(p.buf[:0], p.retain...)
	p.clearLazyLocked()
	p.sessBoot, p.sessUp = h.BootID, true
}

// newSessionLocked ends the session and starts the next one, empty. It
// returns the pending calls to fail (outside the lock, on a library
// goroutine), and reports whether frames of the old session may have been
// lost. Caller holds p.mu.
func (p *peer) newSessionLocked() (map[uint64]pendingCall, bool) {
	lost := p.sessUp && p.nsent > p.acked
	for {
		next := randomNonZero()
		if next != p.session {
			p.session = next
			break
		}
	}
	p.sessBoot, p.sessUp = 0, false
	p.nsent, p.acked = 0, 0
	p.retain = p.retain[:0]
	if cap(p.retain) > maxIdleBuffer {
		p.retain = nil
	}
	p.buf = p.buf[:0]
	p.clearLazyLocked()
	failed := p.pending
	p.pending = map[uint64]pendingCall{}
	return failed, lost
}

// endSession ends the session for why, fails its pending calls and tells
// the application if frames may have been lost.
func (p *peer) endSession(why error) {
	p.mu.Lock()
	failed, lost := p.newSessionLocked()
	p.mu.Unlock()
	err := fmt.Errorf("%w: %s: %w", errSessionLost, p.name, why)
	for _, pc := range failed {
		pc.finish(nil, fmt.Errorf("%w: %w", ErrConnLost, err))
	}
	if lost {
		p.l.log.Warn("link session lost: frames to the peer may be lost", "peer", p.name, "err", why)
		p.l.sessionLost(p.name, err)
	}
}

// sessionAliveLocked says whether the session outlives the broken
// connection still: sends queue rather than fail. Caller holds p.mu.
func (p *peer) sessionAliveLocked() bool {
	return p.sessUp && p.l.cfg.SessionTimeout > 0 && time.Since(p.downSince) < p.l.cfg.SessionTimeout
}

// queueAck queues a Ping acknowledging what this node handled of the
// peer's session (c), and gets it moving.
func (p *peer) queueAck(c *recvCounter) {
	p.mu.Lock()
	if p.state != up {
		p.mu.Unlock()
		return
	}
	n := c.n.Load()
	c.acked.Store(n)
	_, _ = p.appendLocked(wire.Header{}, &wire.Ping{RecvSession: c.session, Received: n})
	p.mu.Unlock()
	p.kick()
}
