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

// frameReader reads length-prefixed frames from a connection. Read syscalls
// keep the read deadline about the idle timeout ahead (deadlineConn), so a
// peer that sends nothing for that long is cut off.
type frameReader struct {
	dc      deadlineConn
	br      *bufio.Reader
	limits  *wire.Limits
	discard int    // bytes of the previous frame still in br
	scratch []byte // holds frames larger than br's buffer
}

type deadlineConn struct {
	net.Conn
	idle time.Duration
	// The times below are durations since base. Reading the monotonic
	// clock alone (time.Since) costs half of time.Now, which reads the wall
	// clock too, and on this VM a clock read is a visible part of a round
	// trip.
	base time.Time
	// budget, while helping is set, is when a helper's turn at reading
	// ends (reader.go): an earlier deadline than the idle one, reported as
	// errBudget. Not inside a frame larger than the buffer, whose partial
	// read cannot be resumed. It outlives the turn so that the next helpers
	// can keep the deadline in force rather than move it.
	budget  time.Duration
	helping bool
	large   bool
	// now, if not 0, is the time the helper starting its turn just read,
	// for the turn's first Read; the helper clears it when it leaves.
	now time.Duration
	// set is the read deadline in force (0: none yet); onBudget says it is
	// a budget's.
	set      time.Duration
	onBudget bool
}

func (c *deadlineConn) elapsed() time.Duration { return time.Since(c.base) }

// Read sets the read deadline before it reads. Pushing the idle deadline out
// is a timer update in the runtime, so it is only done when the deadline in
// force is more than an eighth of the idle timeout old: a silent peer is cut
// off after between 7/8 of IdleTimeout and all of it.
//
// Read ignores a failure to set the deadline: it only happens on a
// connection that is already closed (net.Pipe says so even when only the
// far end closed), and Read then reports how it ended, EOF or error.
func (c *deadlineConn) Read(p []byte) (int, error) {
	now := c.now
	if now == 0 {
		now = c.elapsed()
	}
	c.now = 0
	deadline := now + c.idle
	budget := c.helping && !c.large && c.budget < deadline
	switch {
	case budget:
		if !c.onBudget || c.set != c.budget {
			c.set, c.onBudget = c.budget, true
			_ = c.SetReadDeadline(c.base.Add(c.budget))
		}
	case c.onBudget || c.set < deadline-c.idle/8:
		c.set, c.onBudget = deadline, false
		_ = c.SetReadDeadline(c.base.Add(deadline))
	}
	n, err := c.Conn.Read(p)
	if budget && err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		err = errBudget
	}
	return n, err
}

func newFrameReader(c net.Conn, idle time.Duration, l *wire.Limits) *frameReader {
	r := &frameReader{dc: deadlineConn{Conn: c, idle: idle, base: time.Now()}, limits: l}
	r.br = bufio.NewReaderSize(&r.dc, readBufferSize)
	return r
}

// setIdle changes the idle timeout; the next read sets the deadline anew
// (the handshake clears deadlines behind deadlineConn's back).
func (r *frameReader) setIdle(d time.Duration) {
	r.dc.idle, r.dc.set, r.dc.onBudget = d, 0, false
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
// bytes costs at most 64 KiB more than it sent.
func (r *frameReader) readLarge(n int) ([]byte, error) {
	r.dc.large = true
	defer func() { r.dc.large = false }()
	buf := r.scratch[:0]
	for len(buf) < n {
		chunk := min(n-len(buf), readBufferSize)
		if cap(buf)-len(buf) < chunk {
			buf = append(buf, make([]byte, chunk)...)[:len(buf)]
		}
		got, err := io.ReadFull(r.br, buf[len(buf):len(buf)+chunk])
		buf = buf[:len(buf)+got]
		if err != nil {
			return nil, endErr(1, err)
		}
	}
	if cap(buf) <= 4*readBufferSize {
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
