package transport

import "fmt"

// writeInline writes what is queued from the calling goroutine with one
// non-blocking write, when the link is idle (no write under way) on a plain
// TCP connection of a platform that has the raw write (inlineConn): no
// hand-off to the writer goroutine, which would cost a goroutine switch.
// When the link is busy, has no raw connection, or the kernel takes only
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
