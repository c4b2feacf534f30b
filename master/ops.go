package master

import (
	"fmt"
	"slices"

	"github.com/seed-a6839e30/dlm/modes"
)

func (t *Table) checkName(name string) error {
	switch {
	case name == "":
		return ErrEmptyName
	case len(name) > t.cfg.MaxNameLen:
		return fmt.Errorf("%w: %d bytes, limit %d", ErrNameTooLong, len(name), t.cfg.MaxNameLen)
	}
	return nil
}

func checkMode(m modes.Mode) error {
	if !m.Valid() {
		return fmt.Errorf("%w: %w: %d", ErrInvalidMode, modes.ErrInvalidMode, uint8(m))
	}
	return nil
}

func (t *Table) checkLVB(op LVBOp, data []byte) error {
	switch {
	case op > LVBInvalidate:
		return fmt.Errorf("%w: LVB op %d", ErrInvalidFlags, op)
	case len(data) > t.cfg.MaxLVB:
		return fmt.Errorf("%w: %d bytes, limit %d", ErrLVBTooLarge, len(data), t.cfg.MaxLVB)
	}
	return nil
}

func checkRequestFlags(f Flags, m modes.Mode) error {
	switch {
	case f&^flagsMask != 0:
		return fmt.Errorf("%w: unknown flags %v", ErrInvalidFlags, f)
	case f&(QueueConvert|ConvDeadlock) != 0:
		return fmt.Errorf("%w: %v is only for conversions", ErrInvalidFlags, f&(QueueConvert|ConvDeadlock))
	case f&Expedite != 0 && m != modes.NL:
		return fmt.Errorf("%w: expedite needs NL, not %v", ErrInvalidFlags, m)
	case f&Expedite != 0 && f&NoQueue != 0:
		return fmt.Errorf("%w: expedite excludes noqueue", ErrInvalidFlags)
	}
	return nil
}

func checkConvertFlags(f Flags, from, to modes.Mode) error {
	switch {
	case f&^flagsMask != 0:
		return fmt.Errorf("%w: unknown flags %v", ErrInvalidFlags, f)
	case f&Expedite != 0:
		return fmt.Errorf("%w: expedite is only for new NL requests", ErrInvalidFlags)
	case f&QueueConvert != 0 && !modes.IsUp(from, to):
		return fmt.Errorf("%w: quecvt needs an up-conversion, not %v->%v", ErrInvalidFlags, from, to)
	case f&ConvDeadlock != 0 && f&NoQueue != 0:
		return fmt.Errorf("%w: convdeadlk excludes noqueue", ErrInvalidFlags)
	}
	return nil
}

// Request asks for a new lock. It is granted at once (Status Granted), or
// queued (Status Queued: a later EffectGranted or EffectFailed ends it), or
// refused with an error that leaves the table as it was: an input error, a
// limit (ErrLimit), or ErrNotQueued for a NoQueue request that would wait.
func (t *Table) Request(req Request) (Result, error) {
	if err := t.checkName(req.Resource); err != nil {
		return Result{}, err
	}
	if req.Session != 0 && (req.TTL == 0 || req.Permits != 0 || req.Count != 0) {
		return Result{}, fmt.Errorf("%w: session %d: a lock of a session needs its TTL, and a semaphore takes none", ErrInvalidSession, req.Session)
	}
	if req.Permits != 0 || req.Count != 0 {
		return t.requestPermits(req)
	}
	if err := checkMode(req.Mode); err != nil {
		return Result{}, err
	}
	if err := checkRequestFlags(req.Flags, req.Mode); err != nil {
		return Result{}, err
	}
	if t.hasLock(req.Lock) {
		return Result{}, fmt.Errorf("%w: %v", ErrLockExists, req.Lock)
	}
	ns := t.node(req.Lock.Node)
	if t.cfg.MaxLocksPerNode > 0 && len(ns.locks) >= t.cfg.MaxLocksPerNode {
		return Result{}, fmt.Errorf("%w: node %d has %d locks", ErrLimit, req.Lock.Node, len(ns.locks))
	}
	r := t.res[req.Resource]
	if r != nil && r.isSem() {
		return Result{}, fmt.Errorf("%w: %q is a semaphore", ErrKind, req.Resource)
	}
	if r != nil && !r.canGrantNew(req.Mode, req.Flags) {
		if err := t.checkQueueable(r, req.Flags); err != nil {
			return Result{}, err
		}
	}
	if r == nil {
		r = t.resource(req.Resource, true)
	}
	l := t.newLock(req.Lock, req.Owner, r)
	l.rq = req.Mode
	t.addLock(l, ns)
	now := r.canGrantNew(req.Mode, req.Flags)
	var ls *lease
	if req.Session != 0 {
		ls = t.sessionLease(ns, req.Lock.Node, req.Session, req.TTL)
	}
	if req.Timeout > 0 || (req.TTL > 0 && (ls == nil || !now)) {
		l.timer = &timer{lock: l, ttl: req.TTL, lease: ls, index: -1}
		if ls != nil {
			ls.waiting++ // until granted: grantLock joins it to the lease
		}
		if req.Timeout > 0 {
			l.timer.deadline = t.now + req.Timeout
		}
	}
	if now {
		if ls != nil && l.timer == nil {
			t.joinLease(l, ls)
		}
		res := t.grantLock(r, l, modes.NL, true)
		return res, nil
	}
	l.queue = QueueWaiting
	r.wait.pushBack(l)
	r.nqueued++
	t.trackQueued(l)
	t.timers.update(l.timer)
	t.sendBlocking(r)
	return Result{Status: Queued, Mode: req.Mode}, nil
}

// checkQueueable decides whether a request that cannot be granted now may
// wait: not with NoQueue, and not past the waiter limit.
func (t *Table) checkQueueable(r *resource, f Flags) error {
	if f&NoQueue != 0 {
		return ErrNotQueued
	}
	if t.cfg.MaxWaitersPerResource > 0 && int(r.nqueued) >= t.cfg.MaxWaitersPerResource {
		return fmt.Errorf("%w: %d requests already wait on %q", ErrLimit, r.nqueued, r.name)
	}
	return nil
}

// Convert changes the mode of a granted lock. A down-conversion (or a
// conversion to the same mode) is always granted in place; an up-conversion
// is granted in place if the rules allow, else it queues (Status Queued; the
// lock keeps its granted mode until an effect ends the conversion). When the
// conversion would deadlock with another queued conversion it fails with
// ErrDeadlock and the lock keeps its mode, or, with ConvDeadlock, the lock is
// demoted to NL (Result.Demoted) and the conversion goes on from there.
//
// If the lock is granted PW or EX and the conversion is to a weaker mode (or
// PW to PW, EX to EX), c.LVBOp is applied to the resource's value first.
func (t *Table) Convert(c Convert) (Result, error) {
	if err := checkMode(c.Mode); err != nil {
		return Result{}, err
	}
	if err := t.checkLVB(c.LVBOp, c.LVB); err != nil {
		return Result{}, err
	}
	l, err := t.lookup(c.Lock, c.Owner)
	if err != nil {
		return Result{}, err
	}
	if l.res.isSem() {
		return Result{}, fmt.Errorf("%w: %v holds permits of a semaphore, which do not convert", ErrKind, c.Lock)
	}
	switch l.queue {
	case QueueWaiting:
		return Result{}, fmt.Errorf("%w: %v", ErrNotGranted, c.Lock)
	case QueueConverting:
		return Result{}, fmt.Errorf("%w: %v", ErrConvertPending, c.Lock)
	}
	if err := checkConvertFlags(c.Flags, l.mode, c.Mode); err != nil {
		return Result{}, err
	}
	r, from := l.res, l.mode
	if !modes.IsUp(from, c.Mode) {
		return t.convertDown(r, l, c), nil
	}
	l.rq = c.Mode
	if r.canGrantConvertNow(l, c.Flags&QueueConvert != 0) {
		return t.convertInPlace(r, l), nil
	}
	demoted := false
	if r.convDeadlock(l) {
		if c.Flags&ConvDeadlock == 0 {
			l.rq = from
			return Result{}, fmt.Errorf("%w: conversion %v %v->%v on %q", ErrDeadlock, c.Lock, from, c.Mode, r.name)
		}
		t.demote(r, l)
		demoted = true
		if r.canGrantConvertNow(l, c.Flags&QueueConvert != 0) {
			res := t.convertInPlace(r, l)
			res.Demoted = true
			return res, nil
		}
	}
	if err := t.checkQueueable(r, c.Flags); err != nil {
		l.rq = l.mode
		if demoted {
			t.grantPending(r)
		}
		return Result{Demoted: demoted, Mode: l.mode}, err
	}
	t.queueConversion(r, l, c.Timeout)
	return Result{Status: Queued, Mode: l.mode, Token: l.token, Demoted: demoted}, nil
}

func (t *Table) convertDown(r *resource, l *lock, c Convert) Result {
	if lvbWrites(l.mode, c.Mode) {
		r.applyLVB(c.LVBOp, c.LVB)
	}
	l.rq = c.Mode
	res := t.convertInPlace(r, l)
	return res
}

// convertInPlace grants l.rq to a lock on the granted queue and lets others
// in if the change allows it.
func (t *Table) convertInPlace(r *resource, l *lock) Result {
	from := l.mode
	t.unlink(r, l)
	res := t.grantLock(r, l, from, false)
	t.grantPending(r)
	return res
}

// demote drops l's granted mode to NL (CONVDEADLK) and grants whatever that
// lets through, keeping l's requested mode.
func (t *Table) demote(r *resource, l *lock) {
	rq := l.rq
	r.held.remove(l.mode)
	l.mode = modes.NL
	l.rq = rq
	t.grantPending(r)
}

func (t *Table) queueConversion(r *resource, l *lock, timeout Tick) {
	r.granted.remove(l)
	l.queue = QueueConverting
	r.convert.pushBack(l)
	r.nqueued++
	t.trackQueued(l)
	if timeout > 0 {
		l.timer.deadline = t.now + timeout
		t.timers.update(l.timer)
	}
	t.sendBlocking(r)
}

// Release gives up a lock in whatever state it is: granted, converting or
// waiting (the Linux FORCEUNLOCK). A queued part ends with an EffectFailed
// (ErrCancelled) for the lock. If the lock was granted PW or EX, rel.LVBOp is
// applied to the resource's value.
func (t *Table) Release(rel Release) error {
	if err := t.checkLVB(rel.LVBOp, rel.LVB); err != nil {
		return err
	}
	l, err := t.lookup(rel.Lock, rel.Owner)
	if err != nil {
		return err
	}
	r := l.res
	if l.queue != QueueWaiting && releaseWrites(l.mode) {
		r.applyLVB(rel.LVBOp, rel.LVB)
	}
	if l.queue != QueueGranted {
		t.emitFailed(r, l, ErrCancelled)
	}
	t.removeLock(r, l)
	return nil
}

// removeLock takes l out of the table and lets the queues move.
func (t *Table) removeLock(r *resource, l *lock) {
	t.unlink(r, l)
	t.dropLock(l)
	if r.empty() {
		t.maybeFree(r)
		return
	}
	t.grantPending(r)
}

func (t *Table) emitFailed(r *resource, l *lock, err error) {
	e := Effect{Kind: EffectFailed, Resource: r.name, Lock: l.key(), Owner: l.owner, Err: err}
	if l.queue == QueueConverting {
		e.Mode, e.Token = l.mode, l.token
	}
	t.emit(e)
}

// Cancel ends a queued request or conversion: a waiting request is removed,
// a queued conversion reverts to the lock's granted mode. The request ends
// with an EffectFailed (ErrCancelled). ErrNotPending if nothing is queued.
func (t *Table) Cancel(id LockID, owner OwnerID) error {
	l, err := t.lookup(id, owner)
	if err != nil {
		return err
	}
	if l.queue == QueueGranted {
		return fmt.Errorf("%w: %v", ErrNotPending, id)
	}
	t.endQueued(l.res, l, ErrCancelled)
	return nil
}

// endQueued fails l's queued request or conversion with err.
func (t *Table) endQueued(r *resource, l *lock, err error) {
	t.emitFailed(r, l, err)
	if l.queue == QueueWaiting {
		t.removeLock(r, l)
		return
	}
	t.unlink(r, l)
	l.rq = l.mode
	r.setGranted(l, l.mode)
	if tm := l.timer; tm != nil && tm.lock == l {
		tm.deadline = 0
		t.timers.update(tm)
		t.releaseIdleTimer(l)
	}
	t.grantPending(r)
}

// Fail ends a queued request or conversion with err, as Cancel does with
// ErrCancelled: a node that lost its quorum fails what waits on its tables.
func (t *Table) Fail(id LockID, err error) error {
	l, ferr := t.find(id)
	if ferr != nil {
		return ferr
	}
	if l.queue == QueueGranted {
		return fmt.Errorf("%w: %v", ErrNotPending, id)
	}
	t.endQueued(l.res, l, err)
	return nil
}

// Queued returns the ids of every queued request and conversion, resources
// in name order and each queue in order.
func (t *Table) Queued() []LockID {
	names := make([]string, 0, len(t.res))
	for name, r := range t.res {
		if r.nqueued > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var out []LockID
	for _, name := range names {
		r := t.res[name]
		for _, q := range []*lockList{&r.convert, &r.wait} {
			for l := q.front(); l != nil; l = q.next(l) {
				out = append(out, l.key())
			}
		}
	}
	return out
}

// Renew restarts the TTL of a lock that has one. It is a no-op for a lock
// without a TTL. Only the lock's node renews it, so no owner is checked: the
// id names the node.
func (t *Table) Renew(id LockID) error {
	l, err := t.find(id)
	if err != nil {
		return err
	}
	if tm := l.timer; tm != nil && tm.lock == l && tm.ttl > 0 && l.queue != QueueWaiting {
		l.timer.expires = t.now + l.timer.ttl
		t.timers.update(l.timer)
	}
	return nil
}
