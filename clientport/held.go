package clientport

import (
	"sync"
	"time"
)

// lazyAnswerWait bounds how long a writer holds answers no client waits
// for (writer.endBatch) before the flusher writes them: about the time a
// remote master takes to answer the request they wait to leave with, and
// no shorter than the runtime's timers sleep when nothing else wakes them.
const lazyAnswerWait = time.Millisecond

// answerFlusher writes the answers that writers held and that no other
// write took along, lazyAnswerWait after the first of them was held. One
// timer serves every connection of the server, armed only while some
// writer holds answers.
type answerFlusher struct {
	mu     sync.Mutex
	held   []*writer
	spare  []*writer
	timer  *time.Timer
	closed bool
}

// add lists w, which holds answers. Caller holds w.mu (the writer's mutex
// is taken before the flusher's, never after).
func (f *answerFlusher) add(w *writer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		go w.flushHeld() // not under w.mu, which the caller holds
		return
	}
	f.held = append(f.held, w)
	if len(f.held) > 1 {
		return // the timer is armed
	}
	if f.timer == nil {
		f.timer = time.AfterFunc(lazyAnswerWait, f.fire)
	} else {
		f.timer.Reset(lazyAnswerWait)
	}
}

// fire writes what the listed writers still hold.
func (f *answerFlusher) fire() {
	f.mu.Lock()
	ws := f.held
	f.held, f.spare = f.spare[:0], nil
	f.mu.Unlock()
	for i, w := range ws {
		w.flushHeld()
		ws[i] = nil
	}
	f.mu.Lock()
	if f.spare == nil && cap(ws) <= maxHeldKept {
		f.spare = ws[:0]
	}
	f.mu.Unlock()
}

// maxHeldKept is the largest list the flusher keeps for reuse.
const maxHeldKept = 1024

// close stops the timer and writes what is held: the server is closing.
func (f *answerFlusher) close() {
	f.mu.Lock()
	f.closed = true
	if f.timer != nil {
		f.timer.Stop()
	}
	f.mu.Unlock()
	f.fire()
}
