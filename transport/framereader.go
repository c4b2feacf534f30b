package transport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// readBufferSize is the reader's buffer. Frames that fit are decoded in place
// (no copy); a lock request is ~50 bytes, so thousands fit and one read
// syscall drains many of them.
const readBufferSize = 64 << 10

// frameReader reads length-prefixed frames from a connection. Reads carry
// a read deadline that cuts off a silent peer (deadlineConn).
type frameReader struct {
	dc      deadlineConn
	br      *bufio.Reader
	limits  *wire.Limits
	discard int    // bytes of the previous frame still in br
	scratch []byte // holds frames larger than br's buffer
}

// deadlineConn cuts off a peer that sent nothing for the idle timeout
// without touching the clock or the deadline on every read: both cost a
// visible part of a round trip on this VM. The read deadline is set an
// idle period (an eighth of the idle timeout) ahead; when it passes,
// expired looks whether anything arrived during the period and if so sets
// the next one. A peer is cut off after between IdleTimeout and 9/8 of it
// of silence.
//
// The deadline is also how a helper's reading is interrupted (reader.go):
// the interrupter sets it in the past, which expired tells from a period's
// end by the clock.
type deadlineConn struct {
	net.Conn
	// idle is the idle timeout; 0 leaves the deadlines to the caller (the
	// handshake sets its own).
	idle time.Duration
	// The times below are durations since base: reading the monotonic
	// clock alone (time.Since) costs half of time.Now.
	base time.Time
	// deadline is the end of the current idle period (0: none set yet);
	// active says a read returned data during it; quietSince is when the
	// silence began, as far as the periods tell.
	deadline   time.Duration
	active     bool
	quietSince time.Duration
	// intr, while helping, lets another goroutine interrupt a helper's
	// blocking read. Not inside a frame larger than the buffer, whose
	// partial read cannot be resumed.
	intr    *interrupter
	helping bool
	large   bool
}

func (c *deadlineConn) elapsed() time.Duration { return time.Since(c.base) }

// Read reads, going on through the ends of idle periods during which data
// arrived. While helping it returns errInterrupted instead of blocking once
// interrupted.
//
// Read ignores a failure to set the deadline: it only happens on a
// connection that is already closed (net.Pipe says so even when only the
// far end closed), and Read then reports how it ended, EOF or error.
func (c *deadlineConn) Read(p []byte) (int, error) {
	for {
		if c.deadline == 0 && c.idle > 0 {
			now := c.elapsed()
			c.quietSince = now
			c.arm(now)
		}
		intr := c.helping && !c.large
		if intr && c.intr.enter() {
			return 0, errInterrupted
		}
		n, err := c.Conn.Read(p)
		if intr {
			c.intr.inRead.Store(false)
		}
		if n > 0 {
			c.active = true
		}
		if err == nil || c.idle == 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		if c.expired() {
			return n, err
		}
	}
}

// arm starts an idle period at now.
func (c *deadlineConn) arm(now time.Duration) {
	c.deadline, c.active = now+max(c.idle/8, time.Microsecond), false
	_ = c.SetReadDeadline(c.base.Add(c.deadline))
}

// expired handles a read deadline that passed: the end of an idle period,
// or an interrupter's deadline in the past. It reports whether the peer has
// been silent for the idle timeout.
func (c *deadlineConn) expired() bool {
	now := c.elapsed()
	if now < c.deadline { // an interrupter's: the period goes on
		_ = c.SetReadDeadline(c.base.Add(c.deadline))
		return false
	}
	if c.active {
		c.quietSince = now
	}
	if now-c.quietSince >= c.idle {
		return true
	}
	c.arm(now)
	return false
}

func newFrameReader(c net.Conn, idle time.Duration, l *wire.Limits) *frameReader {
	return newFrameReaderSize(c, idle, l, readBufferSize)
}

// newFrameReaderSize is newFrameReader with a buffer of size bytes.
func newFrameReaderSize(c net.Conn, idle time.Duration, l *wire.Limits, size int) *frameReader {
	r := &frameReader{dc: deadlineConn{Conn: c, idle: idle, base: time.Now()}, limits: l}
	r.br = bufio.NewReaderSize(&r.dc, size)
	return r
}

// reset starts reading c afresh: nothing buffered, no deadline set, and
// only a moderate scratch buffer kept.
func (r *frameReader) reset(c net.Conn, idle time.Duration) {
	r.dc = deadlineConn{Conn: c, idle: idle, base: time.Now()}
	r.br.Reset(&r.dc)
	r.discard = 0
	r.scratch = r.scratch[:0]
}

// setIdle changes the idle timeout; the next read sets the deadline anew
// (the handshake clears deadlines behind deadlineConn's back).
func (r *frameReader) setIdle(d time.Duration) {
	r.dc.idle, r.dc.deadline = d, 0
}

// hasFrame reports whether a whole frame is buffered, so that next will
// not read from the connection.
func (r *frameReader) hasFrame() bool {
	avail := r.br.Buffered() - r.discard
	if avail < wire.PrefixSize {
		return false
	}
	prefix, _ := r.br.Peek(r.discard + wire.PrefixSize)
	n, err := wire.FrameLength(prefix[r.discard:], r.limits)
	return err != nil || avail >= wire.PrefixSize+n
}

// errTruncated marks a connection that ended in the middle of a frame.
var errTruncated = fmt.Errorf("%w: connection ended inside a frame", wire.ErrTruncated)

// next returns the payload (everything after the length prefix) of the next
// frame, valid until the following call. A clean end of stream between
// frames is io.EOF; a declared length over the limit is refused before the
// frame is read.
func (r *frameReader) next() ([]byte, error) {
	if r.discard > 0 {
		_, _ = r.br.Discard(r.discard) // buffered: cannot fail
		r.discard = 0
	}
	prefix, err := r.br.Peek(wire.PrefixSize)
	if err != nil {
		return nil, endErr(len(prefix), err)
	}
	n, err := wire.FrameLength(prefix, r.limits)
	if err != nil {
		return nil, err
	}
	total := wire.PrefixSize + n
	if total <= r.br.Size() {
		frame, err := r.br.Peek(total)
		if err != nil {
			return nil, endErr(len(frame), err)
		}
		r.discard = total
		return frame[wire.PrefixSize:], nil
	}
	_, _ = r.br.Discard(wire.PrefixSize)
	return r.readLarge(n)
}

// readLarge reads a frame bigger than the buffer into scratch, growing it
// only as bytes actually arrive: a peer that declares 1 MiB and sends 10
// bytes costs at most a buffer's size (64 KiB for a link) more than it sent.
func (r *frameReader) readLarge(n int) ([]byte, error) {
	r.dc.large = true
	defer func() { r.dc.large = false }()
	buf := r.scratch[:0]
	for len(buf) < n {
		chunk := min(n-len(buf), r.br.Size())
		if cap(buf)-len(buf) < chunk {
			buf = append(buf, make([]byte, chunk)...)[:len(buf)]
		}
		got, err := io.ReadFull(r.br, buf[len(buf):len(buf)+chunk])
		buf = buf[:len(buf)+got]
		if err != nil {
			return nil, endErr(1, err)
		}
	}
	if cap(buf) <= 4*r.br.Size() {
		r.scratch = buf // keep moderate buffers; let a rare huge one go
	}
	return buf, nil
}

// endErr classifies a read error: EOF with part of a frame read is a
// truncated frame, otherwise the error stands.
func endErr(got int, err error) error {
	if got > 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		return errTruncated
	}
	return err
}
