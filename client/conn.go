package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// conn is one connection to an agent. Who reads it: a caller waiting for
// its reply reads the connection itself when nobody else does, so that
// the reply wakes it straight from the network (a reader goroutine handing
// each reply over would cost a second wake-up, more than the round trip on
// a small machine). The watcher goroutine reads when no caller does:
// at once if a caller waits on someone else's turn, and otherwise once
// the connection has been left unread for watcherPark, so that the agent's
// pushes (blocking notifications, lost locks) are read when nobody calls.
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

	rmu        sync.Mutex
	reading    bool
	readingFor *call // the caller reading, whose context may interrupt it
	waiters    int
	lastRead   time.Time
	kick       chan struct{}

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
	return &conn{
		cl: cl, nc: nc, addr: addr, br: bufio.NewReaderSize(nc, readBuffer),
		dec: wire.NewClientDecoder(l), limits: l,
		kick: make(chan struct{}, 1), dead: make(chan struct{}), lastRead: time.Now(),
	}
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
		if cn.waiters > 0 && !cn.reading {
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
			cn.reading, cn.readingFor = true, cl
			cn.rmu.Unlock()
			stop := noStop
			if ctx.Done() != nil {
				stop = context.AfterFunc(ctx, func() { cn.interrupt(cl) })
			}
			err := cn.readOne()
			interrupted := !stop()
			cn.rmu.Lock()
			cn.reading, cn.readingFor = false, nil
			cn.lastRead = time.Now()
			if interrupted && err == nil {
				// ctx ended as the read returned a frame: interrupt may have
				// moved the deadline to the past after the frame was in,
				// and the next read, whoever's, would time out and drop
				// the connection. An interrupt still to come finds
				// readingFor changed and does nothing.
				_ = cn.nc.SetReadDeadline(time.Time{})
			}
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() && ctx.Err() != nil {
					_ = cn.nc.SetReadDeadline(time.Time{}) // interrupted by ctx: the frame is still buffered
					return ctx.Err()
				}
				cn.rmu.Unlock()
				cn.fail(err)
				cn.rmu.Lock()
				return errConnLost
			}
			continue
		}
		ch := cn.cl.waitChan(cl)
		cn.rmu.Unlock()
		var err error
		select {
		case <-ch:
		case <-cn.dead:
		case <-ctx.Done():
			err = ctx.Err()
		}
		cn.rmu.Lock()
		if err != nil && !cn.cl.isDone(cl) {
			return err
		}
	}
}

func noStop() bool { return true }

// interrupt stops the read of the caller waiting for cl, whose context
// ended, by moving the read deadline to the past. The caller clears it.
func (cn *conn) interrupt(cl *call) {
	cn.rmu.Lock()
	if cn.readingFor == cl {
		_ = cn.nc.SetReadDeadline(time.Unix(1, 0))
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
	timer := time.NewTimer(watcherPark)
	defer timer.Stop()
	for {
		cn.rmu.Lock()
		for {
			idle := time.Since(cn.lastRead)
			if !cn.reading && (cn.waiters > 0 || idle >= watcherPark) {
				break
			}
			wait := watcherPark - idle
			if cn.reading || wait <= 0 {
				wait = watcherPark
			}
			cn.rmu.Unlock()
			timer.Reset(wait)
			select {
			case <-cn.kick:
			case <-timer.C:
			case <-cn.dead:
				return
			}
			cn.rmu.Lock()
		}
		cn.reading = true
		cn.rmu.Unlock()
		err := cn.readOne()
		cn.rmu.Lock()
		cn.reading = false
		cn.lastRead = time.Now()
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
