//go:build linux

package clientport

import (
	"errors"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"
)

// poller watches a server's idle client connections: one goroutine and
// one epoll instance for all of them, where each would otherwise keep a
// goroutine (and its stack) blocked in a read. A connection is watched
// from its ClientHello on (TLS connections are not: crypto/tls may hold
// decrypted bytes the socket no longer shows). Every sweep period the
// poller looks for readers blocked between frames since the sweep before
// and interrupts them; such a reader parks its connection (registers it
// EPOLLIN|EPOLLRDHUP|EPOLLONESHOT), gives back its buffers and exits.
// When the socket has something to read, or the peer hangs up, the poller
// starts a reader again; Go's own netpoller still serves its reads and
// writes, which never stopped: pushes to a parked connection are written
// as to any other.
//
// The epoll instance is itself waited on through Go's netpoller (an
// *os.File of a non-blocking epoll fd), so the poller holds no thread
// while it waits, its read deadline is the sweep's clock, and closing the
// file stops it.
type poller struct {
	every time.Duration // the sweep period (Config.ParkAfter)
	wake  func(*conn)   // starts a reader for a connection unparked
	log   *slog.Logger
	gauge interface {
		Inc()
		Dec()
	}

	mu     sync.Mutex
	ep     *os.File // the epoll instance, made on the first watch; nil before
	epfd   int
	closed bool // Close was called, or the poller failed: no more parking
	// slots are the watched connections; an event names its connection
	// by slot and the slot's generation (conn.poll.gen), so that an event
	// read before its connection was released does not wake another.
	slots  []*conn
	free   []int32
	gen    int32
	parked int
	done   chan struct{} // closed when the goroutine ends
}

// pollState is a connection's place in the poller, guarded by poller.mu.
type pollState struct {
	slot       int32 // index in slots, plus one; 0: not watched
	gen        int32
	registered bool // its socket is in the epoll set (armed or not)
	parked     bool // no goroutine reads it: the poller wakes it
	closing    bool // its socket is closing: never park it again
}

const pollEvents = syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT

func newPoller(every time.Duration, wake func(*conn), log *slog.Logger, gauge interface {
	Inc()
	Dec()
}) *poller {
	if every <= 0 {
		return nil
	}
	return &poller{every: every, wake: wake, log: log, gauge: gauge}
}

// watch makes c a connection that may park. It reports false if it may
// not (the poller is closed, or could not start).
func (p *poller) watch(c *conn) bool {
	if p == nil || c.w.raw == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || c.poll.closing {
		return false
	}
	if p.ep == nil {
		if err := p.start(); err != nil {
			p.closed = true
			p.log.Warn("no poller for idle client connections; each keeps a goroutine", "err", err)
			return false
		}
	}
	var i int32
	if n := len(p.free); n > 0 {
		i, p.free = p.free[n-1], p.free[:n-1]
	} else {
		i = int32(len(p.slots))
		p.slots = append(p.slots, nil)
	}
	p.slots[i] = c
	p.gen++
	c.poll.slot, c.poll.gen = i+1, p.gen
	return true
}

// start makes the epoll instance and starts the goroutine. mu is held.
func (p *poller) start() error {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return os.NewSyscallError("epoll_create1", err)
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return os.NewSyscallError("fcntl", err)
	}
	p.ep, p.epfd = os.NewFile(uintptr(fd), "clientport-poller"), fd
	p.done = make(chan struct{})
	go p.run(p.ep)
	return nil
}

// park registers c's socket for one readiness event. The caller, c's
// reader, has given back its buffers and exits if park reports true.
func (p *poller) park(c *conn) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || c.poll.closing || c.poll.slot == 0 {
		return false
	}
	ev := syscall.EpollEvent{Events: pollEvents, Fd: c.poll.slot - 1, Pad: c.poll.gen}
	op := syscall.EPOLL_CTL_ADD
	if c.poll.registered {
		op = syscall.EPOLL_CTL_MOD // disarmed by its last event, still in the set
	}
	var err error
	// Control holds the socket open while it runs: its fd cannot be
	// closed and reused under the registration.
	if cerr := c.w.raw.Control(func(fd uintptr) { err = syscall.EpollCtl(p.epfd, op, int(fd), &ev) }); cerr != nil {
		return false
	}
	if err != nil {
		p.log.Warn("cannot park an idle client connection", "err", os.NewSyscallError("epoll_ctl", err))
		return false
	}
	c.poll.registered, c.poll.parked = true, true
	p.parked++
	p.gauge.Inc()
	return true
}

// release takes c's socket out of the epoll set before it closes, and
// reports whether c was parked: then no goroutine reads it, and the
// caller must start one to end it.
func (p *poller) release(c *conn) (parked bool) {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c.poll.closing = true
	if c.poll.registered && !p.closed {
		_ = c.w.raw.Control(func(fd uintptr) { _ = syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_DEL, int(fd), nil) })
	}
	c.poll.registered = false
	return p.unparkLocked(c)
}

func (p *poller) unparkLocked(c *conn) bool {
	if !c.poll.parked {
		return false
	}
	c.poll.parked = false
	p.parked--
	p.gauge.Dec()
	return true
}

// forget frees c's slot; c has ended.
func (p *poller) forget(c *conn) {
	if p == nil || c.poll.slot == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := c.poll.slot - 1; p.slots[i] == c {
		p.slots[i] = nil
		p.free = append(p.free, i)
	}
	c.poll.slot = 0
	p.unparkLocked(c)
}

// parkedConns is how many connections are parked now.
func (p *poller) parkedConns() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.parked
}

// close stops the poller. The server calls it once every connection has
// ended, so none is parked.
func (p *poller) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	ep, done := p.ep, p.done
	p.ep = nil
	p.mu.Unlock()
	if ep != nil {
		_ = ep.Close() // ends the goroutine's wait
		<-done
	}
}

// closing reports whether close has begun.
func (p *poller) closing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed && p.ep == nil
}

// longAgo, as a read deadline, interrupts a blocked read at once.
var longAgo = time.Unix(1, 0)

// run waits for the epoll instance's events and the sweeps' deadlines.
func (p *poller) run(ep *os.File) {
	defer close(p.done)
	rc, err := ep.SyscallConn()
	if err != nil {
		p.fail(err)
		return
	}
	events := make([]syscall.EpollEvent, 128)
	var n int
	var werr error
	wait := func(fd uintptr) bool {
		for {
			n, werr = syscall.EpollWait(int(fd), events, 0)
			if werr != syscall.EINTR {
				return n > 0 || werr != nil
			}
		}
	}
	var woken, interrupt []*conn
	_ = ep.SetReadDeadline(time.Now().Add(p.every))
	for {
		err := rc.Read(wait)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			interrupt = p.sweep(interrupt[:0])
			for _, c := range interrupt {
				_ = c.tcp.SetReadDeadline(longAgo)
			}
			clear(interrupt)
			_ = ep.SetReadDeadline(time.Now().Add(p.every))
			continue
		case err == nil && werr != nil:
			err = os.NewSyscallError("epoll_wait", werr)
		}
		if err != nil {
			// close closes the epoll file under the wait, which then
			// fails with the poller's internal "use of closed file", not
			// os.ErrClosed: whatever ends the wait once close began is
			// the close.
			if !p.closing() {
				p.fail(err)
			}
			return
		}
		woken = p.claim(events[:n], woken[:0])
		for _, c := range woken {
			p.wake(c)
		}
		clear(woken)
	}
}

// claim unparks the connections events name, if they are still the ones
// parked there.
func (p *poller) claim(events []syscall.EpollEvent, woken []*conn) []*conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ev := range events {
		i := ev.Fd
		if i < 0 || int(i) >= len(p.slots) {
			continue
		}
		if c := p.slots[i]; c != nil && c.poll.gen == ev.Pad && p.unparkLocked(c) {
			woken = append(woken, c)
		}
	}
	return woken
}

// sweep returns the watched readers blocked between frames since the
// sweep before, marking them to park: their read is to be interrupted.
func (p *poller) sweep(interrupt []*conn) []*conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.slots {
		if c == nil || c.poll.parked {
			continue
		}
		switch c.wait.Load() {
		case waitBlocked:
			c.wait.CompareAndSwap(waitBlocked, waitSeen)
		case waitSeen:
			if c.wait.CompareAndSwap(waitSeen, waitPark) {
				interrupt = append(interrupt, c)
			}
		}
	}
	return interrupt
}

// fail stops parking after the poller broke (it never should): every
// parked connection gets its reader back.
func (p *poller) fail(err error) {
	p.log.Error("the poller of idle client connections failed; each keeps a goroutine", "err", err)
	p.mu.Lock()
	p.closed = true
	var woken []*conn
	for _, c := range p.slots {
		if c != nil && p.unparkLocked(c) {
			woken = append(woken, c)
		}
	}
	p.mu.Unlock()
	for _, c := range woken {
		p.wake(c)
	}
}
