package master

import "container/heap"

// timer holds what only some locks need: the deadlines of one lock (the
// timeout of its queued request or conversion, the expiry of its TTL), and,
// while the lock has a request or conversion queued, that request's identity
// for deadlock detection (see waitfor.go). Only locks that use one of these
// have a timer, so most locks pay nothing for them; a lock that only queued
// gives its timer up when the request leaves the queue.
type timer struct {
	lock     *lock
	deadline Tick // queued request fails at this tick; 0 = none
	expires  Tick // granted lock is released at this tick; 0 = none
	ttl      Tick
	index    int32  // position in the heap, -1 when not in it
	count    uint32 // the permits of a lock on a semaphore; 0 otherwise
	// lease is the session's lease (lease.go): of a lease's own timer, that
	// lease; of a lock's, the lease the lock lives by or, while a new request
	// of the session waits (ttl then the session's TTL, and only then not
	// 0 with a lease), the one it will join when granted. nil otherwise.
	lease *lease

	// While a request is queued: its generation (unique in the table, never
	// 0; it tells this queued request from any other request of the same
	// lock), the tick it was queued at, and its place on the table's list of
	// queued requests, oldest first. All zero otherwise.
	gen          uint64
	since        Tick
	qprev, qnext *timer
}

// at is the earliest tick at which the timer has something to do, 0 if none.
func (tm *timer) at() Tick {
	switch {
	case tm.deadline == 0:
		return tm.expires
	case tm.expires == 0:
		return tm.deadline
	}
	return min(tm.deadline, tm.expires)
}

// timerHeap is a min-heap of timers by at().
type timerHeap struct{ h timerSlice }

type timerSlice []*timer

func (s timerSlice) Len() int           { return len(s) }
func (s timerSlice) Less(i, j int) bool { return s[i].at() < s[j].at() }
func (s timerSlice) Swap(i, j int) {
	s[i], s[j] = s[j], s[i]
	s[i].index, s[j].index = int32(i), int32(j)
}
func (s *timerSlice) Push(x any) {
	tm := x.(*timer)
	tm.index = int32(len(*s))
	*s = append(*s, tm)
}
func (s *timerSlice) Pop() any {
	old := *s
	tm := old[len(old)-1]
	old[len(old)-1] = nil
	*s = old[:len(old)-1]
	tm.index = -1
	return tm
}

// update puts tm where its at() says: in the heap at the right place, or out
// of it when it has nothing left to do.
func (th *timerHeap) update(tm *timer) {
	inHeap := tm.index >= 0 && int(tm.index) < len(th.h) && th.h[tm.index] == tm
	switch {
	case tm.at() == 0 && inHeap:
		heap.Remove(&th.h, int(tm.index))
	case tm.at() == 0:
	case inHeap:
		heap.Fix(&th.h, int(tm.index))
	default:
		heap.Push(&th.h, tm)
	}
}

func (th *timerHeap) remove(tm *timer) {
	if tm.index >= 0 && int(tm.index) < len(th.h) && th.h[tm.index] == tm {
		heap.Remove(&th.h, int(tm.index))
	}
}

// Tick advances the table's clock to now (it never goes back) and acts on
// every deadline that has passed: a queued request or conversion past its
// timeout fails with ErrTimeout; a granted lock past its TTL, or its
// session's, is released with ErrExpired, its value marked not valid if it
// was PW or EX (the holder may have been half-way through an update).
// Effects report both.
func (t *Table) Tick(now Tick) {
	if now > t.now {
		t.now = now
	}
	for len(t.timers.h) > 0 {
		tm := t.timers.h[0]
		if tm.at() > t.now {
			return
		}
		if tm.isLease() {
			t.expireLease(tm.lease)
			continue
		}
		l := tm.lock
		r := l.res
		if tm.expires != 0 && tm.expires <= t.now && l.queue != QueueWaiting {
			t.expire(r, l)
			continue
		}
		tm.deadline = 0
		t.timers.update(tm)
		t.endQueued(r, l, ErrTimeout)
	}
}

func (t *Table) expire(r *resource, l *lock) {
	if releaseWrites(l.mode) {
		r.invalidateLVB()
	}
	t.emit(Effect{Kind: EffectReleased, Resource: r.name, Lock: l.key(), Owner: l.owner, Mode: l.mode, Token: l.token, Err: ErrExpired})
	t.removeLock(r, l)
}
