package transport

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Lending the reading of a connection to a waiting goroutine.
//
// The reader goroutine of an accepted connection sits in the netpoller; when
// a reply arrives it wakes, reads it and wakes the caller waiting for it: two
// goroutine wake-ups per reply where a plain ping-pong has one, and on two Ps
// the second costs more than the network round trip itself (see
// BenchmarkTCPPingPongHandoff). So a Call waiting for its reply may take
// over the reading of the peer's connection and be woken by the netpoller
// itself.
//
// Exactly one goroutine holds the reading role of a connection at a time,
// and it reads and handles frames in order, so the ordering argument of the
// package is unchanged; only which goroutine runs the Handler changes. The
// role is held by the connection's own reader (the watcher), by a helper,
// or by nobody:
//
//   - A helper takes the role only when nobody holds it. If the watcher
//     holds it, the helper marks itself wanted and waits the usual way; the
//     watcher, after its next batch, steps down and parks, so the helper's
//     next wait reads for itself.
//   - A parked watcher comes back after watcherPark if nobody holds the
//     role, so traffic that arrives while no helper reads (requests from the
//     peer, notifications) waits at most that long; and at once when a
//     helper leaves with others wanting the role, or failed.
//   - A helper reads for at most helperBudget (the reading deadline), then
//     leaves: its outcome may come from elsewhere (another connection, a
//     local event), and it must not sit in the netpoller long for it.
//   - A helper that meets a connection error leaves it to the watcher, which
//     ends the connection as it always has (log, metric, failed calls).
//
// Only plain TCP connections lend their reading; TLS and in-process ones
// keep their reader goroutine (their wake-ups are not the bottleneck, and
// synctest tests keep their exact timing).

// The two durations trade the round trip against the latency of traffic
// nobody waits for. Measured with bench/compare (dlm only, 8 s runs, while
// dlm's Lock still lent its waits the way Call does; see dlm/doc.go): with
// a 200 µs park and a 1 ms budget, the readers workload, where few
// goroutines wait on the network and most traffic is unsolicited (blocking
// notifications, requests to this node as master), fell from ~505k to
// ~350k cycles/s; with 20 µs and 100 µs it is back within the noise of the
// runs without lending, uncontended's p99 is lower (1.3 vs 1.65 ms) and hot
// gains 10-25 %. A 10 µs park wakes the watcher so often that the link
// round trip suffers.
const (
	// watcherPark is how long a watcher that stepped down stays parked
	// before it reads again if no helper holds the role.
	watcherPark = 20 * time.Microsecond
	// helperBudget bounds how long one await reads (some ten round trips);
	// longer waits go back to the watcher, and a cancelled context is
	// noticed no later than this.
	helperBudget = 100 * time.Microsecond
)

// Roles, in inReader.role: who reads a connection.
const (
	roleWatcher uint32 = iota // the connection's reader goroutine
	roleHelper                // a goroutine in await
	roleFree                  // nobody: the watcher is parked
)

// errBudget ends a helper's turn when helperBudget is spent.
var errBudget = errors.New("transport: helper's reading budget spent")

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
	wanted atomic.Bool           // a helper found the role taken
	failed atomic.Pointer[error] // a helper's connection error, for the watcher
	resume chan struct{}         // 1-buffered: wakes the parked watcher
}

func newInReader(l *Links, ic *inConn, fr *frameReader, hello *wire.Hello, lend bool) *inReader {
	return &inReader{
		l: l, ic: ic, hello: hello, fr: fr, lend: lend,
		dec:    wire.NewDecoder(l.cfg.Limits),
		resume: make(chan struct{}, 1),
	}
}

// watch is the reader goroutine's loop: read and handle batches while it
// holds the role, step down for helpers, park while one reads. It returns
// the error that ended the connection.
func (r *inReader) watch() error {
	park := time.NewTimer(watcherPark)
	defer park.Stop()
	for {
		if err := r.failed.Load(); err != nil {
			return *err
		}
		if r.role.Load() != roleWatcher && !r.role.CompareAndSwap(roleFree, roleWatcher) {
			r.park(park) // a helper reads
			continue
		}
		select {
		case <-r.resume: // a wake-up that crossed the timer's: stale now
		default:
		}
		if err := r.batch(); err != nil {
			return err
		}
		if r.wanted.Swap(false) {
			r.role.Store(roleFree)
			r.park(park)
		}
	}
}

func (r *inReader) park(t *time.Timer) {
	t.Reset(watcherPark)
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

// help reads on behalf of a waiting goroutine until done reports true or the
// budget is spent, if the role is free; otherwise it only asks for it.
func (r *inReader) help(done func() bool) {
	if r.role.Load() != roleFree || !r.role.CompareAndSwap(roleFree, roleHelper) {
		if !r.wanted.Load() {
			r.wanted.Store(true)
		}
		return
	}
	if r.failed.Load() != nil { // the watcher is on its way to end it
		r.role.Store(roleFree)
		return
	}
	r.l.met.lentReads.Inc()
	r.startBudget()
	var err error
	for err == nil && !done() {
		err = r.batch()
	}
	r.fr.dc.helping = false
	if err != nil && !errors.Is(err, errBudget) {
		failed := err // a copy, so that err itself does not escape
		r.failed.Store(&failed)
	}
	r.role.Store(roleFree)
	if r.wanted.Swap(false) || err != nil {
		r.wake()
	}
}

// startBudget starts a helper's turn. Moving a read deadline is a runtime
// timer update, so a budget deadline still half a budget or more away is
// kept: a turn lasts between helperBudget/2 and helperBudget.
func (r *inReader) startBudget() {
	dc := &r.fr.dc
	if now := time.Now(); dc.budget.Before(now.Add(helperBudget / 2)) {
		dc.budget = now.Add(helperBudget)
	}
	dc.helping = true
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
		err = r.l.deliverReply(r.hello.Node, r.dec, payload, h.ID)
	} else {
		var m wire.Message
		if _, m, err = r.dec.Decode(payload); err == nil {
			r.count(h.Type, payload)
			return r.l.dispatch(r.ic, r.hello, h, m)
		}
	}
	if err == nil {
		r.count(h.Type, payload)
	}
	return err
}

func (r *inReader) count(t wire.Type, payload []byte) {
	r.l.met.recvMsgs[t].Inc()
	r.l.met.recvBytes[t].Add(float64(len(payload) + wire.PrefixSize))
}
