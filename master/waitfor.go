package master

import (
	"fmt"
	"iter"

	"github.com/seed-a6839e30/dlm/modes"
)

// Party is one end of a wait-for edge: the owner of a lock, or the lock
// itself when it has no owner (OwnerID zero).
type Party struct {
	Owner OwnerID
	Lock  LockID
}

// Key returns a value that identifies the party across resources and
// nodes: locks of one owner share it.
func (p Party) Key() PartyKey {
	if p.Owner != 0 {
		return PartyKey{Owner: p.Owner}
	}
	return PartyKey{Lock: p.Lock}
}

// PartyKey identifies a party in a wait-for graph.
type PartyKey struct {
	Owner OwnerID
	Lock  LockID
}

// Compare orders party keys: by owner, then by lock node and id. A detector
// that must pick one party of a cycle deterministically picks by it.
func (k PartyKey) Compare(o PartyKey) int {
	switch {
	case k.Owner != o.Owner:
		return cmpUint(uint64(k.Owner), uint64(o.Owner))
	case k.Lock.Node != o.Lock.Node:
		return cmpUint(uint64(k.Lock.Node), uint64(o.Lock.Node))
	}
	return cmpUint(k.Lock.ID, o.Lock.ID)
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// BlockKind says how an edge's blocker blocks its waiter.
type BlockKind uint8

const (
	// BlockHolder: the blocker holds a granted mode that conflicts with the
	// mode the waiter asks for (it may have a conversion queued as well).
	// The edge's Stamp is the blocker's fencing token.
	BlockHolder BlockKind = iota + 1
	// BlockAhead: the blocker's own request or conversion is queued ahead of
	// the waiter's, and the queues are FIFO. The edge's Stamp is the
	// generation of the blocker's queued request.
	BlockAhead
)

func (k BlockKind) String() string {
	switch k {
	case BlockHolder:
		return "holder"
	case BlockAhead:
		return "ahead"
	}
	return fmt.Sprintf("BlockKind(%d)", uint8(k))
}

// WaitEdge says that Waiter's queued request on Resource cannot be granted
// before Blocker's lock changes: Blocker holds a mode that conflicts with it,
// or Blocker's own request is queued ahead of it (the queues are FIFO).
//
// An edge also carries the identities that let the table tell, later,
// whether it has held without a break since it was observed (EdgeHolds):
// the generation of the waiter's queued request, and the blocker's token or
// request generation (Kind and Stamp).
type WaitEdge struct {
	Resource string
	Waiter   Party
	Blocker  Party
	// Mode is the mode the waiter asks for.
	Mode modes.Mode
	// WaiterGen identifies the waiter's queued request: every request or
	// conversion queued in a table gets a new generation, never 0, so a
	// conversion cancelled and asked for again is another request.
	WaiterGen uint64
	// Since is the tick the waiter's request was queued at.
	Since Tick
	// Kind says how the blocker blocks; Stamp is its token (BlockHolder) or
	// the generation of its queued request (BlockAhead).
	Kind  BlockKind
	Stamp uint64
}

// Deadlock detection across resources and nodes follows wait-for edges from
// the tables of every node (the dlm package collects and confirms them; see
// its documentation). The table's part is to say which edges exist, with
// identities, and to confirm that an edge observed earlier has held without
// a break since, using only those identities:
//
//   - the waiter is the same queued request: the request generation is new
//     for every request queued, and cleared when the request leaves the
//     queue, so the same generation means it has been queued all along;
//   - a BlockHolder blocker has the same fencing token: every grant and
//     up-conversion issues a new, larger token, so the same token means the
//     lock has been granted all along and only converted down (or been
//     demoted to NL), each step to a mode no stronger than the one before.
//     Conflict is monotone in the mode lattice (a stronger mode conflicts
//     with everything a weaker one does), so if its mode now still
//     conflicts with the waiter's, every mode it held since did;
//   - a BlockAhead blocker is the same queued request, still ahead of the
//     waiter: queues only ever append, so two requests queued all along keep
//     their order.

// trackQueued gives l's request, just queued, a new generation and the
// current tick, and puts it at the back of the list of queued requests.
func (t *Table) trackQueued(l *lock) {
	tm := t.ensureTimer(l)
	t.lastGen++
	tm.gen, tm.since = t.lastGen, t.now
	tail := t.queued.qprev
	tm.qprev, tm.qnext = tail, &t.queued
	tail.qnext = tm
	t.queued.qprev = tm
}

// ensureTimer returns l's timer, giving it one (a recycled one if there is)
// if it has none.
func (t *Table) ensureTimer(l *lock) *timer {
	if l.timer != nil && l.timer.lock == l {
		return l.timer
	}
	ls := l.leaseOf() // a lock of a session keeps naming its lease
	var tm *timer
	if n := len(t.freeTimers); n > 0 {
		tm = t.freeTimers[n-1]
		t.freeTimers = t.freeTimers[:n-1]
	} else {
		tm = new(timer)
	}
	*tm = timer{lock: l, index: -1, lease: ls}
	l.timer = tm
	return tm
}

// dequeue takes tm off the list of queued requests, if it is on it, and
// forgets the request's identity.
func (tm *timer) dequeue() {
	if tm.qnext == nil {
		return
	}
	tm.qprev.qnext = tm.qnext
	tm.qnext.qprev = tm.qprev
	tm.qprev, tm.qnext = nil, nil
	tm.gen, tm.since = 0, 0
}

// leaveQueue ends the identity of l's queued request as the request leaves
// its queue, and recycles the timer if it served nothing else (a timer with
// no deadline, expiry or TTL is never in the heap; a semaphore lock keeps
// its timer, which holds its permits).
func (t *Table) leaveQueue(l *lock) {
	tm := l.timer
	if tm == nil || tm.lock != l {
		return
	}
	tm.dequeue()
	t.releaseIdleTimer(l)
}

// releaseIdleTimer recycles l's own timer if it serves nothing any more: no
// deadline, expiry or TTL (so it is not in the heap), no queued request and,
// for a semaphore lock, no permits. A lock of a session goes back to its
// lease's timer.
func (t *Table) releaseIdleTimer(l *lock) {
	tm := l.timer
	if tm == nil || tm.lock != l {
		return
	}
	if tm.deadline == 0 && tm.expires == 0 && tm.ttl == 0 && tm.count == 0 && tm.qnext == nil {
		l.timer = nil
		if tm.lease != nil {
			l.timer = &tm.lease.tm
		}
		*tm = timer{}
		if len(t.freeTimers) < freeListCap {
			t.freeTimers = append(t.freeTimers, tm)
		}
	}
}

// queuedGen returns the generation of l's queued request, 0 if none.
func (l *lock) queuedGen() uint64 {
	if l.timer == nil || l.queue == QueueGranted {
		return 0
	}
	return l.timer.gen
}

// WaitEdges yields the wait-for edges of every queued request and
// conversion in the table. An owner blocked by one of its own locks yields an
// edge to itself: a deadlock of one. Following the edges across the tables
// of all nodes finds deadlocks that span resources and nodes: a cycle means
// no request on it can ever be granted. The table must not change during the
// iteration.
func (t *Table) WaitEdges() iter.Seq[WaitEdge] {
	return func(yield func(WaitEdge) bool) {
		for _, r := range t.res {
			if r.nqueued > 0 && !t.resourceEdges(r, yield) {
				return
			}
		}
	}
}

// WaitEdgesQueuedBy yields the wait-for edges of the requests and
// conversions queued at or before tick by, oldest request first (the edges
// of one request together). It costs the requests it yields, not the size of
// the table: a table with nothing queued that long answers at once. The
// table must not change during the iteration.
func (t *Table) WaitEdgesQueuedBy(by Tick) iter.Seq[WaitEdge] {
	return func(yield func(WaitEdge) bool) {
		for tm := t.queued.qnext; tm != &t.queued && tm.since <= by; tm = tm.qnext {
			if !t.lockEdges(tm.lock.res, tm.lock, yield) {
				return
			}
		}
	}
}

func (t *Table) resourceEdges(r *resource, yield func(WaitEdge) bool) bool {
	for _, q := range []*lockList{&r.convert, &r.wait} {
		for w := q.front(); w != nil; w = q.next(w) {
			if !t.lockEdges(r, w, yield) {
				return false
			}
		}
	}
	return true
}

// lockEdges yields the edges of one queued lock: to each holder whose granted
// mode conflicts with it, and to the request queued just ahead of it (which
// chains to everything further ahead).
func (t *Table) lockEdges(r *resource, w *lock, yield func(WaitEdge) bool) bool {
	emit := func(b *lock, kind BlockKind, stamp uint64) bool {
		if b == w {
			return true
		}
		return yield(WaitEdge{
			Resource: r.name, Waiter: party(w), Blocker: party(b), Mode: w.rq,
			WaiterGen: w.timer.gen, Since: w.timer.since, Kind: kind, Stamp: stamp,
		})
	}
	for _, q := range []*lockList{&r.granted, &r.convert} {
		for b := q.front(); b != nil; b = q.next(b) {
			if !modes.Compatible(b.mode, w.rq) && !emit(b, BlockHolder, b.token) {
				return false
			}
		}
	}
	ahead := r.convert.prevOf(w)
	if w.queue == QueueWaiting {
		ahead = r.wait.prevOf(w)
		if ahead == nil {
			ahead = r.convert.back()
		}
	}
	if ahead != nil && !modes.Compatible(ahead.mode, w.rq) && ahead.queue != QueueWaiting {
		return true // already yielded as a conflicting holder
	}
	if ahead != nil {
		return emit(ahead, BlockAhead, ahead.timer.gen)
	}
	return true
}

func party(l *lock) Party { return Party{Owner: l.owner, Lock: l.key()} }

// EdgeHolds reports whether an edge this table yielded earlier (from
// WaitEdges or WaitEdgesQueuedBy) still holds and has held without a break
// since: the waiter is the same queued request, asking for the same mode,
// and the blocker has the same token and still conflicts (BlockHolder), or
// is the same queued request, still ahead (BlockAhead). Equal identities
// prove an unbroken edge: see "No false positives" in
// docs/design/deadlocks.md in the repository. It is
// false for an edge of another table (tables do not share generations).
func (t *Table) EdgeHolds(e WaitEdge) bool {
	w, err := t.find(e.Waiter.Lock)
	if err != nil || w.owner != e.Waiter.Owner || w.res.name != e.Resource ||
		e.WaiterGen == 0 || w.queuedGen() != e.WaiterGen || w.rq != e.Mode {
		return false
	}
	b, err := t.find(e.Blocker.Lock)
	if err != nil || b == w || b.res != w.res || b.owner != e.Blocker.Owner {
		return false
	}
	switch e.Kind {
	case BlockHolder:
		return b.queue != QueueWaiting && b.token == e.Stamp && !modes.Compatible(b.mode, w.rq)
	case BlockAhead:
		if e.Stamp == 0 || b.queuedGen() != e.Stamp {
			return false
		}
		// Still ahead: the converting queue goes before the waiting queue,
		// and within a queue, generations grow from head to tail.
		return (b.queue == QueueConverting && w.queue == QueueWaiting) ||
			(b.queue == w.queue && b.timer.gen < w.timer.gen)
	}
	return false
}

// FailRequest ends the queued request or conversion of lock id with err, as
// Fail does, but only if it is still the request of generation gen (as a
// WaitEdge named it): a request that has since been granted, cancelled or
// queued again is left alone and ErrNotPending returned. A deadlock
// detector that decided on an old observation can therefore never fail a
// request it did not observe.
func (t *Table) FailRequest(id LockID, gen uint64, err error) error {
	l, ferr := t.find(id)
	if ferr != nil {
		return ferr
	}
	if gen == 0 || l.queuedGen() != gen {
		return fmt.Errorf("%w: %v has no queued request %d", ErrNotPending, id, gen)
	}
	t.endQueued(l.res, l, err)
	return nil
}

// QueuedLocks yields the state of every queued request and conversion,
// oldest first, at a cost of the queued locks only (not every lock). The
// table must not change during the iteration.
func (t *Table) QueuedLocks() iter.Seq[LockState] {
	return func(yield func(LockState) bool) {
		for tm := t.queued.qnext; tm != &t.queued; tm = tm.qnext {
			if !yield(t.state(tm.lock)) {
				return
			}
		}
	}
}
