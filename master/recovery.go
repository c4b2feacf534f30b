package master

import (
	"cmp"
	"fmt"
	"iter"
	"slices"

	"github.com/seed-a6839e30/dlm/modes"
)

// ResourceState is a snapshot of one resource: its value block and its locks
// in queue order (granted, then converting, then waiting).
type ResourceState struct {
	Name  string
	LVB   LVB
	Locks []LockState
}

func (t *Table) state(l *lock) LockState {
	ls := LockState{
		Resource: l.res.name, Lock: l.key(), Owner: l.owner, Queue: l.queue,
		Granted: l.mode, Requested: l.rq, Token: l.token,
	}
	if l.queue == QueueWaiting {
		ls.Granted = modes.NL
	}
	if tm := l.timer; tm != nil && tm.lock == l {
		ls.Deadline, ls.Expires, ls.TTL = tm.deadline, tm.expires, tm.ttl
		if l.queue != QueueGranted {
			ls.Since = tm.since
		}
	}
	if lease := l.leaseOf(); lease != nil {
		ls.Session, ls.TTL = lease.session, lease.tm.ttl
		if l.queue != QueueWaiting {
			ls.Expires = lease.tm.expires
		}
	}
	if l.res.isSem() {
		ls.Permits, ls.Count = l.res.semPermits(), l.count()
	}
	return ls
}

// Resource returns a snapshot of the named resource, with a copy of its value.
func (t *Table) Resource(name string) (ResourceState, bool) {
	r := t.res[name]
	if r == nil {
		return ResourceState{}, false
	}
	rs := ResourceState{Name: name, LVB: t.value(r)}
	rs.LVB.Data = slices.Clone(rs.LVB.Data)
	for _, q := range []*lockList{&r.granted, &r.convert, &r.wait} {
		for l := q.front(); l != nil; l = q.next(l) {
			rs.Locks = append(rs.Locks, t.state(l))
		}
	}
	return rs, true
}

// value is r's value as a snapshot reports it. While recovery rebuilds r
// (Restore since the last FinishRecovery) it is the value FinishRecovery
// would settle on, so that a snapshot taken before the rebuild finished
// (its mastery moving on again) never vouches for a value nobody offered.
func (t *Table) value(r *resource) LVB {
	if i, ok := t.recovering[r]; ok {
		return t.restores[i].settle(r.readLVB())
	}
	return r.readLVB()
}

// AppendResources appends to dst a snapshot of every resource the table
// masters (in no particular order), as Resource would give them, except
// those a snapshot would say nothing about beyond their locks' own reports:
// a single lock and a value block never written nor invalidated. Recovery
// sends the rest to the resources' new masters, for queue order and values.
func (t *Table) AppendResources(dst []ResourceState) []ResourceState {
	for name, r := range t.res {
		if _, rebuilding := t.recovering[r]; !rebuilding && r.nqueued == 0 && r.granted.front() == r.granted.back() && (r.lvb == nil || (r.lvb.seq == 0 && r.lvb.valid)) {
			continue
		}
		rs := ResourceState{Name: name, LVB: t.value(r)}
		rs.LVB.Data = slices.Clone(rs.LVB.Data)
		n := int(r.nqueued)
		for l := r.granted.front(); l != nil; l = r.granted.next(l) {
			n++
		}
		rs.Locks = make([]LockState, 0, n)
		for _, q := range []*lockList{&r.granted, &r.convert, &r.wait} {
			for l := q.front(); l != nil; l = q.next(l) {
				rs.Locks = append(rs.Locks, t.state(l))
			}
		}
		dst = append(dst, rs)
	}
	return dst
}

// Resources yields the names of the resources the table masters, in no
// particular order. The table must not change during the iteration.
func (t *Table) Resources() iter.Seq[string] {
	return func(yield func(string) bool) {
		for name := range t.res {
			if !yield(name) {
				return
			}
		}
	}
}

// LocksOf yields the locks node holds or waits for in this table, in no
// particular order. The table must not change during the iteration.
func (t *Table) LocksOf(node NodeID) iter.Seq[LockState] {
	return func(yield func(LockState) bool) {
		ns := t.nodes[node]
		if ns == nil {
			return
		}
		for _, l := range ns.locks {
			if !yield(t.state(l)) {
				return
			}
		}
	}
}

// Nodes yields the nodes the table holds locks of (or remembers: a node
// whose locks all went), in no particular order. The table must not change
// during the iteration.
func (t *Table) Nodes() iter.Seq[NodeID] {
	return func(yield func(NodeID) bool) {
		for id := range t.nodes {
			if !yield(id) {
				return
			}
		}
	}
}

// PurgeNode removes every lock of node, as when the node has left the
// cluster, and grants what that lets through. A purged PW or EX lock marks
// its resource's value not valid: the node may have been changing it. No
// effect is produced for the purged locks themselves. It returns how many
// locks it removed.
func (t *Table) PurgeNode(node NodeID) int {
	n, _ := t.PurgeNodeUpTo(node, int(^uint(0)>>1))
	return n
}

// PurgeNodeUpTo is PurgeNode for at most max of the node's locks (max ≥ 1),
// so that a caller holding a lock over the table can let others in between
// batches; more says some of the node's locks are left. The table forgets
// the node once its last lock is gone.
func (t *Table) PurgeNodeUpTo(node NodeID, max int) (purged int, more bool) {
	victims := t.purgeVictims[:0]
	if ns := t.nodes[node]; ns != nil {
		for _, l := range ns.locks {
			if len(victims) == max {
				more = true
				break
			}
			victims = append(victims, l)
		}
	}
	t.prefetched = prefetch(victims)
	touched := t.purgeTouched
	if touched == nil {
		touched = make(map[*resource]struct{})
	}
	for _, l := range victims {
		r := l.res
		writer := l.queue != QueueWaiting && releaseWrites(l.mode)
		t.unlink(r, l)
		t.dropLock(l)
		switch {
		case r.empty():
			// Nothing left to grant: freed now, without a detour through
			// touched (most purged locks are alone on their resource).
			if len(touched) > 0 {
				delete(touched, r)
			}
			t.maybeFree(r) // an empty resource takes its value with it
			continue
		case writer:
			r.invalidateLVB()
		}
		if r.nqueued > 0 {
			touched[r] = struct{}{} // only queued requests can be granted now
		}
	}
	if !more {
		t.forgetNode(node)
	}
	t.settle(touched)
	clear(victims) // no pointers into freed locks are kept
	clear(touched)
	t.purgeVictims, t.purgeTouched = victims[:0], touched
	if !more {
		t.purgeVictims, t.purgeTouched = nil, nil // a purge done keeps nothing
	}
	return len(victims), more
}

// prefetch reads, for each lock, the lock, its resource and the first byte
// of the resource's name, and nothing else. In a table larger than the
// processor's caches each of those is a miss; the purge's work on one lock
// needs them one after another (lock, then resource, then name to find it
// in the index), and takes them one at a time, while here the reads for
// different locks do not wait for each other and are fetched together.
// It only warms the caches: the caller keeps the result only so that the
// reads are not optimised away.
func prefetch(locks []*lock) (sink uint8) {
	for _, l := range locks {
		if r := l.res; len(r.name) > 0 {
			sink ^= r.name[0]
		}
	}
	return sink
}

// forgetNode drops what the table remembers of node, so that a restarted
// node may count its lock ids from the beginning again.
func (t *Table) forgetNode(node NodeID) {
	if ns := t.nodes[node]; ns != nil {
		t.forgetLeases(ns)
	}
	delete(t.nodes, node)
	if t.lastNode == node {
		t.lastStats = nil
	}
}

// settle frees the emptied resources among touched and grants on the rest, in
// name order so effects come out the same way every time. Only resources with
// queued requests can produce effects, so only those are sorted.
func (t *Table) settle(touched map[*resource]struct{}) {
	var rs []*resource
	for r := range touched {
		switch {
		case r.empty():
			t.maybeFree(r)
		case r.nqueued > 0:
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b *resource) int { return cmp.Compare(a.name, b.name) })
	for _, r := range rs {
		t.grantPending(r)
	}
}

// Drop removes a resource and its locks without granting anything or
// producing effects, as when its mastery moves to another node that will
// rebuild it. It returns the number of locks removed.
func (t *Table) Drop(name string) int {
	r := t.res[name]
	if r == nil {
		return 0
	}
	n := 0
	for _, q := range []*lockList{&r.granted, &r.convert, &r.wait} {
		for l := q.front(); l != nil; l = q.front() {
			t.unlink(r, l)
			t.dropLock(l)
			n++
		}
	}
	t.maybeFree(r) // and forgets what a rebuild of r had learned
	return n
}

// restoreInfo collects what recovery learns of a resource's value.
type restoreInfo struct {
	r       *resource // nil once r was freed before FinishRecovery
	best    LVB       // freshest trustworthy copy offered so far, if hasBest
	hasBest bool
	fresh   bool // the resource did not exist before this recovery
}

// Restore adds one lock reported by a survivor to the resource it names, as
// recovery rebuilds a resource at its new master. Locks are queued in the
// order they are restored; nothing is granted and no effect is produced until
// FinishRecovery. A reported TTL starts afresh; a reported timeout is
// dropped (the requester enforces its own deadline by cancelling).
//
// A copy of the value offered with a lock granted above CR is a candidate
// for the resource's value; the one with the highest sequence wins (of
// equal ones, a valid one).
func (t *Table) Restore(ls LockState) error {
	if ls.Session != 0 && (ls.TTL == 0 || ls.Permits != 0 || ls.Count != 0) {
		return fmt.Errorf("%w: session %d: a lock of a session needs its TTL, and a semaphore takes none", ErrInvalidSession, ls.Session)
	}
	if ls.Permits != 0 || ls.Count != 0 {
		return t.restorePermits(ls)
	}
	r := t.res[ls.Resource]
	if err := t.checkRestore(ls, r); err != nil {
		return err
	}
	r, info := t.restoring(r, ls.Resource)
	l := t.newLock(ls.Lock, ls.Owner, r)
	t.addLock(l, t.node(ls.Lock.Node))
	l.token = ls.Token
	t.lastToken = max(t.lastToken, ls.Token)
	switch ls.Queue {
	case QueueWaiting:
		l.rq, l.queue = ls.Requested, QueueWaiting
		r.wait.pushBack(l)
		r.nqueued++
		t.trackQueued(l)
	case QueueConverting:
		r.held.add(ls.Granted)
		l.mode, l.rq, l.queue = ls.Granted, ls.Requested, QueueConverting
		r.convert.pushBack(l)
		r.nqueued++
		t.trackQueued(l)
	default:
		r.setGranted(l, ls.Granted)
	}
	switch {
	case ls.TTL == 0:
	case ls.Session != 0 && ls.Queue == QueueWaiting:
		l.timer.ttl, l.timer.lease = ls.TTL, t.sessionLease(t.node(l.node), l.node, ls.Session, ls.TTL)
		l.timer.lease.waiting++ // until granted
	case ls.Session != 0:
		t.joinLease(l, t.sessionLease(t.node(l.node), l.node, ls.Session, ls.TTL))
	case ls.Queue == QueueWaiting:
		l.timer.ttl = ls.TTL // from its grant
	default:
		tm := t.ensureTimer(l)
		tm.ttl, tm.expires = ls.TTL, t.now+ls.TTL
		t.timers.update(tm)
	}
	if ls.LVB != nil && ls.Queue != QueueWaiting && ls.Granted > modes.CR {
		info.offer(*ls.LVB)
	}
	return nil
}

// ReserveRestore prepares the table for about resources more resources to
// be restored before the next FinishRecovery, so that a rebuild of many
// does not grow its bookkeeping step by step. It changes nothing else.
func (t *Table) ReserveRestore(resources int) {
	if resources <= 0 {
		return
	}
	if t.recovering == nil {
		t.recovering = make(map[*resource]int32, resources)
	}
	t.restores = slices.Grow(t.restores, resources)
	// The restores will take the recycled resources and locks from the top
	// of the free lists: read them now, together (see prefetch).
	var sink uint8
	for _, r := range t.freeRes[max(0, len(t.freeRes)-resources):] {
		sink += uint8(r.nqueued)
	}
	for _, l := range t.freeLocks[max(0, len(t.freeLocks)-resources):] {
		sink += uint8(l.queue)
	}
	t.prefetched = sink
}

// RestoreValue offers a copy of a resource's value from elsewhere, such as
// the node that mastered it before (a join moves resources that way). It
// competes with the copies survivors report, by sequence.
func (t *Table) RestoreValue(name string, v LVB) error {
	if err := t.checkName(name); err != nil {
		return err
	}
	if len(v.Data) > t.cfg.MaxLVB {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrLVBTooLarge, len(v.Data), t.cfg.MaxLVB)
	}
	_, info := t.restoring(t.res[name], name)
	info.offer(v)
	return nil
}

// settle returns the value a rebuilt resource ends with, from cur, the
// one it has: the freshest copy offered; with none, cur, not valid if the
// resource did not exist before the rebuild (a lost holder may have
// written it, and nobody left can say what it is).
func (info *restoreInfo) settle(cur LVB) LVB {
	switch {
	case info.hasBest:
		return LVB{Data: info.best.Data, Seq: max(cur.Seq, info.best.Seq), Valid: info.best.Valid}
	case info.fresh:
		cur.Valid = false
	}
	return cur
}

// offer keeps the freshest copy: the highest sequence; of two of one
// sequence (one write), one that vouches for the value (valid) over one
// that does not, such as a copy its holder or former master can no longer
// vouch for.
func (info *restoreInfo) offer(v LVB) {
	if !info.hasBest || v.Seq > info.best.Seq || (v.Seq == info.best.Seq && v.Valid && !info.best.Valid) {
		info.best = LVB{Data: append(info.best.Data[:0], v.Data...), Seq: v.Seq, Valid: v.Valid}
		info.hasBest = true
	}
}

// checkRestore checks a reported lock against the table; r is the
// resource it names, nil if the table has none.
func (t *Table) checkRestore(ls LockState, r *resource) error {
	if err := t.checkName(ls.Resource); err != nil {
		return err
	}
	if err := checkMode(ls.Requested); err != nil {
		return err
	}
	if err := checkMode(ls.Granted); err != nil {
		return err
	}
	if ls.Queue < QueueGranted || ls.Queue > QueueWaiting {
		return fmt.Errorf("%w: queue %d", ErrInvalidFlags, ls.Queue)
	}
	if ls.LVB != nil && len(ls.LVB.Data) > t.cfg.MaxLVB {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrLVBTooLarge, len(ls.LVB.Data), t.cfg.MaxLVB)
	}
	if t.hasLock(ls.Lock) {
		return fmt.Errorf("%w: %v", ErrLockExists, ls.Lock)
	}
	if r != nil && r.isSem() {
		return fmt.Errorf("%w: %q is a semaphore", ErrKind, ls.Resource)
	}
	if ls.Queue != QueueWaiting && r != nil && !r.held.fits(ls.Granted) {
		return fmt.Errorf("%w: %v granted %v on %q", ErrIncompatible, ls.Lock, ls.Granted, ls.Resource)
	}
	return nil
}

// restoring returns the resource name being rebuilt (r, if the table has
// it) and what recovery has learned of it so far. The info is valid until
// the next call of restoring.
func (t *Table) restoring(r *resource, name string) (*resource, *restoreInfo) {
	if t.recovering == nil {
		t.recovering = make(map[*resource]int32)
	}
	fresh := r == nil
	if fresh {
		r = t.newResource(name)
	} else if i, ok := t.recovering[r]; ok {
		return r, &t.restores[i]
	}
	t.recovering[r] = int32(len(t.restores))
	t.restores = append(t.restores, restoreInfo{r: r, fresh: fresh})
	return r, &t.restores[len(t.restores)-1]
}

// FinishRecovery completes the resources rebuilt by Restore since the last
// call:
//   - the value is the freshest copy offered by a survivor that held the lock
//     above CR (or by RestoreValue); with none, a rebuilt resource's value is
//     marked not valid, since a lost holder may have written it;
//   - conversions are granted without regard to queue order (the VMS rule
//     for recovery, which may have reordered them);
//   - a conversion left in a conversion deadlock fails with ErrDeadlock;
//   - then the usual grants and blocking notifications follow.
//
// Effects report everything granted or failed.
func (t *Table) FinishRecovery() {
	for t.FinishRecoveryUpTo(int(^uint(0) >> 1)) {
	}
}

// FinishRecoveryUpTo is FinishRecovery for at most max of the resources
// restored (max ≥ 1), so that a caller holding a lock over the table can let
// others in between batches; it reports whether some are left. Effects come
// out in name order within a batch.
func (t *Table) FinishRecoveryUpTo(max int) (more bool) {
	var rs []*resource
	for len(t.restores) > 0 {
		if max == 0 {
			more = true
			break
		}
		i := len(t.restores) - 1
		info := t.restores[i]
		t.restores[i] = restoreInfo{} // no pointer kept into what may be freed
		t.restores = t.restores[:i]
		r := info.r
		if r == nil {
			continue // freed meanwhile: nothing to settle
		}
		max--
		delete(t.recovering, r)
		// Only a resource with queued requests can produce effects: the
		// others are settled here, in no particular order.
		if t.finishValue(r, &info); r.nqueued > 0 {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b *resource) int { return cmp.Compare(a.name, b.name) })
	for _, r := range rs {
		t.finishGrants(r)
	}
	if !more {
		// Small bookkeeping (emptied: every entry was taken or freed) is
		// kept for the next batch of a rebuild finished batch by batch;
		// a large one goes.
		if cap(t.restores) > keepRestores {
			t.recovering, t.restores = nil, nil
		}
	}
	return more
}

// keepRestores bounds the restore bookkeeping a table keeps between
// recoveries, in resources.
const keepRestores = 512

// finishValue settles a restored resource's value (and frees it if it
// holds no lock). A semaphore has no value.
func (t *Table) finishValue(r *resource, info *restoreInfo) {
	if r.isSem() {
		if r.empty() {
			t.maybeFree(r)
		}
		return
	}
	if v := info.settle(r.readLVB()); r.lvb != nil || v.Seq != 0 || !v.Valid || len(v.Data) != 0 {
		// (else a value never written: nothing to store)
		s := r.lvbFor()
		s.data = append(s.data[:0], v.Data...)
		s.seq, s.valid = v.Seq, v.Valid
	}
	if r.empty() {
		t.maybeFree(r)
	}
}

// finishGrants grants what a restored resource with queued requests lets
// through, the recovery way (see FinishRecovery).
func (t *Table) finishGrants(r *resource) {
	if r.isSem() {
		t.grantPending(r) // permits never convert
		return
	}
	t.grantConversionsUnordered(r)
	t.breakConversionDeadlocks(r)
	t.grantPending(r)
}

// grantConversionsUnordered grants every queued conversion compatible with
// the other locks, in any position of the queue, until none is.
func (t *Table) grantConversionsUnordered(r *resource) {
	for progress := true; progress; {
		progress = false
		for l := r.convert.front(); l != nil; {
			next := r.convert.next(l)
			if !r.conflicts(l.rq, l) {
				t.grantQueued(r, l)
				progress = true
			}
			l = next
		}
	}
}

// breakConversionDeadlocks fails each queued conversion whose granted mode
// blocks a conversion queued ahead of it: the two could never be granted.
func (t *Table) breakConversionDeadlocks(r *resource) {
	for l := r.convert.front(); l != nil; {
		next := r.convert.next(l)
		for c := r.convert.front(); c != l; c = r.convert.next(c) {
			if !modes.Compatible(l.mode, c.rq) {
				t.emitFailed(r, l, fmt.Errorf("%w: conversion %v %v->%v on %q, after recovery", ErrDeadlock, l.key(), l.mode, l.rq, r.name))
				t.unlink(r, l)
				l.rq = l.mode
				r.setGranted(l, l.mode)
				break
			}
		}
		l = next
	}
}
