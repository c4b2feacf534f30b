package transport

import (
	"fmt"
	"net"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// appendLocked encodes one frame into the write buffer. Over the limit, the
// frame is taken back out and the link is failed.
func (p *peer) appendLocked(h wire.Header, m wire.Message) (bool, error) {
	before := len(p.buf)
	buf, err := wire.AppendFrame(p.buf, h, m, &p.l.cfg.Limits)
	if err != nil {
		return false, err
	}
	over := len(buf) > p.l.cfg.WriteBufferLimit
	if !over && m.Type() != wire.TypePing {
		over = p.retainLocked(buf[before:])
		if over {
			p.retain = p.retain[:len(p.retain)-(len(buf)-before)]
			p.nsent--
		}
	}
	if over {
		// The peer does not keep up, or the link is down and the queue
		// full: fail the link; the manager ends the session (frames lost).
		p.buf = buf[:before]
		p.failLocked(fmt.Errorf("%w: %s: %d bytes queued", ErrWriteBufferFull, p.name, len(p.retain)))
		p.overflowed = true
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

// maxIdleBuffer is the largest write buffer kept after it drained, so a
// burst does not pin megabytes per peer for ever.
const maxIdleBuffer = 1 << 20

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
