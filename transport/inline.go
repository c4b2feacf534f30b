package transport

import (
	"fmt"
	"syscall"
)

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
