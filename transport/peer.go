package transport

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
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

// pendingCall is a request waiting for its reply: either a blocked Call
// (slot; into, for a CallInto, is where its reply is decoded) or an
// asynchronous Go (cb).
type pendingCall struct {
	slot *callSlot
	into wire.Message
	cb   func(wire.Message, error)
}

// callSlot is where a Call's outcome lands: in res if it arrives before the
// caller blocks for it (a caller that read its own reply), else through ch.
// state says which (slotWaiting, slotBlocked, slotArrived), and Done, the
// Call's Waiter for Await, whether it came. Slots are recycled.
type callSlot struct {
	ch    chan callResult
	state atomic.Uint32
	res   callResult
}

const (
	slotWaiting uint32 = iota // no outcome yet, the caller not blocked
	slotBlocked               // the caller waits on ch
	slotArrived               // the outcome is in res (and in ch if the caller was blocked)
)

func (s *callSlot) Done() bool { return s.state.Load() == slotArrived }

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
	s := pc.slot
	s.res = callResult{m, err}
	if s.state.Swap(slotArrived) == slotBlocked {
		s.ch <- s.res // buffered, and the only send
	}
}

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
		ctx:      ctx,
		cancel:   cancel,
		rng:      rand.New(rand.NewPCG(l.cfg.Seed, hashName(name))),
		pending:  map[uint64]pendingCall{},
		upCh:     make(chan struct{}),
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
	p.sent.msgs[t]++
	p.sent.bytes[t] += uint64(len(buf) - before)
	wake := before == 0
	if p.lazy.Load() { // nobody was asked to write what is queued
		wake = true
		p.lazy.Store(false)
	}
	return wake, nil
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
		p.kick()
	}
	return err
}

// post queues a one-way message for the writer goroutine.
func (p *peer) post(m wire.Message) error {
	p.mu.Lock()
	if err := p.writableLocked(); err != nil {
		p.mu.Unlock()
		return err
	}
	wake, err := p.appendLocked(wire.Header{}, m)
	p.mu.Unlock()
	if wake {
		p.signal()
	}
	return err
}

// piggyback queues a one-way message to leave with the next message to
// the peer, or when the link's parked watcher next looks (within
// watcherPark), whichever comes first. Only a lending link whose reading
// nobody holds can promise the second: there the watcher is parked and
// looks at least that often (see inReader.watch). Otherwise it is a post.
func (p *peer) piggyback(m wire.Message) error {
	r := p.reader.Load()
	if r == nil || !r.lend || r.role.Load() != roleFree || r.nwaiters.Load() > 0 || r.crowd.Load() > 0 {
		return p.post(m)
	}
	p.mu.Lock()
	if err := p.writableLocked(); err != nil {
		p.mu.Unlock()
		return err
	}
	first, err := p.appendLocked(wire.Header{}, m)
	if first && err == nil {
		p.lazy.Store(true)
	}
	p.mu.Unlock()
	// The watcher takes the role and then looks at lazy; this stored lazy
	// and now looks at the role: one of the two sees the other, so the
	// bytes never wait for a watcher blocked in a read.
	if r.role.Load() != roleFree {
		p.push()
	}
	return err
}

// clearLazyLocked: what was queued is being written (or dropped). A load
// first: a store on every write would cost each message an atomic swap.
func (p *peer) clearLazyLocked() {
	if p.lazy.Load() {
		p.lazy.Store(false)
	}
}

// push writes now what piggyback queued, if it is still waiting.
func (p *peer) push() {
	if !p.lazy.Load() {
		return
	}
	p.mu.Lock()
	lazy := p.lazy.Load()
	p.lazy.Store(false)
	p.mu.Unlock()
	if lazy {
		p.kick()
	}
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
		p.kick()
	}
	return err
}

// call sends a request and waits for its reply, decoded into into if it is
// not nil.
func (p *peer) call(ctx context.Context, m, into wire.Message) (wire.Message, error) {
	slot := p.l.getCallSlot()
	defer p.l.putCallSlot(slot) // once nobody can send on it any more
	p.mu.Lock()
	if err := p.writableLocked(); err != nil {
		p.mu.Unlock()
		return nil, err
	}
	id := p.l.nextID.Add(1)
	wake, err := p.appendLocked(wire.Header{ID: id}, m)
	if err != nil {
		p.mu.Unlock()
		return nil, err
	}
	p.pending[id] = pendingCall{slot: slot, into: into}
	p.mu.Unlock()
	if wake {
		p.kick()
	}
	w := p.lender().Await(ctx, slot)
	if !slot.state.CompareAndSwap(slotWaiting, slotBlocked) {
		w.End() // it arrived: most often, read by this goroutine itself
		return slot.res.msg, slot.res.err
	}
	if ctx.Done() == nil { // a receive costs less than a select
		r := <-slot.ch
		w.End()
		return r.msg, r.err
	}
	select {
	case r := <-slot.ch:
		w.End()
		return r.msg, r.err
	case <-ctx.Done():
		w.End()
	}
	p.mu.Lock()
	_, mine := p.pending[id]
	delete(p.pending, id)
	p.mu.Unlock()
	if !mine { // someone took it to finish it: wait for that
		r := <-slot.ch
		return r.msg, r.err
	}
	return nil, ctx.Err()
}

// lender is Links.Lender for this peer: its link's reader, if it lends.
func (p *peer) lender() *Lender {
	if r := p.reader.Load(); r != nil && r.lend {
		return &r.lender
	}
	return nil
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
		ic, err := p.connect()
		if err == nil {
			err = p.up(ic)
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
		log.Debug("connected", "boot", ic.hello.BootID)
		go func() { ic.ended <- p.l.read(ic.r, p.addr) }()
		_, err = p.serve(ic)
		p.down(err)
		<-ic.ended // the reader goroutine has ended (serve closed the connection)
		if p.ctx.Err() != nil {
			return
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
	var next *inConn
	for served := false; ; {
		ic := next
		if ic == nil {
			select {
			case ic = <-p.incoming:
			case <-first.C:
				p.down(errNotDialled)
				continue
			case <-p.ctx.Done():
				return
			}
		}
		first.Stop()
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
		log.Info("connection lost", "err", err)
	}
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
func (p *peer) connect() (*inConn, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.l.cfg.DialTimeout)
	c, err := p.l.cfg.StreamLayer.Dial(ctx, p.addr)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	fr, hello, err := p.l.handshakeOut(p.ctx, c, p.name)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	ic := newInConn(c)
	ic.from, ic.hello, ic.attached = hello.Node, hello, true
	ic.r = newInReader(p.l, ic, fr, hello, lendsReading(c))
	return ic, nil
}

// up installs a handshaken connection. Replies queued while connecting for
// another boot of the peer are dropped with the rest of the buffer: the
// process that asked is gone.
func (p *peer) up(ic *inConn) error {
	c, hello := ic.conn, ic.hello
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
	p.raw = nil
	if tc, ok := c.(*net.TCPConn); ok {
		p.raw, _ = tc.SyscallConn()
	}
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

// down tears the connection down after err: the buffer is dropped and the
// pending calls fail, because their requests or replies may be lost.
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
	p.notifyDrainedLocked()
	if p.upClosed {
		p.upCh, p.upClosed = make(chan struct{}), false
	}
	p.mu.Unlock()
	if wasUp && p.ctx.Err() == nil && p.l.cfg.OnLinkDown != nil {
		p.l.cfg.OnLinkDown(p.name, err)
	}
	lost := ErrConnLost
	if cause := context.Cause(p.ctx); cause != nil {
		lost = cause
	}
	p.failPending(fmt.Errorf("%w: %s: %v", lost, p.name, err))
}

// maxIdleBuffer is the largest write buffer kept after it drained, so a
// burst does not pin megabytes per peer for ever.
const maxIdleBuffer = 1 << 20

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
		if len(out) == 0 || p.writing {
			// Empty, or an inline write is under way: it signals when done.
			p.notifyDrainedLocked()
			p.mu.Unlock()
			return nil
		}
		p.buf = (*spare)[:0]
		p.clearLazyLocked()
		p.writing = true
		p.mu.Unlock()
		err := c.SetWriteDeadline(time.Now().Add(p.l.cfg.WriteTimeout))
		if err == nil {
			_, err = c.Write(out)
		}
		p.mu.Lock()
		p.writing = false
		p.sent.writes++
		p.mu.Unlock()
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		*spare = out
		if cap(out) > maxIdleBuffer {
			*spare = nil
		}
	}
}

// kick gets newly queued bytes moving. While a reader goroutine is
// handling a batch of incoming messages, what handlers send waits for the
// end of the batch (Links.defer), so the replies to a burst of requests
// leave in one write. Otherwise, if the link is idle, the sender writes
// inline; if not, the writer goroutine takes over.
func (p *peer) kick() {
	if p.l.deferKick(p) {
		return
	}
	p.writeInline()
}

// writeInline writes what is queued from the calling goroutine with one
// non-blocking write, when the link is idle (no write under way) on a plain
// TCP connection: no hand-off to the writer goroutine, which would cost a
// goroutine switch. When the link is busy, not TCP, or the kernel takes only
// part of the bytes, the writer goroutine does the rest. It never blocks:
// Send's promise.
func (p *peer) writeInline() {
	p.mu.Lock()
	if p.state != up || p.writing || p.raw == nil || len(p.buf) == 0 || p.broken != nil {
		p.mu.Unlock()
		p.signal()
		return
	}
	out, raw := p.buf, p.raw
	p.buf, p.inlineBuf = p.inlineBuf[:0], nil
	p.clearLazyLocked()
	p.writing = true
	p.mu.Unlock()

	p.wbuf, p.wn, p.werr = out, 0, nil
	if err := raw.Write(p.rawWrite); err != nil && p.werr == nil {
		p.werr = err
	}
	n, err := p.wn, p.werr
	p.wbuf = nil

	p.mu.Lock()
	p.writing = false
	p.sent.writes++
	if n < len(out) && err == nil {
		// The socket is full: the rest goes before anything queued since,
		// and the writer goroutine waits for the socket.
		rest := make([]byte, 0, len(out)-n+len(p.buf))
		rest = append(append(rest, out[n:]...), p.buf...)
		p.buf = rest
	}
	if cap(out) <= maxIdleBuffer {
		p.inlineBuf = out[:0]
	}
	if err != nil {
		p.failLocked(fmt.Errorf("write: %w", err))
	}
	more := len(p.buf) > 0
	p.notifyDrainedLocked()
	p.mu.Unlock()
	if more {
		p.signal()
	}
}

// notifyDrainedLocked wakes the Flush callers once nothing is queued or
// being written, or the link is down (nothing will be written).
func (p *peer) notifyDrainedLocked() {
	if len(p.drained) == 0 || (p.state == up && (len(p.buf) > 0 || p.writing)) {
		return
	}
	for _, ch := range p.drained {
		close(ch)
	}
	p.drained = nil
}

// flushWait returns a channel closed when what is queued now has been
// written (or can no longer be).
func (p *peer) flushWait() <-chan struct{} {
	ch := make(chan struct{})
	p.mu.Lock()
	p.drained = append(p.drained, ch)
	p.notifyDrainedLocked()
	p.mu.Unlock()
	p.signal()
	return ch
}

// rawWriteFD is the syscall.RawConn callback of writeInline: it writes as
// much of p.wbuf as the socket takes now, and never waits for it to become
// writable. Only the goroutine that set p.writing runs it. (A method value
// made once, so the callback does not allocate per write.)
func (p *peer) rawWriteFD(fd uintptr) bool {
	for p.wn < len(p.wbuf) {
		m, e := syscall.Write(int(fd), p.wbuf[p.wn:])
		switch {
		case e == syscall.EINTR:
			continue
		case e == syscall.EAGAIN:
			return true
		case e != nil:
			p.werr = e
			return true
		}
		p.wn += m
	}
	return true
}

// getCallSlot and putCallSlot recycle the slots of blocked Calls.
func (l *Links) getCallSlot() *callSlot {
	if s, ok := l.callSlots.Get().(*callSlot); ok {
		s.state.Store(slotWaiting)
		return s
	}
	return &callSlot{ch: make(chan callResult, 1)}
}

func (l *Links) putCallSlot(s *callSlot) {
	s.res = callResult{} // do not keep the reply alive in the pool
	l.callSlots.Put(s)
}

var errNoHello = errors.New("first frame is not a Hello")
