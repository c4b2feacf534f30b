package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// conn is one connection to an agent. Who reads it: a caller waiting for
// its reply reads the connection itself when nobody else does, so that
// the reply wakes it straight from the network (a reader goroutine handing
// each reply over would cost a second wake-up, more than the round trip on
// a small machine). The watcher goroutine reads when no caller does: at
// once if a caller sleeps on someone else's turn whose answer is not in,
// and otherwise once the connection has been left unread for watcherPark,
// so that the agent's pushes (blocking notifications, lost locks) are read
// when nobody calls. The watcher is woken only for that: whoever stops
// reading arms its idle timer (see idle), so that a busy connection
// hardly ever wakes it, and it steps down as soon as no sleeping caller
// waits for an answer (the callers it woke read for themselves next
// time).
type conn struct {
	cl     *Client
	nc     net.Conn
	addr   string
	br     *bufio.Reader
	dec    *wire.Decoder
	limits wire.Limits

	wmu  sync.Mutex
	wbuf []byte
	// lazy holds requests nobody waits for (unlocks) until the next write
	// or, at the latest, lazyDelay: a client that unlocks and locks again
	// pays one write for both. flushT is armed while lazy is not empty.
	lazy   []byte
	flushT *time.Timer
	armed  bool
	// lastID is the highest request id written (or queued lazily) on the
	// connection, the hello's first: the agent takes only ids above every
	// one it read in the session, in the order they arrive.
	lastID uint64

	rmu     sync.Mutex
	reading bool
	// readingDone is the Done channel of the reading caller's context,
	// nil for the watcher or a context that never ends.
	readingDone <-chan struct{}
	// watched is the Done channel of the context whose end interrupts a
	// read of the connection (watchStop undoes that): made by the first
	// caller that reads with it and kept for the next, so that a caller
	// that makes request after request under one context (a worker's)
	// registers once, not once a read. Dropped when another context
	// reads, and when the watcher ends (unwatched: no more registering).
	watched   <-chan struct{}
	watchStop func() bool
	unwatched bool
	// interrupted: the context's end moved the read deadline to the past;
	// the reader clears it.
	interrupted bool
	waiters     int // callers in await
	// asleep counts the callers asleep in await (someone else was
	// reading) whose answer is not in yet: the watcher reads for them
	// while nobody else does. A call's sleeper field says it is counted;
	// both change under Client.mu, the count is read under rmu.
	asleep atomic.Int32
	// idle wakes the watcher to look whether the connection has been left
	// unread for watcherPark (since lastRead). Whoever stops reading arms
	// it for a park from then, unless it is armed (idleArmed) for at
	// least half a park more already: short reads move it once a half
	// park, not once a read (moving a timer a goroutine waits on may wake
	// the netpoller's thread). Reads that last (longReads: the last one
	// took over half a park) stop it as they start, so that it does not
	// wake the watcher in the middle of each. The watcher, woken with the
	// connection unread for less than a park, arms it for the rest.
	// Changed under rmu.
	idle      *time.Timer
	idleArmed bool
	idleAt    time.Time // when it fires, if armed
	lastRead  time.Time // when the last reader stopped
	readFrom  time.Time // when the reading reader started
	longReads bool
	kick      chan struct{}

	dead    chan struct{} // closed when the connection failed
	deadErr error         // why; set before dead closes
	once    sync.Once
}

// watcherPark is how long the connection may go unread while no caller
// waits before the watcher reads it: pushes wait at most that long.
const watcherPark = time.Millisecond

// readBuffer holds any frame an agent sends (its frames are bounded by its
// MaxFrame, 64 KiB by default) with room to spare.
const readBuffer = 128 << 10

func newConn(cl *Client, nc net.Conn, addr string) *conn {
	l := wire.DefaultLimits()
	l.MaxFrame = readBuffer - wire.PrefixSize
	cn := &conn{
		cl: cl, nc: nc, addr: addr, br: bufio.NewReaderSize(nc, readBuffer),
		dec: wire.NewClientDecoder(l), limits: l,
		kick: make(chan struct{}, 1), dead: make(chan struct{}), idle: time.NewTimer(watcherPark),
	}
	now := time.Now()
	cn.idleArmed, cn.idleAt, cn.lastRead = true, now.Add(watcherPark), now
	return cn
}

// lazyDelay bounds how long an unlock waits to leave with the next
// request.
const lazyDelay = 20 * time.Microsecond

// send writes one request frame, with the lazy ones queued before it.
func (cn *conn) send(h wire.Header, m wire.Message) error {
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	return cn.sendLocked(h, m)
}

// sendLocked is send for a caller that holds cn.wmu.
func (cn *conn) sendLocked(h wire.Header, m wire.Message) error {
	b, err := wire.AppendFrame(append(cn.wbuf[:0], cn.lazy...), h, m, &cn.limits)
	if err != nil {
		return err
	}
	cn.lazy = cn.lazy[:0]
	_, werr := cn.nc.Write(b)
	if cap(b) <= 64<<10 {
		cn.wbuf = b[:0]
	}
	if werr != nil {
		cn.fail(werr)
		return fmt.Errorf("%w: %w", errConnLost, werr)
	}
	return nil
}

// queueLazyLocked queues a request nobody waits for, to leave with the
// next write or within lazyDelay. Caller holds cn.wmu.
func (cn *conn) queueLazyLocked(h wire.Header, m wire.Message) error {
	b, err := wire.AppendFrame(cn.lazy, h, m, &cn.limits)
	if err != nil {
		return err
	}
	cn.lazy = b
	if !cn.armed {
		cn.armed = true
		if cn.flushT == nil {
			cn.flushT = time.AfterFunc(lazyDelay, cn.flushLazy)
		} else {
			cn.flushT.Reset(lazyDelay)
		}
	}
	return nil
}

// flushLazy writes what waited for a next request that did not come.
func (cn *conn) flushLazy() {
	cn.wmu.Lock()
	cn.armed = false
	if len(cn.lazy) == 0 {
		cn.wmu.Unlock()
		return
	}
	out := cn.lazy
	cn.lazy = nil
	_, err := cn.nc.Write(out)
	cn.wmu.Unlock()
	if err != nil {
		cn.fail(err)
	}
}

// errConnLost: the connection failed; the call waits for the next one.
var errConnLost = errors.New("client: connection to the agent lost")

// readFrame reads the next frame: header, message (valid until the next
// read) and the bytes to discard once it is handled.
func (cn *conn) readFrame() (wire.Header, wire.Message, int, error) {
	prefix, err := cn.br.Peek(wire.PrefixSize)
	if err != nil {
		return wire.Header{}, nil, 0, err
	}
	n, err := wire.FrameLength(prefix, &cn.limits)
	if err != nil {
		return wire.Header{}, nil, 0, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	frame, err := cn.br.Peek(wire.PrefixSize + n)
	if err != nil {
		return wire.Header{}, nil, 0, err
	}
	h, m, err := cn.dec.Decode(frame[wire.PrefixSize:])
	if err != nil {
		return wire.Header{}, nil, 0, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	return h, m, wire.PrefixSize + n, nil
}

// readOne reads and handles one frame.
func (cn *conn) readOne() error {
	h, m, n, err := cn.readFrame()
	if err != nil {
		return err
	}
	cn.cl.dispatch(cn, h, m)
	_, _ = cn.br.Discard(n)
	return nil
}

// await waits until cl is answered, the connection fails (errConnLost:
// the call waits for the next connection) or ctx ends.
func (cn *conn) await(ctx context.Context, cl *call) error {
	cn.rmu.Lock()
	cn.waiters++
	defer func() {
		cn.waiters--
		if cn.asleep.Load() > 0 && !cn.reading {
			cn.wakeWatcher()
		}
		cn.rmu.Unlock()
	}()
	for {
		if cn.cl.isDone(cl) {
			return nil
		}
		select {
		case <-cn.dead:
			return errConnLost
		default:
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !cn.reading {
			cn.watchLocked(ctx)
			cn.startReadingLocked(ctx.Done())
			cn.rmu.Unlock()
			// Frames for others (another caller's answer, a push) before
			// this one's: read on, the reading kept (no timer moves).
			err := cn.readOne()
			for err == nil && !cn.cl.isDone(cl) {
				err = cn.readOne()
			}
			cn.rmu.Lock()
			cn.stopReadingLocked()
			if cn.interrupted {
				// ctx ended as the read went on: the deadline is in the
				// past, and the next read, whoever's, would time out and
				// drop the connection if the frame came in first.
				cn.interrupted = false
				_ = cn.nc.SetReadDeadline(time.Time{})
			}
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() && ctx.Err() != nil {
					return ctx.Err() // interrupted by ctx: the frame is still buffered
				}
				cn.rmu.Unlock()
				cn.fail(err)
				cn.rmu.Lock()
				return errConnLost
			}
			continue
		}
		ch := cn.cl.sleep(cn, cl)
		cn.rmu.Unlock()
		var err error
		select {
		case <-ch:
		case <-cn.dead:
		case <-ctx.Done():
			err = ctx.Err()
		}
		cn.cl.wake(cl)
		cn.rmu.Lock()
		if err != nil && !cn.cl.isDone(cl) {
			return err
		}
	}
}

// startReadingLocked takes the reading of the connection, for a caller
// whose context ends when done closes (nil: the watcher, or a context
// that never ends). Caller holds rmu.
func (cn *conn) startReadingLocked(done <-chan struct{}) {
	cn.reading, cn.readingDone = true, done
	cn.readFrom = time.Now()
	if cn.longReads && cn.idleArmed {
		cn.idleArmed = false
		cn.idle.Stop()
	}
}

// watchLocked makes the end of ctx interrupt the read its caller is
// about to make, unless it does already. Caller holds rmu.
func (cn *conn) watchLocked(ctx context.Context) {
	done := ctx.Done()
	if done == nil || done == cn.watched || cn.unwatched {
		return
	}
	if cn.watchStop != nil {
		cn.watchStop()
	}
	cn.watched = done
	cn.watchStop = context.AfterFunc(ctx, func() { cn.interrupt(done) })
}

// unwatchLocked drops the registration: the connection is over. Caller
// holds rmu.
func (cn *conn) unwatchLocked() {
	if cn.watchStop != nil {
		cn.watchStop()
	}
	cn.watched, cn.watchStop, cn.unwatched = nil, nil, true
}

// stopReadingLocked leaves the reading: the watcher reads after
// watcherPark unless someone else reads first. Caller holds rmu.
func (cn *conn) stopReadingLocked() {
	cn.reading, cn.readingDone = false, nil
	now := time.Now()
	cn.lastRead = now
	cn.longReads = now.Sub(cn.readFrom) > watcherPark/2
	if !cn.idleArmed || cn.idleAt.Sub(now) < watcherPark/2 {
		cn.armIdleLocked(now, watcherPark)
	}
}

// armIdleLocked makes the idle timer fire d after now. Caller holds rmu.
func (cn *conn) armIdleLocked(now time.Time, d time.Duration) {
	cn.idleArmed, cn.idleAt = true, now.Add(d)
	cn.idle.Reset(d)
}

// interrupt stops the read of the caller whose context ended (its Done
// channel is done) by moving the read deadline to the past. The reader
// clears it.
func (cn *conn) interrupt(done <-chan struct{}) {
	cn.rmu.Lock()
	if cn.reading && cn.readingDone == done {
		cn.interrupted = true
		_ = cn.nc.SetReadDeadline(time.Unix(1, 0))
	}
	if cn.watched == done {
		cn.watched, cn.watchStop = nil, nil // spent
	}
	cn.rmu.Unlock()
}

// wakeWatcher tells the watcher someone waits with nobody reading. Caller
// holds rmu.
func (cn *conn) wakeWatcher() {
	select {
	case cn.kick <- struct{}{}:
	default:
	}
}

// watch is the watcher goroutine.
func (cn *conn) watch() {
	defer func() {
		cn.rmu.Lock()
		cn.unwatchLocked()
		cn.idle.Stop()
		cn.rmu.Unlock()
	}()
	for {
		cn.rmu.Lock()
		idle := false
		for cn.reading || (cn.asleep.Load() == 0 && !idle) {
			cn.rmu.Unlock()
			select {
			case <-cn.kick:
			case <-cn.idle.C:
				cn.rmu.Lock()
				cn.idleArmed = false
				if !cn.reading { // else the reader arms it again as it stops
					now := time.Now()
					if left := watcherPark - now.Sub(cn.lastRead); left > 0 {
						cn.armIdleLocked(now, left)
					} else {
						idle = true
					}
				}
				cn.rmu.Unlock()
			case <-cn.dead:
				return
			}
			cn.rmu.Lock()
		}
		cn.startReadingLocked(nil)
		cn.rmu.Unlock()
		err := cn.readOne()
		cn.rmu.Lock()
		cn.stopReadingLocked()
		cn.rmu.Unlock()
		if err != nil {
			cn.fail(err)
			return
		}
	}
}

// fail ends the connection once; the client reconnects.
func (cn *conn) fail(err error) {
	cn.once.Do(func() {
		cn.deadErr = err
		close(cn.dead)
		_ = cn.nc.Close()
		cn.cl.connDown(cn, err)
	})
}
