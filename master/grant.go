package master

import "github.com/seed-a6839e30/dlm/modes"

// The grant rules follow the VAXcluster rules as the Linux DLM's
// _can_be_granted states them (anchors.md §2):
//
//   - a new request is granted at once only if it is compatible with every
//     granted mode and both queues are empty (no barging), unless EXPEDITE;
//   - a conversion processed for the first time is granted in place if it is
//     compatible with every other lock's granted mode, even with other
//     conversions queued; with QUECVT only if no conversion is queued;
//   - queued conversions are granted strictly in order, head first, and
//     always before any waiting request;
//   - waiting requests are granted strictly in order, head first, and only
//     once no conversion is queued.

// canGrantNew reports whether a new request for mode rq can be granted now.
func (r *resource) canGrantNew(rq modes.Mode, flags Flags) bool {
	if flags&Expedite != 0 {
		return true
	}
	return r.convert.empty() && r.wait.empty() && !r.conflicts(rq, nil)
}

// canGrantConvertNow reports whether l's conversion to l.rq can be granted in
// place on first processing.
func (r *resource) canGrantConvertNow(l *lock, quecvt bool) bool {
	if r.conflicts(l.rq, l) {
		return false
	}
	return !quecvt || r.convert.empty()
}

// convDeadlock reports whether queueing l's conversion would deadlock: some
// conversion already queued wants a mode that l's granted mode blocks, while
// l would wait behind it.
func (r *resource) convDeadlock(l *lock) bool {
	for c := r.convert.front(); c != nil; c = r.convert.next(c) {
		if c != l && !modes.Compatible(l.mode, c.rq) {
			return true
		}
	}
	return false
}

// setGranted moves l onto the granted queue in mode m, keeping the held-mode
// counts right. l must be off every queue.
func (r *resource) setGranted(l *lock, m modes.Mode) {
	r.held.add(m)
	l.mode, l.rq, l.queue = m, m, QueueGranted
	l.bast = modes.NL // a new grant starts a new blocking episode
	r.granted.pushBack(l)
}

// unlink takes l off whichever queue holds it, drops its granted mode from
// the counts and ends the identity of its queued request, if any. It does
// not touch the lock index.
func (t *Table) unlink(r *resource, l *lock) {
	queued := l.queue == QueueConverting || l.queue == QueueWaiting
	r.unlink(l)
	if queued {
		t.leaveQueue(l)
	}
}

// unlink takes l off whichever queue holds it and drops its granted mode
// from the counts. Table.unlink does the rest.
func (r *resource) unlink(l *lock) {
	switch l.queue {
	case QueueGranted:
		r.granted.remove(l)
		r.held.remove(l.mode)
		if r.held.sem {
			r.held.cr -= l.count() // the permits come back
		}
	case QueueConverting:
		r.convert.remove(l)
		r.held.remove(l.mode)
		r.nqueued--
	case QueueWaiting:
		r.wait.remove(l)
		r.nqueued--
	}
	l.queue = 0
}

// grantLock grants l its requested mode. from is its old granted mode, or
// ok=false for a new lock. It issues a token for a new lock or an
// up-conversion and reads the LVB where the rules say so. l must be off
// every queue.
func (t *Table) grantLock(r *resource, l *lock, from modes.Mode, isNew bool) (res Result) {
	to := l.rq
	r.setGranted(l, to)
	if isNew || modes.IsUp(from, to) {
		l.token = t.nextToken()
	}
	if lvbReads(from, to, isNew) {
		res.LVBRead = true
		res.LVB = r.readLVB()
	}
	if tm := l.timer; tm != nil && tm.lock == l {
		tm.deadline = 0
		switch ls := tm.lease; {
		case isNew && ls != nil:
			tm.ttl, tm.lease = 0, nil
			t.timers.update(tm)
			t.releaseIdleTimer(l)
			t.joinLease(l, ls)
			t.leaveWaiting(ls) // after the join: a lease left dormant and unwaited goes
		case isNew && tm.ttl > 0:
			tm.expires = t.now + tm.ttl
			fallthrough
		default:
			t.timers.update(tm)
			t.releaseIdleTimer(l)
		}
	}
	res.Status, res.Mode, res.Token = Granted, to, l.token
	return res
}

// grantQueued grants a lock that was waiting on a queue and reports it.
func (t *Table) grantQueued(r *resource, l *lock) {
	isNew := l.queue == QueueWaiting
	from := l.mode
	t.unlink(r, l)
	res := t.grantLock(r, l, from, isNew)
	t.emit(Effect{
		Kind: EffectGranted, Resource: r.name, Lock: l.key(), Owner: l.owner,
		Mode: res.Mode, Token: res.Token, LVBRead: res.LVBRead, LVB: res.LVB,
	})
}

// grantPending grants what the queues allow after a lock left, converted or
// was cancelled: conversions first and in order, then waiting requests in
// order, each stopping at the first that cannot be granted. Then it sends the
// blocking notifications the remaining queue calls for.
func (t *Table) grantPending(r *resource) {
	if r.isSem() {
		t.grantPermitsPending(r)
		return
	}
	for l := r.convert.front(); l != nil; l = r.convert.front() {
		if r.conflicts(l.rq, l) {
			break
		}
		t.grantQueued(r, l)
	}
	if r.convert.empty() {
		for l := r.wait.front(); l != nil; l = r.wait.front() {
			if r.conflicts(l.rq, nil) {
				break
			}
			t.grantQueued(r, l)
		}
	}
	t.sendBlocking(r)
}

// sendBlocking notifies each granted lock (including those with a queued
// conversion, which still hold their granted mode) that blocks a queued
// request. A lock hears the strongest mode it blocks, once per blocking
// episode: again only when a stronger mode comes to be blocked, or after it
// is granted anew (which resets the episode).
func (t *Table) sendBlocking(r *resource) {
	if r.nqueued == 0 {
		return
	}
	var want [modes.Count]uint32 // queued requests by requested mode
	for l := r.convert.front(); l != nil; l = r.convert.next(l) {
		want[l.rq]++
	}
	for l := r.wait.front(); l != nil; l = r.wait.next(l) {
		want[l.rq]++
	}
	for l := r.granted.front(); l != nil; l = r.granted.next(l) {
		t.notifyBlocker(r, l, &want)
	}
	for l := r.convert.front(); l != nil; l = r.convert.next(l) {
		t.notifyBlocker(r, l, &want)
	}
}

func (t *Table) notifyBlocker(r *resource, l *lock, want *[modes.Count]uint32) {
	for m := modes.EX; m > modes.NL; m-- {
		n := want[m]
		if l.queue == QueueConverting && l.rq == m {
			n-- // a lock does not block itself
		}
		if n == 0 || modes.Compatible(l.mode, m) {
			continue
		}
		if m > l.bast {
			l.bast = m
			t.emit(Effect{Kind: EffectBlocking, Resource: r.name, Lock: l.key(), Owner: l.owner, Mode: m, Token: l.token})
		}
		return
	}
}
