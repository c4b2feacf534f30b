package clientport

import (
	"encoding/binary"
	"net"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// recordConn is a net.Conn that records each write's frames (by count).
type recordConn struct {
	net.Conn // nil: only Write and Close are called
	mu       sync.Mutex
	writes   []int // frames per write
}

func (r *recordConn) Write(b []byte) (int, error) {
	n := 0
	for rest := b; len(rest) >= wire.PrefixSize; n++ {
		rest = rest[wire.PrefixSize+int(binary.BigEndian.Uint32(rest)):]
	}
	r.mu.Lock()
	r.writes = append(r.writes, n)
	r.mu.Unlock()
	return len(b), nil
}

func (r *recordConn) Close() error { return nil }

func (r *recordConn) got() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.writes...)
}

func newRecordWriter(f *answerFlusher) (*writer, *recordConn) {
	rc := &recordConn{}
	l := wire.DefaultLimits()
	return &writer{nc: rc, limits: &l, max: 1 << 20, slow: func() {}, flusher: f}, rc
}

// holdLazy runs a batch that answers request id with a lazy ClientOK and
// sent a request on to a master: the writer holds the answer.
func holdLazy(w *writer, id uint64) {
	w.beginBatch()
	w.queueLazy(wire.Header{ID: id, Reply: true}, okMsg)
	w.expectAnswer()
	w.endBatch()
}

// TestLazyAnswerLeavesWithTheGrant: an unlock's answer in a batch that sent
// a lock request to a master waits, and leaves in the grant's write.
func TestLazyAnswerLeavesWithTheGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f answerFlusher
		w, rc := newRecordWriter(&f)
		holdLazy(w, 1)
		if got := rc.got(); len(got) != 0 {
			t.Fatalf("writes at the batch's end: %v, want none (the answer is held)", got)
		}
		time.Sleep(lazyAnswerWait / 2)
		w.queue(wire.Header{ID: 2, Reply: true}, &wire.ClientGrant{Lock: 7, Mode: 5, Token: 1}, true)
		if got := rc.got(); !slices.Equal(got, []int{2}) {
			t.Fatalf("writes %v, want one write of both frames", got)
		}
		time.Sleep(2 * lazyAnswerWait) // the flusher's turn finds nothing held
		if got := rc.got(); !slices.Equal(got, []int{2}) {
			t.Fatalf("writes %v after the flusher's turn, want still one", got)
		}
	})
}

// TestLazyAnswerFlushed: a held answer whose request is not answered soon
// leaves by itself lazyAnswerWait later, not before.
func TestLazyAnswerFlushed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f answerFlusher
		w, rc := newRecordWriter(&f)
		w2, rc2 := newRecordWriter(&f)
		for _, w := range []*writer{w, w2} {
			holdLazy(w, 1)
		}
		time.Sleep(lazyAnswerWait - time.Microsecond)
		if got := rc.got(); len(got) != 0 {
			t.Fatalf("writes %v before lazyAnswerWait, want none", got)
		}
		time.Sleep(time.Microsecond)
		synctest.Wait()
		if got, got2 := rc.got(), rc2.got(); !slices.Equal(got, []int{1}) || !slices.Equal(got2, []int{1}) {
			t.Fatalf("writes %v and %v after lazyAnswerWait, want one frame each", got, got2)
		}
		// A writer holds again after its flush, and is listed again.
		holdLazy(w, 3)
		time.Sleep(lazyAnswerWait)
		synctest.Wait()
		if got := rc.got(); !slices.Equal(got, []int{1, 1}) {
			t.Fatalf("writes %v, want the second hold flushed too", got)
		}
	})
}

// TestLazyAnswerNotHeld: answers go at the batch's end when the batch
// waits for nothing, or holds an answer a client waits for.
func TestLazyAnswerNotHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f answerFlusher
		w, rc := newRecordWriter(&f)
		w.beginBatch()
		w.queueLazy(wire.Header{ID: 1, Reply: true}, okMsg)
		w.endBatch() // no request sent to a master
		w.beginBatch()
		w.queueLazy(wire.Header{ID: 2, Reply: true}, okMsg)
		w.queue(wire.Header{ID: 3, Reply: true}, &wire.ClientGrant{Lock: 8, Mode: 5, Token: 2}, false)
		w.expectAnswer()
		w.endBatch() // a grant is in the batch: someone waits for it
		if got := rc.got(); !slices.Equal(got, []int{1, 2}) {
			t.Fatalf("writes %v, want each batch written at its end", got)
		}
		// A server that closed flushes what is held.
		holdLazy(w, 4)
		f.close()
		synctest.Wait() // the write is a goroutine's: the writer must not block the flusher
		if got := rc.got(); !slices.Equal(got, []int{1, 2, 1}) {
			t.Fatalf("writes %v after the flusher closed, want the held answer written", got)
		}
	})
}
