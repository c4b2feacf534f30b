package transport

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Lending the reading of a connection to a waiting goroutine (the design,
// and the measurements behind its constants, are in
// docs/design/transport.md).
//
// The reader goroutine of a connection sits in the netpoller; handing each
// reply from it to the caller waiting for it is a second goroutine wake-up
// per round trip, which on two Ps costs more than the network round trip
// itself (BenchmarkTCPPingPongHandoff). So a goroutine waiting for what a
// peer sends (Links.Await) may take over the reading of the connection and
// be woken by the netpoller itself.
//
// Exactly one goroutine holds the reading role of a connection at a time,
// and it reads and handles frames in order, so the ordering argument of the
// package is unchanged; only which goroutine runs the Handler changes. The
// role is held by the connection's own reader (the watcher), by a helper,
// or by nobody:
//
//   - A helper takes the role only when nobody holds it. If the watcher
//     holds it, the helper registers as a waiter and waits the usual way.
//   - The watcher keeps reading while any registered waiter is not done:
//     stepping down then would leave the others blocked with nobody
//     reading for them. Once all are done it steps down and parks. A
//     waiter registers under the same mutex the watcher checks under, so
//     none is missed. Past maxStepDownScan waiters the watcher does not
//     check, and new waiters only count themselves in crowd (an atomic
//     they increment before they look at the role, and the watcher reads
//     after it freed the role), which spares the mutex under load.
//   - A parked watcher comes back after watcherPark if nobody holds the
//     role, so traffic that arrives while no helper reads (requests from the
//     peer, notifications) waits at most that long; and at once when a
//     helper leaves with waiters registered (itself included, if it was
//     interrupted first), or failed.
//   - A helper reads until its waiter is done, its context ends, or it is
//     interrupted: its outcome may come from elsewhere (another connection,
//     a local event), and then whoever decided it calls Lender.Interrupt,
//     which sets the read deadline in the past under the helper (see
//     interrupter), rather than each turn being bounded by a short read
//     deadline, whose upkeep costs a few percent of a round trip.
//   - A helper that meets a connection error leaves it to the watcher, which
//     ends the connection as it always does (log, metric, failed calls).
//
// Only plain TCP connections lend their reading; TLS and in-process ones
// keep their reader goroutine (their wake-ups are not the bottleneck, and
// synctest tests keep their exact timing).

// watcherPark is how long a watcher that stepped down stays parked before
// it reads again if no helper holds the role. It trades the round trip
// against the latency of traffic nobody waits for: much longer starves
// unsolicited traffic (blocking notifications, requests to this node as
// master), much shorter wakes the watcher so often that the round trip
// suffers.
const watcherPark = 20 * time.Microsecond

// maxStepDownScan: with more waiters registered than this, the watcher does
// not look whether they are all done (under load one nearly always waits);
// it keeps reading, and looks again after a later batch.
const maxStepDownScan = 8

// Roles, in inReader.role: who reads a connection.
const (
	roleWatcher uint32 = iota // the connection's reader goroutine
	roleHelper                // a goroutine in Await
	roleFree                  // nobody: the watcher is parked
)

// errInterrupted ends a helper's turn when it is interrupted.
var errInterrupted = errors.New("transport: helper's reading interrupted")

// inReader is the reading side of an accepted connection after its
// handshake. fr, dec and flush belong to whoever holds the role. The role
// is an atomic, not under a mutex, because under load every waiting Call
// asks for it.
type inReader struct {
	l     *Links
	ic    *inConn
	hello *wire.Hello
	fr    *frameReader
	dec   *wire.Decoder
	flush []*peer
	lend  bool // helpers may take the role

	role   atomic.Uint32
	wanted atomic.Bool           // goroutines wait for what the watcher reads
	failed atomic.Pointer[error] // a helper's connection error, for the watcher
	resume chan struct{}         // 1-buffered: wakes the parked watcher
	intr   interrupter           // ends a helper's read
	// owner is the peer whose link this connection is, once it is: its
	// pending calls are the ones replies on it answer (saves a lookup by
	// name per reply).
	owner atomic.Pointer[peer]
	// interruptFn is interrupt as a func value, made once: context.AfterFunc
	// takes one per helper's turn.
	interruptFn func()
	lender      Lender
	// recv counts what is handled of the peer's send session (session.go).
	recv *recvCounter

	// mu guards the waiters: goroutines blocked until what this
	// connection brings makes their done report true, keyed by a token.
	// The watcher steps down only once all of them are done, so that it
	// never leaves a blocked waiter without a reader; a waiter registers
	// only after failing to take the role, under mu, so none is missed.
	mu      sync.Mutex
	waiters map[uint64]Waiter
	token   uint64
	// nwaiters is len(waiters); crowd counts the waiters that came while
	// maxStepDownScan were registered, and waited unregistered.
	nwaiters atomic.Int32
	crowd    atomic.Int32
}

func newInReader(l *Links, ic *inConn, fr *frameReader, hello *wire.Hello, lend bool) *inReader {
	r := &inReader{
		l: l, ic: ic, hello: hello, fr: fr, lend: lend,
		dec:    wire.NewDecoder(l.cfg.Limits),
		resume: make(chan struct{}, 1),
		intr:   interrupter{conn: fr.dc.Conn},
	}
	r.interruptFn, r.lender.r = r.interrupt, r
	fr.dc.intr = &r.intr
	return r
}

// watch is the reader goroutine's loop: read and handle batches while it
// holds the role, step down for helpers, park while one reads. It returns
// the error that ended the connection.
func (r *inReader) watch() error {
	park := time.NewTimer(r.l.cfg.watcherPark)
	defer park.Stop()
	for {
		if err := r.failed.Load(); err != nil {
			return *err
		}
		if r.role.Load() != roleWatcher {
			took := r.role.CompareAndSwap(roleFree, roleWatcher)
			// Piggybacked bytes wait for the next message or for this
			// look (peer.piggyback): before reading, or parking again.
			if p := r.owner.Load(); p != nil {
				p.push()
			}
			if !took {
				r.park(park) // a helper reads
				continue
			}
		}
		select {
		case <-r.resume: // a wake-up that crossed the timer's: stale now
		default:
		}
		if err := r.batch(); err != nil {
			return err
		}
		if r.wanted.Load() && r.stepDown() {
			r.park(park)
		}
	}
}

// stepDown frees the role once every registered waiter is done: the
// goroutines it woke are likely to wait again soon, and then read for
// themselves.
func (r *inReader) stepDown() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.waiters) > maxStepDownScan || r.crowd.Load() > 0 {
		return false // some are surely still waiting; keep reading for them
	}
	for _, w := range r.waiters {
		if !w.Done() {
			return false
		}
	}
	r.wanted.Store(false)
	r.role.Store(roleFree)
	// A crowd waiter counts itself before it looks at the role: if it
	// counted after the check above, it may have seen the role still taken,
	// and is blocked; read for it.
	if r.crowd.Load() > 0 && r.role.CompareAndSwap(roleFree, roleWatcher) {
		r.wanted.Store(true)
		return false
	}
	return true
}

func (r *inReader) park(t *time.Timer) {
	t.Reset(r.l.cfg.watcherPark)
	select {
	case <-r.resume:
	case <-t.C:
	}
}

func (r *inReader) wake() {
	select {
	case r.resume <- struct{}{}:
	default:
	}
}

// help reads on behalf of a waiting goroutine until w is done, ctx ends or
// the reading is interrupted, if the role is free. If w is still not done
// then, the goroutine is registered as a waiter and must call unregister
// with the token (non-zero) once it stops waiting.
func (r *inReader) help(ctx context.Context, w Waiter) (token uint64) {
	if ctx.Err() != nil {
		return 0
	}
	if !r.take() {
		if token = r.register(w); token != 0 {
			return token
		}
	}
	if r.failed.Load() != nil { // the watcher is on its way to end it
		r.role.Store(roleFree)
		r.wake()
		return 0
	}
	r.l.met.lentReads.Add(1)
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, r.interruptFn)
	}
	r.fr.dc.helping = true
	var err error
	for err == nil && !w.Done() {
		err = r.batch()
	}
	r.fr.dc.helping = false
	r.intr.pending.Store(false) // an interrupt for this turn is spent
	if stop != nil {
		stop()
	}
	if err != nil && !errors.Is(err, errInterrupted) {
		failed := err // a copy, so that err itself does not escape
		r.failed.Store(&failed)
	}
	r.mu.Lock()
	if !w.Done() {
		token = r.addLocked(w)
		r.wanted.Store(true)
	}
	r.role.Store(roleFree)
	// crowd is read after the role is freed, as in stepDown.
	others := len(r.waiters) > 0 || r.crowd.Load() > 0
	r.mu.Unlock()
	if others || err != nil {
		r.wake()
	}
	return token
}

// interrupt ends the blocking read of the helper holding the role, if any:
// its waiter's outcome came from elsewhere, or its context ended. Whichever
// helper holds the role then is interrupted; one that was not meant finds
// its waiter not done and waits the usual way.
func (r *inReader) interrupt() {
	if r.role.Load() == roleHelper {
		r.intr.interrupt()
	}
}

// interrupter lets another goroutine end a helper's blocking read. The
// helper announces a read in inRead and then looks at pending; the
// interrupter sets pending and then looks at inRead: one of them sees the
// other (the atomics are sequentially consistent), so either the helper
// does not block or its read deadline is set in the past under it.
type interrupter struct {
	conn    net.Conn
	pending atomic.Bool // the current turn is interrupted
	inRead  atomic.Bool // the helper is in, or about to enter, a read
}

// enter is called by the helper before a blocking read; true if it must
// not read but leave. The helper clears inRead after the read.
func (i *interrupter) enter() bool {
	i.inRead.Store(true)
	if i.pending.Load() {
		i.inRead.Store(false)
		return true
	}
	return false
}

func (i *interrupter) interrupt() {
	i.pending.Store(true)
	if i.inRead.Load() {
		_ = i.conn.SetReadDeadline(time.Unix(1, 0))
	}
}

func (r *inReader) take() bool {
	if r.role.Load() != roleFree || !r.role.CompareAndSwap(roleFree, roleHelper) {
		return false
	}
	r.intr.pending.Store(false) // one meant for an earlier turn
	return true
}

// register adds a waiter that found the role taken, and asks the watcher to
// step down once the waiters are done; 0 if the role was freed meanwhile and
// the caller took it.
func (r *inReader) register(w Waiter) uint64 {
	if r.crowd.Load() > 0 || r.nwaiters.Load() >= maxStepDownScan {
		// So many wait that the watcher will not step down for a while:
		// only count this one (no mutex, no map), so that it does not
		// while this one waits. If the role is free after all, take the
		// slow path below.
		r.crowd.Add(1)
		if r.role.Load() != roleFree {
			return crowdToken
		}
		r.crowd.Add(-1)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.take() {
		return 0
	}
	r.wanted.Store(true)
	return r.addLocked(w)
}

// crowdToken marks a waiter counted in crowd rather than registered.
const crowdToken = ^uint64(0)

func (r *inReader) addLocked(w Waiter) uint64 {
	if r.waiters == nil {
		r.waiters = map[uint64]Waiter{}
	}
	r.token++
	r.waiters[r.token] = w
	r.nwaiters.Store(int32(len(r.waiters)))
	return r.token
}

// unregister ends a registered wait.
func (r *inReader) unregister(token uint64) {
	if token == crowdToken {
		r.crowd.Add(-1)
		return
	}
	r.mu.Lock()
	delete(r.waiters, token)
	r.nwaiters.Store(int32(len(r.waiters)))
	r.mu.Unlock()
}

// batch reads at least one frame (blocking if none is buffered), handles
// every frame already buffered, then writes out what the handlers queued,
// before whoever holds the role reads from the socket again.
func (r *inReader) batch() error {
	payload, err := r.fr.next()
	if err != nil {
		return err
	}
	r.l.beginBatch()
	for {
		if err = r.handle(payload); err != nil || !r.fr.hasFrame() {
			break
		}
		if payload, err = r.fr.next(); err != nil {
			break
		}
	}
	r.flush = r.l.endBatch(r.flush)
	return err
}

// handle decodes one frame and dispatches it. A reply is decoded once, by
// deliverReply, in the form its caller needs.
func (r *inReader) handle(payload []byte) error {
	h, err := r.dec.DecodeHeader(payload)
	if err != nil {
		return err
	}
	if h.Reply {
		err = r.l.deliverReply(r.owner.Load(), r.hello.Node, r.dec, payload, h)
		if err == nil {
			r.l.met.countRecv(h.Type, len(payload))
		}
	} else {
		var m wire.Message
		if _, m, err = r.dec.Decode(payload); err == nil {
			r.l.met.countRecv(h.Type, len(payload))
			err = r.l.dispatch(r.ic, r.hello, r.owner.Load(), h, m)
		}
	}
	if err == nil && h.Type != wire.TypePing {
		r.handled()
	}
	return err
}

// handled counts a frame of the peer's session as handled, and
// acknowledges every ackEvery of them.
func (r *inReader) handled() {
	c := r.recv
	if c == nil {
		return
	}
	if n := c.n.Add(1); n-c.acked.Load() >= ackEvery {
		if p := r.owner.Load(); p != nil {
			p.queueAck(c)
		}
	}
}
