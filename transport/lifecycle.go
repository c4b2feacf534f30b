package transport

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// waitUp returns when the link is up, ctx ends or the peer stops.
func (p *peer) waitUp(ctx context.Context) error {
	for {
		p.mu.Lock()
		state, ch := p.state, p.upCh
		p.mu.Unlock()
		if state == up {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.ctx.Done():
			return fmt.Errorf("%w: %s", context.Cause(p.ctx), p.name)
		}
	}
}

// run is the manager goroutine: connect (or wait to be connected to),
// serve, and after a failure do it again, until the peer is stopped.
func (p *peer) run() {
	defer p.l.wg.Done()
	if p.accepts {
		p.runAccepting()
	} else {
		p.runDialling()
	}
	p.failPending(fmt.Errorf("%w: %s", context.Cause(p.ctx), p.name))
	p.l.met.traffic.retire(p) // stopped: it sends nothing more
}

// runDialling dials the peer, serves the connection, and after a failure
// waits out the backoff and redials.
func (p *peer) runDialling() {
	log := p.l.log.With("peer", p.name, "addr", p.addr)
	for attempt, served := 0, false; ; {
		if attempt > 0 && !p.sleep(p.l.cfg.Backoff.wait(attempt, p.rng.Float64())) {
			return
		}
		p.expireSession()
		ic, err := p.connect()
		if err == nil {
			err = p.up(ic)
			if errors.Is(err, errNewSession) {
				// The session could not be resumed and a new one started:
				// dial again at once, announcing it.
				if ic, err = p.connect(); err == nil {
					err = p.up(ic)
				}
			}
		}
		if err != nil {
			attempt++
			p.down(err)
			if p.ctx.Err() != nil {
				return
			}
			log.Debug("connect failed", "attempt", attempt, "err", err)
			continue
		}
		if served {
			p.l.met.reconnects.Inc()
		}
		served, attempt = true, 1
		select {
		case <-p.redial: // asked for while this attempt ran: it is answered
		default:
		}
		log.Debug("connected", "boot", ic.hello.BootID)
		go func() {
			err := p.l.read(ic.r, p.addr)
			close(ic.readDone)
			ic.ended <- err
		}()
		since := time.Now()
		_, err = p.serve(ic)
		p.down(err)
		<-ic.ended // the reader goroutine has ended (serve closed the connection)
		if p.ctx.Err() != nil {
			return
		}
		if time.Since(since) > p.l.cfg.Backoff.Max {
			// A connection that lived a while broke (a reset): dial again
			// at once, so that the session resumes soon. One that breaks
			// as soon as it is up backs off.
			attempt = 0
		}
		log.Info("connection lost", "err", err)
	}
}

// errNotDialled: a peer that dials this node had not done so within a dial
// and handshake timeout of SetPeer.
var errNotDialled = errors.New("the peer has not connected")

// runAccepting waits for the connections the peer dials to this node and
// serves each; the peer redials after a failure. Until the first arrives
// (within a dial and handshake timeout) messages queue, as they do while a
// dialler's first attempt runs.
func (p *peer) runAccepting() {
	log := p.l.log.With("peer", p.name)
	first := time.NewTimer(p.l.cfg.DialTimeout + p.l.cfg.HandshakeTimeout)
	defer first.Stop()
	expire := time.NewTimer(time.Hour)
	expire.Stop()
	defer expire.Stop()
	var next *inConn
	for served := false; ; {
		ic := next
		next = nil
		if ic == nil {
			select {
			case ic = <-p.incoming:
			case <-first.C:
				p.down(errNotDialled)
				continue
			case <-expire.C:
				p.expireSession()
				continue
			case <-p.ctx.Done():
				return
			}
		}
		first.Stop()
		if ic.isDropped() {
			continue // a newer one from the peer follows
		}
		ic.attach()
		err := p.up(ic)
		ic.settle() // its reader may start: replies now go out on it
		if err != nil {
			_ = ic.conn.Close()
			p.down(err)
			if p.ctx.Err() != nil {
				return
			}
			continue
		}
		if served {
			p.l.met.reconnects.Inc()
		}
		served = true
		log.Debug("connected", "boot", ic.hello.BootID)
		next, err = p.serve(ic)
		p.down(err)
		if p.ctx.Err() != nil {
			return
		}
		if t := p.l.cfg.SessionTimeout; t > 0 {
			expire.Reset(t)
		}
		log.Info("connection lost", "err", err)
	}
}

// expireSession ends the session if the link has been down longer than
// SessionTimeout.
func (p *peer) expireSession() {
	p.mu.Lock()
	expired := p.state == down && p.sessUp && !p.sessionAliveLocked()
	p.mu.Unlock()
	if expired {
		p.endSession(fmt.Errorf("the link stayed down longer than %v", p.l.cfg.SessionTimeout))
	}
}

// sleep waits out a backoff of d, or less if Redial is called meanwhile;
// it reports false if the peer was stopped.
func (p *peer) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.redial:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// connect dials and runs the handshake.
func (p *peer) connect() (*inConn, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.l.cfg.DialTimeout)
	c, err := p.l.cfg.StreamLayer.Dial(ctx, p.addr)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	p.mu.Lock()
	session := p.session
	p.mu.Unlock()
	fr, hello, err := p.l.handshakeOut(p.ctx, c, p.name, p.l.helloFor(p.name, session))
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	ic := newInConn(c)
	ic.from, ic.hello, ic.attached = hello.Node, hello, true
	ic.r = newInReader(p.l, ic, fr, hello, lendsReading(c))
	ic.r.recv = p.l.countFrom(hello)
	return ic, nil
}

// errNewSession: a dialler found its session could not be resumed and
// started a new one, which it must announce on a new connection.
var errNewSession = errors.New("the session could not be resumed; a new one started")

// up installs a handshaken connection and resumes the session on it: what
// the peer did not handle of it goes first (session.go). Replies queued
// while connecting for another boot of the peer are dropped with the rest
// of the buffer: the process that asked is gone.
func (p *peer) up(ic *inConn) error {
	c, hello := ic.conn, ic.hello
	p.mu.Lock()
	switch {
	case p.state == stopped:
		p.mu.Unlock()
		_ = c.Close()
		return context.Cause(p.ctx)
	case p.broken != nil:
		p.mu.Unlock()
		_ = c.Close()
		return p.broken
	case p.queuedBoot != 0 && p.queuedBoot != hello.BootID:
		// Nothing of the session reached anyone yet: it starts over empty,
		// under the id already announced.
		p.buf, p.retain, p.nsent, p.acked = p.buf[:0], p.retain[:0], 0, 0
	}
	if !p.resumableLocked(hello) {
		p.mu.Unlock()
		_ = c.Close()
		if p.accepts {
			// The handshake started a new session for this; the peer's
			// state moved since: let it dial again.
			return fmt.Errorf("%w: %s: the session moved during the handshake", errSessionLost, p.name)
		}
		p.endSession(fmt.Errorf("the peer (boot %x) did not resume this node's session", hello.BootID))
		p.mu.Lock()
		p.renewing = time.Now()
		p.mu.Unlock()
		return errNewSession
	}
	defer p.mu.Unlock()
	p.resumeLocked(hello)
	p.renewing = time.Time{}
	p.state, p.conn, p.remoteBoot, p.queuedBoot = up, c, hello.BootID, 0
	p.raw = inlineConn(c)
	// The connection's reading is lendable as soon as the link is up, so
	// that the first calls after WaitConnected read their own replies.
	ic.r.owner.Store(p)
	p.reader.Store(ic.r)
	close(p.upCh)
	p.upClosed = true
	if !p.accepts {
		p.l.met.connsOut.Inc()
	}
	if len(p.buf) > 0 {
		p.signal()
	}
	return nil
}

// down tears the connection down after err. The write buffer's bytes are
// dropped: they are kept in the session, which the next connection resumes
// (pending calls wait for it), unless the session ends now (it never
// reached the peer, its queue overflowed, or sessions do not outlive a
// connection): then its calls fail, because their requests or replies may
// be lost.
func (p *peer) down(err error) {
	p.mu.Lock()
	wasUp := p.conn != nil
	if p.conn != nil {
		_ = p.conn.Close()
		p.conn, p.raw = nil, nil
		if !p.accepts {
			p.l.met.connsOut.Dec()
		}
	}
	p.buf, p.broken, p.queuedBoot = p.buf[:0], nil, 0
	p.clearLazyLocked()
	if cap(p.buf) > maxIdleBuffer {
		p.buf = nil
	}
	if p.state != stopped {
		p.state, p.lastErr = down, err
	}
	if wasUp {
		p.downSince = time.Now()
	}
	// A session renewed for a connection about to be installed is kept
	// too: what was queued for it goes out on that connection.
	renewing := time.Since(p.renewing) < p.l.cfg.HandshakeTimeout
	keep := p.state != stopped && !p.overflowed && (p.sessionAliveLocked() || renewing)
	wasSessUp := p.sessUp
	p.overflowed = false
	p.notifyDrainedLocked()
	if p.upClosed {
		p.upCh, p.upClosed = make(chan struct{}), false
	}
	if !keep && !wasSessUp {
		// Nothing reached anyone: start over empty (no frame is lost that
		// the senders were not told of: they got errors or will).
		p.buf, p.retain, p.nsent, p.acked = p.buf[:0], p.retain[:0], 0, 0
	}
	p.mu.Unlock()
	if wasUp && p.ctx.Err() == nil && p.l.cfg.OnLinkDown != nil {
		p.l.cfg.OnLinkDown(p.name, err)
	}
	if keep {
		return
	}
	lost := ErrConnLost
	if cause := context.Cause(p.ctx); cause != nil {
		lost = cause
	}
	if wasSessUp && p.ctx.Err() == nil {
		p.endSession(err)
		return
	}
	p.failPending(fmt.Errorf("%w: %s: %v", lost, p.name, err))
}

// errReplaced: the peer dialled a new connection; the old one is dropped.
var errReplaced = errors.New("the peer dialled a new connection")

// serve is the writer loop of the link's connection while its reader runs
// alongside (on its own goroutine). It returns why the connection ended and,
// if the peer dialled a newer one meanwhile, that one.
func (p *peer) serve(ic *inConn) (*inConn, error) {
	c := ic.conn
	defer p.reader.Store(nil) // up stored it
	tick := time.NewTicker(p.l.cfg.HeartbeatInterval)
	defer tick.Stop()
	var spare []byte
	var next *inConn
	var err error
	for err == nil {
		select {
		case <-p.wake:
			// Let the other runnable senders add to the batch first.
			runtime.Gosched()
			err = p.flush(c, &spare)
		case <-tick.C:
			p.queuePing()
			err = p.flush(c, &spare)
		case err = <-ic.ended:
			ic.ended <- err // for whoever else waits for the reader's end
		case next = <-p.incoming:
			err = errReplaced
		case <-p.ctx.Done():
			err = context.Cause(p.ctx)
		}
	}
	_ = c.Close()
	ic.r.wake() // a parked reader goroutine learns of the end now, not at its next look
	return next, err
}

// queuePing queues the heartbeat, which acknowledges what this node handled
// of the peer's session on this connection.
func (p *peer) queuePing() {
	ping := &wire.Ping{}
	if r := p.reader.Load(); r != nil && r.recv != nil {
		ping.RecvSession, ping.Received = r.recv.session, r.recv.n.Load()
		r.recv.acked.Store(ping.Received)
	}
	p.mu.Lock()
	if p.state == up {
		_, _ = p.appendLocked(wire.Header{}, ping)
	}
	p.mu.Unlock()
}

// onAck takes a peer's acknowledgement of this node's frames, and its
// goodbye: a peer that is closing ends the session, and its link fails at
// once (sends fail fast until it comes back).
func (p *peer) onAck(ping *wire.Ping) {
	p.mu.Lock()
	p.ackedLocked(ping.RecvSession, ping.Received)
	p.mu.Unlock()
	if ping.Closing {
		p.endSession(errPeerClosing)
		p.mu.Lock()
		p.failLocked(fmt.Errorf("%w: %s", errPeerClosing, p.name))
		p.mu.Unlock()
	}
}

// errPeerClosing: the peer said goodbye.
var errPeerClosing = errors.New("the peer is closing")
