package master

import "slices"

// A lease is what the table keeps of one session of one node: the TTL the
// session's locks live by, when they expire, and which they are. The locks
// of a session are renewed together (RenewSession), so they share one
// deadline: a granted lock of a session points at its lease's timer, in
// the heap once for all of them, rather than having a timer of its own,
// and costs the lease one id. A lock of a session has a timer of its own
// only while it has a request queued (or a timeout), and that timer names
// the lease.
//
// ids is kept lazily: a lock that leaves the table (released, purged,
// dropped as its mastery moves) keeps its id there until the slice is next
// compacted, which happens when it is full, so the ids stay at most about
// twice the live locks. Whether an id is still the lease's is asked of its
// lock (holds).
//
// A lease with no granted lock and requests of the session still waiting
// is dormant: out of the heap, expiry 0, until one of them is granted.
type lease struct {
	tm      timer // lock nil, lease this lease; expires and ttl are the lease's
	node    NodeID
	session uint64
	waiting int32 // requests of the session queued here and not granted yet
	ids     []uint64
}

// isLease says the timer is a lease's, shared by the session's locks.
func (tm *timer) isLease() bool { return tm.lock == nil && tm.lease != nil }

// leaseOf returns the lease l lives by, nil if none.
func (l *lock) leaseOf() *lease {
	if l.timer == nil {
		return nil
	}
	return l.timer.lease
}

// holds says l is a lock of the lease: granted (or converting) by it.
func (ls *lease) holds(l *lock) bool {
	return l != nil && l.queue != QueueWaiting && l.leaseOf() == ls
}

// sessionLease returns node's lease of session, made (dormant) if the node
// has none, with at least ttl.
func (t *Table) sessionLease(ns *nodeStats, node NodeID, session uint64, ttl Tick) *lease {
	ls := ns.leases[session]
	if ls == nil {
		if ns.leases == nil {
			ns.leases = make(map[uint64]*lease)
		}
		ls = &lease{node: node, session: session}
		ls.tm = timer{lease: ls, index: -1}
		ns.leases[session] = ls
	}
	ls.tm.ttl = max(ls.tm.ttl, ttl) // one session has one TTL; a longer one is the safe side
	return ls
}

// joinLease puts l, just granted, in the lease, and keeps the lease until
// at least its TTL from now: a lock's TTL runs from its grant, as a lock's
// own does. l lives by the lease's timer unless it has one of its own
// (a rebuilt conversion), which then names the lease.
func (t *Table) joinLease(l *lock, ls *lease) {
	t.extendLease(ls)
	if len(ls.ids) == cap(ls.ids) && len(ls.ids) >= 8 {
		ls.compact(t.nodes[ls.node])
	}
	ls.ids = append(ls.ids, l.id)
	if l.timer == nil {
		l.timer = &ls.tm
	} else {
		l.timer.lease = ls
	}
}

// extendLease keeps the lease until at least its TTL from now.
func (t *Table) extendLease(ls *lease) {
	if e := t.now + ls.tm.ttl; e > ls.tm.expires {
		ls.tm.expires = e
		t.timers.update(&ls.tm)
	}
}

// compact drops the ids of locks no longer the lease's, and repeats (a lock
// that moved away and came back, joining again).
func (ls *lease) compact(ns *nodeStats) {
	slices.Sort(ls.ids)
	ls.ids = slices.Compact(ls.ids)
	ls.ids = slices.DeleteFunc(ls.ids, func(id uint64) bool { return !ls.holds(ns.locks[id]) })
}

// RenewSession restarts the TTL of every lock of node's session in the
// table. It reports whether the table has a lease for the session with a
// lock granted: none when none of the session's locks were granted here
// since the lease last ended.
func (t *Table) RenewSession(node NodeID, session uint64) bool {
	ns := t.nodes[node]
	if ns == nil {
		return false
	}
	ls := ns.leases[session]
	if ls == nil || ls.tm.expires == 0 {
		return false
	}
	t.extendLease(ls)
	return true
}

// expireLease ends a lease whose TTL ran out: each of its locks still
// granted (or converting) is released as an expired TTL lock is. The lease
// stays, dormant, if requests of the session wait.
func (t *Table) expireLease(ls *lease) {
	ls.tm.expires = 0
	t.timers.update(&ls.tm)
	ns := t.nodes[ls.node]
	ids := ls.ids
	ls.ids = nil
	if ls.waiting == 0 {
		delete(ns.leases, ls.session)
	}
	for _, id := range ids {
		// A lock released here may let a waiting lock of the same session
		// in, which joins the lease afresh: it is not among ids.
		if l := ns.locks[id]; ls.holds(l) {
			t.expire(l.res, l)
		}
	}
}

// leaveWaiting is called as a waiting request of the lease's session ends,
// granted or not: a dormant lease with nothing left waiting goes.
func (t *Table) leaveWaiting(ls *lease) {
	ls.waiting--
	if ls.waiting == 0 && ls.tm.expires == 0 {
		if ns := t.nodes[ls.node]; ns != nil && ns.leases[ls.session] == ls {
			delete(ns.leases, ls.session)
		}
	}
}

// forgetLeases takes a forgotten node's leases off the heap.
func (t *Table) forgetLeases(ns *nodeStats) {
	for _, ls := range ns.leases {
		t.timers.remove(&ls.tm)
	}
}
