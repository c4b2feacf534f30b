package transport

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// peerState is where a peer's outgoing link stands.
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

// pendingCall is a request waiting for its reply: either a blocked Call
// (ch) or an asynchronous Go (cb).
type pendingCall struct {
	ch chan callResult
	cb func(wire.Message, error)
}

type callResult struct {
	msg wire.Message
	err error
}

// finish delivers the outcome; it runs on a library goroutine.
func (pc pendingCall) finish(m wire.Message, err error) {
	if pc.cb != nil {
		pc.cb(m, err)
		return
	}
	pc.ch <- callResult{m, err} // buffered, and the only send
}

// peer is the outgoing side of the link to one node: its write buffer, its
// pending calls and the manager goroutine (run) that dials, writes and
// redials. Lock order: Links.mu before peer.mu; never the other way.
type peer struct {
	l          *Links
	name, addr string
	wake       chan struct{} // 1-buffered: the write buffer became non-empty
	ctx        context.Context
	cancel     context.CancelCauseFunc
	rng        *rand.Rand // backoff jitter; used by run only

	mu         sync.Mutex
	state      peerState
	lastErr    error // why the peer is down
	broken     error // set by a sender to make the manager fail the link
	buf        []byte
	conn       net.Conn
	remoteBoot uint64 // boot ID in the peer's Hello on the current connection
	queuedBoot uint64 // boot ID of replies queued while connecting
	pending    map[uint64]pendingCall
	upCh       chan struct{} // closed while up; replaced when the link goes down
	upClosed   bool
}

func newPeer(l *Links, name, addr string) *peer {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &peer{
		l:       l,
		name:    name,
		addr:    addr,
		wake:    make(chan struct{}, 1),
		ctx:     ctx,
		cancel:  cancel,
		rng:     rand.New(rand.NewPCG(l.cfg.Seed, hashName(name))),
		pending: map[uint64]pendingCall{},
		upCh:    make(chan struct{}),
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
	p.mu.Unlock()
	p.cancel(err)
}

// writableLocked says whether a message may be queued now.
func (p *peer) writableLocked() error {
	switch p.state {
	case connecting, up:
		return nil
	case down:
		return fmt.Errorf("%w: %s: %v", ErrUnreachable, p.name, p.lastErr)
	default:
		return fmt.Errorf("%w: %s", context.Cause(p.ctx), p.name)
	}
}

// appendLocked encodes one frame into the write buffer. Over the limit, the
// frame is taken back out and the link is failed.
func (p *peer) appendLocked(h wire.Header, m wire.Message) (bool, error) {
	before := len(p.buf)
	buf, err := wire.AppendFrame(p.buf, h, m, &p.l.cfg.Limits)
	if err != nil {
		return false, err
	}
	if len(buf) > p.l.cfg.WriteBufferLimit {
		p.buf = buf[:before]
		p.failLocked(fmt.Errorf("%w: %s: %d bytes queued", ErrWriteBufferFull, p.name, before))
		p.l.met.overflows.Inc()
		return false, p.broken
	}
	p.buf = buf
	t := m.Type()
	p.l.met.sentMsgs[t].Inc()
	p.l.met.sentBytes[t].Add(float64(len(buf) - before))
	return before == 0, nil
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

// send queues a one-way message, or a request whose reply goes to cb.
func (p *peer) send(h wire.Header, m wire.Message, cb func(wire.Message, error)) error {
	p.mu.Lock()
	if err := p.writableLocked(); err != nil {
		p.mu.Unlock()
		return err
	}
	if cb != nil {
		h.ID = p.l.nextID.Add(1)
	}
	wake, err := p.appendLocked(h, m)
	if err == nil && cb != nil {
		p.pending[h.ID] = pendingCall{cb: cb}
	}
	p.mu.Unlock()
	if wake {
		p.signal()
	}
	return err
}

// reply queues an answer to a request from this peer's boot to.BootID.
func (p *peer) reply(to ReplyTo, m wire.Message) error {
	p.mu.Lock()
	err := p.writableLocked()
	switch {
	case err != nil:
	case p.state == up && p.remoteBoot != to.BootID,
		p.state == connecting && p.queuedBoot != 0 && p.queuedBoot != to.BootID:
		err = fmt.Errorf("%w: %s boot %x", ErrStaleReply, p.name, to.BootID)
	case p.state == connecting:
		p.queuedBoot = to.BootID // checked against the Hello when connected
	}
	var wake bool
	if err == nil {
		wake, err = p.appendLocked(wire.Header{ID: to.ID, Reply: true}, m)
	}
	p.mu.Unlock()
	if wake {
		p.signal()
	}
	return err
}

// call sends a request and waits for its reply.
func (p *peer) call(ctx context.Context, m wire.Message) (wire.Message, error) {
	ch := p.l.getCallCh()
	p.mu.Lock()
	if err := p.writableLocked(); err != nil {
		p.mu.Unlock()
		p.l.putCallCh(ch)
		return nil, err
	}
	id := p.l.nextID.Add(1)
	wake, err := p.appendLocked(wire.Header{ID: id}, m)
	if err != nil {
		p.mu.Unlock()
		p.l.putCallCh(ch)
		return nil, err
	}
	p.pending[id] = pendingCall{ch: ch}
	p.mu.Unlock()
	if wake {
		p.signal()
	}
	select {
	case r := <-ch:
		p.l.putCallCh(ch)
		return r.msg, r.err
	case <-ctx.Done():
	}
	p.mu.Lock()
	_, mine := p.pending[id]
	delete(p.pending, id)
	p.mu.Unlock()
	if !mine { // someone took it to finish it: wait for that
		r := <-ch
		p.l.putCallCh(ch)
		return r.msg, r.err
	}
	p.l.putCallCh(ch)
	return nil, ctx.Err()
}

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

// take removes and returns the pending call for a reply's id.
func (p *peer) take(id uint64) (pendingCall, bool) {
	p.mu.Lock()
	pc, ok := p.pending[id]
	delete(p.pending, id)
	p.mu.Unlock()
	return pc, ok
}

// failPending fails every pending call with err; run on a library goroutine.
func (p *peer) failPending(err error) {
	p.mu.Lock()
	failed := p.pending
	p.pending = map[uint64]pendingCall{}
	p.mu.Unlock()
	for _, pc := range failed {
		pc.finish(nil, err)
	}
}

// run is the manager goroutine: connect, serve, and after a failure wait
// out the backoff and reconnect, until the peer is stopped.
func (p *peer) run() {
	defer p.l.wg.Done()
	log := p.l.log.With("peer", p.name, "addr", p.addr)
	for attempt, served := 0, false; ; {
		if attempt > 0 && !p.sleep(p.l.cfg.Backoff.wait(attempt, p.rng.Float64())) {
			break
		}
		c, fr, hello, err := p.connect()
		if err == nil {
			err = p.up(c, hello)
		}
		if err != nil {
			attempt++
			p.down(err)
			if p.ctx.Err() != nil {
				break
			}
			log.Debug("connect failed", "attempt", attempt, "err", err)
			continue
		}
		if served {
			p.l.met.reconnects.Inc()
		}
		served, attempt = true, 1
		log.Debug("connected", "boot", hello.BootID)
		err = p.serve(c, fr)
		p.down(err)
		if p.ctx.Err() != nil {
			break
		}
		log.Info("connection lost", "err", err)
	}
	p.failPending(fmt.Errorf("%w: %s", context.Cause(p.ctx), p.name))
}

func (p *peer) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// connect dials and runs the handshake.
func (p *peer) connect() (net.Conn, *frameReader, *wire.Hello, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.l.cfg.DialTimeout)
	c, err := p.l.cfg.StreamLayer.Dial(ctx, p.addr)
	cancel()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("dial: %w", err)
	}
	fr, hello, err := p.l.handshakeOut(p.ctx, c, p.name)
	if err != nil {
		_ = c.Close()
		return nil, nil, nil, err
	}
	return c, fr, hello, nil
}

// up installs a handshaken connection. Replies queued while connecting for
// another boot of the peer are dropped with the rest of the buffer: the
// process that asked is gone.
func (p *peer) up(c net.Conn, hello *wire.Hello) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.state == stopped:
		_ = c.Close()
		return context.Cause(p.ctx)
	case p.broken != nil:
		_ = c.Close()
		return p.broken
	case p.queuedBoot != 0 && p.queuedBoot != hello.BootID:
		p.buf = p.buf[:0]
	}
	p.state, p.conn, p.remoteBoot, p.queuedBoot = up, c, hello.BootID, 0
	close(p.upCh)
	p.upClosed = true
	p.l.met.connsOut.Inc()
	if len(p.buf) > 0 {
		p.signal()
	}
	return nil
}

// down tears the connection down after err: the buffer is dropped and the
// pending calls fail, because their requests or replies may be lost.
func (p *peer) down(err error) {
	p.mu.Lock()
	if p.conn != nil {
		_ = p.conn.Close()
		p.conn = nil
		p.l.met.connsOut.Dec()
	}
	p.buf, p.broken, p.queuedBoot = p.buf[:0], nil, 0
	if cap(p.buf) > maxIdleBuffer {
		p.buf = nil
	}
	if p.state != stopped {
		p.state, p.lastErr = down, err
	}
	if p.upClosed {
		p.upCh, p.upClosed = make(chan struct{}), false
	}
	p.mu.Unlock()
	lost := ErrConnLost
	if cause := context.Cause(p.ctx); cause != nil {
		lost = cause
	}
	p.failPending(fmt.Errorf("%w: %s: %v", lost, p.name, err))
}

// maxIdleBuffer is the largest write buffer kept after it drained, so a
// burst does not pin megabytes per peer for ever.
const maxIdleBuffer = 1 << 20

// serve is the writer loop of one connection, with the watcher that reads
// the peer's heartbeats alongside. It returns why the connection ended.
func (p *peer) serve(c net.Conn, fr *frameReader) error {
	watch := make(chan error, 1)
	go func() { watch <- p.l.watch(fr, p.name) }()
	tick := time.NewTicker(p.l.cfg.HeartbeatInterval)
	defer tick.Stop()
	var spare []byte
	var err error
	for err == nil {
		select {
		case <-p.wake:
			err = p.flush(c, &spare)
		case <-tick.C:
			p.queuePing()
			err = p.flush(c, &spare)
		case err = <-watch:
			watch = nil
		case <-p.ctx.Done():
			err = context.Cause(p.ctx)
		}
	}
	_ = c.Close()
	if watch != nil {
		<-watch
	}
	return err
}

func (p *peer) queuePing() {
	p.mu.Lock()
	if p.state == up {
		_, _ = p.appendLocked(wire.Header{}, &wire.Ping{})
	}
	p.mu.Unlock()
}

// flush writes everything queued, one write per batch: while a write is in
// the kernel, senders fill the other buffer, so under load one syscall
// carries many messages.
func (p *peer) flush(c net.Conn, spare *[]byte) error {
	for {
		p.mu.Lock()
		if p.broken != nil {
			err := p.broken
			p.mu.Unlock()
			return err
		}
		out := p.buf
		if len(out) == 0 {
			p.mu.Unlock()
			return nil
		}
		p.buf = (*spare)[:0]
		p.mu.Unlock()
		if err := c.SetWriteDeadline(time.Now().Add(p.l.cfg.WriteTimeout)); err != nil {
			return err
		}
		_, err := c.Write(out)
		p.l.met.writes.Inc()
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		*spare = out
		if cap(out) > maxIdleBuffer {
			*spare = nil
		}
	}
}

// callChPool recycles the channels of blocked Calls.
func (l *Links) getCallCh() chan callResult {
	if ch, ok := l.callChs.Get().(chan callResult); ok {
		return ch
	}
	return make(chan callResult, 1)
}

func (l *Links) putCallCh(ch chan callResult) { l.callChs.Put(ch) }

var errNoHello = errors.New("first frame is not a Hello")
