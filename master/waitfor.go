package master

import (
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

// WaitEdge says that Waiter's queued request on Resource cannot be granted
// before Blocker's lock changes: Blocker holds a mode that conflicts with it,
// or Blocker's own request is queued ahead of it (the queues are FIFO).
type WaitEdge struct {
	Resource string
	Waiter   Party
	Blocker  Party
	// Mode is the mode the waiter asks for.
	Mode modes.Mode
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
	emit := func(b *lock) bool {
		if b == w {
			return true
		}
		return yield(WaitEdge{Resource: r.name, Waiter: party(w), Blocker: party(b), Mode: w.rq})
	}
	for _, q := range []*lockList{&r.granted, &r.convert} {
		for b := q.front(); b != nil; b = q.next(b) {
			if !modes.Compatible(b.mode, w.rq) && !emit(b) {
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
		return emit(ahead)
	}
	return true
}

func party(l *lock) Party { return Party{Owner: l.owner, Lock: l.key()} }
