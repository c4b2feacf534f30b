package clientport

import (
	"net"
	"sync"
	"syscall"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// writer sends a connection's frames. Replies to a batch of requests read
// together leave in one write at the end of the batch; frames queued
// outside a batch (a grant after a wait, a push from the node's callback
// goroutine) are written by whoever queued the first of them, or by a
// goroutine of their own when the queuer must not block. At most one
// goroutine writes at a time, in queue order.
//
// A batch whose replies are all answers no client waits for (a successful
// unlock's, an acknowledgement's: queueLazy) and which sent a request to
// a master (expectAnswer) is not written at its end: the lazy answers wait
// for that request's answer, to leave in its write, or for the server's
// flusher, lazyAnswerWait later at most. A client's unlock leaves with its
// next lock request; without this the unlock's answer would cost the agent
// a write and the client a wake-up of its own whenever the lock's master
// is another node.
type writer struct {
	nc net.Conn
	// raw is nc's socket for writes that must not block (a grant from the
	// node's callback goroutine): one non-blocking write, the rest, if the
	// socket is full, on a goroutine. nil for TLS.
	raw    syscall.RawConn
	limits *wire.Limits
	max    int    // bytes that may wait; past it the client is too slow
	slow   func() // called once, without mu, when max is passed

	mu       sync.Mutex
	buf      []byte
	spare    []byte
	batch    bool // the reader is handling requests and flushes at the end
	flushing bool // a goroutine is writing
	closed   bool
	// lazyOnly: every frame queued since the last write was queued by
	// queueLazy. expect: the batch sent a request whose answer will come.
	// held: lazy frames wait for that answer (or the flusher); listed: the
	// writer is on the flusher's list.
	lazyOnly, expect, held, listed bool
	flusher                        *answerFlusher // nil: never hold
	// closeAfter closes the connection once what is queued is written.
	closeAfter bool
}

// maxKept is the largest buffer a writer keeps between writes: an idle
// connection should hold little.
const maxKept = 16 << 10

// queue adds a frame. A frame the client would refuse is not sent: the
// agent never sends what does not validate.
func (w *writer) queue(h wire.Header, m wire.Message, block bool) {
	w.add(h, m, block, false)
}

// queueLazy adds an answer that no client waits for, which may wait for
// the batch's next write (see writer).
func (w *writer) queueLazy(h wire.Header, m wire.Message) {
	w.add(h, m, false, true)
}

func (w *writer) add(h wire.Header, m wire.Message, block, lazy bool) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	b, err := wire.AppendFrame(w.buf, h, m, w.limits)
	if err != nil {
		w.mu.Unlock()
		return
	}
	// lazyOnly holds while every frame since the last write is lazy.
	w.lazyOnly = lazy && (len(w.buf) == 0 || w.lazyOnly)
	w.buf = b
	w.startLocked(block)
}

// expectAnswer tells the batch under way that it sent a request whose
// answer comes later.
func (w *writer) expectAnswer() {
	w.mu.Lock()
	if w.batch {
		w.expect = true
	}
	w.mu.Unlock()
}

// queueRaw adds frames already encoded (a session's outbox).
func (w *writer) queueRaw(frames []byte) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.buf = append(w.buf, frames...)
	w.lazyOnly = false
	w.startLocked(false)
}

// startLocked makes sure what was queued will be written: by the batch's
// end, by the goroutine already writing, or now. It releases mu.
func (w *writer) startLocked(block bool) {
	if len(w.buf) > w.max {
		w.closed = true
		w.buf = nil
		w.mu.Unlock()
		_ = w.nc.Close()
		w.slow()
		return
	}
	if w.batch || w.flushing || len(w.buf) == 0 {
		w.mu.Unlock()
		return
	}
	w.flushing = true
	w.mu.Unlock()
	switch {
	case block:
		w.flush()
	case w.raw != nil && w.writeInline():
	default:
		go w.flush()
	}
}

// writeInline writes what is queued with non-blocking writes, and reports
// whether it all went; if not, what is left stays queued for flush. The
// caller set flushing.
func (w *writer) writeInline() bool {
	w.mu.Lock()
	for len(w.buf) > 0 && !w.closed {
		out := w.buf
		w.buf = w.spare[:0]
		w.spare = nil
		w.lazyOnly, w.held = false, false
		w.mu.Unlock()
		n, err := writeNow(w.raw, out)
		w.mu.Lock()
		if err != nil {
			w.closed, w.buf = true, nil
			break
		}
		if n < len(out) {
			rest := make([]byte, 0, len(out)-n+len(w.buf))
			w.buf = append(append(rest, out[n:]...), w.buf...)
			w.mu.Unlock()
			return false // the socket is full: flush waits for it
		}
		if cap(out) <= maxKept {
			w.spare = out[:0]
		}
	}
	w.flushing = false
	closeNow := w.closeAfter && len(w.buf) == 0
	w.mu.Unlock()
	if closeNow {
		_ = w.nc.Close()
	}
	return true
}

// flush writes until nothing is queued. The caller set flushing.
func (w *writer) flush() {
	w.mu.Lock()
	for len(w.buf) > 0 && !w.closed {
		out := w.buf
		w.buf = w.spare[:0]
		w.spare = nil
		w.lazyOnly, w.held = false, false
		w.mu.Unlock()
		_, err := w.nc.Write(out)
		w.mu.Lock()
		if cap(out) <= maxKept {
			w.spare = out[:0]
		}
		if err != nil {
			w.closed = true
			w.buf = nil
		}
	}
	w.flushing = false
	closeNow := w.closeAfter && len(w.buf) == 0
	if cap(w.buf) > maxKept {
		w.buf = nil
	}
	w.mu.Unlock()
	if closeNow {
		_ = w.nc.Close()
	}
}

// beginBatch and endBatch bracket the handling of requests read together.
func (w *writer) beginBatch() {
	w.mu.Lock()
	w.batch = true
	w.mu.Unlock()
}

func (w *writer) endBatch() {
	w.mu.Lock()
	w.batch = false
	expect := w.expect
	w.expect = false
	if expect && w.lazyOnly && w.flusher != nil && len(w.buf) > 0 && !w.flushing && !w.closeAfter {
		w.held = true
		if !w.listed {
			w.listed = true
			w.flusher.add(w)
		}
		w.mu.Unlock()
		return
	}
	w.startLocked(true)
}

// flushHeld writes lazy answers still held: the flusher's turn came
// before the answer they waited for.
func (w *writer) flushHeld() {
	w.mu.Lock()
	w.listed = false
	if !w.held || w.closed || w.batch || w.flushing {
		w.held = false // written meanwhile, or the batch under way writes it
		w.mu.Unlock()
		return
	}
	w.held = false
	w.startLocked(false)
}

// finish closes the connection once what is queued is written.
func (w *writer) finish() {
	w.mu.Lock()
	w.closeAfter = true
	if w.closed || !w.flushing && !w.batch && len(w.buf) == 0 {
		w.mu.Unlock()
		_ = w.nc.Close()
		return
	}
	w.startLocked(false)
}

// stop drops whatever is queued; the connection is closing.
func (w *writer) stop() {
	w.mu.Lock()
	w.closed = true
	w.buf, w.spare = nil, nil
	w.mu.Unlock()
}

// trim lets go of the spare buffer and an empty queue's: the connection
// is going idle.
func (w *writer) trim() {
	w.mu.Lock()
	w.spare = nil
	if len(w.buf) == 0 && !w.flushing {
		w.buf = nil
	}
	w.mu.Unlock()
}
