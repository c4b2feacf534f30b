package master

import (
	"fmt"

	"github.com/seed-a6839e30/dlm/modes"
)

// A semaphore is a resource whose locks hold permits instead of modes: a
// counting semaphore of Permits permits, mastered, queued, timed out,
// purged and rebuilt like any resource. Its rules:
//
//   - a request for Count permits is granted at once only if nobody waits
//     and Count permits are free; otherwise it queues (or, with NoQueue,
//     fails with ErrNotQueued);
//   - when permits come back, waiting requests are granted strictly in
//     order from the head, stopping at the first whose permits are not all
//     free: no barging, so a request for 3 is never overtaken by a later
//     request for 1;
//   - every grant gets a fencing token from the table's counter, as a
//     lock's grant does;
//   - a semaphore exists while it has locks, and every request (and every
//     restored lock) carries its permit count: one that says another count
//     is refused (ErrPermitsMismatch), and a name is a semaphore or a lock
//     resource, never both at once (ErrKind);
//   - there are no conversions, value blocks or blocking notifications.
//     Deadlock detection sees a waiting request wait for the request ahead
//     of it (BlockAhead), not for the holders: no one holder's release is
//     what a waiter needs.
//
// A semaphore's locks are NL locks on its resource; the permits a lock
// holds or asks for live in its timer (a semaphore lock always has one),
// the semaphore's permits and those granted in the resource's held summary
// (heldModes.sem).

// MaxPermits caps a semaphore's permits.
const MaxPermits = 1 << 24

func (r *resource) isSem() bool        { return r.held.sem }
func (r *resource) semPermits() uint32 { return r.held.shared }
func (r *resource) semUsed() uint32    { return r.held.cr }

// canGrantPermits reports whether a new request for n permits can be
// granted now.
func (r *resource) canGrantPermits(n uint32) bool {
	return r.wait.empty() && n <= r.semPermits()-r.semUsed()
}

// count returns the permits a semaphore lock holds or asks for.
func (l *lock) count() uint32 {
	if l.timer == nil {
		return 0
	}
	return l.timer.count
}

func checkPermits(permits, count uint32) error {
	switch {
	case permits == 0 || permits > MaxPermits:
		return fmt.Errorf("%w: a semaphore of %d permits, must be 1..%d", ErrInvalidPermits, permits, MaxPermits)
	case count == 0 || count > permits:
		return fmt.Errorf("%w: %d permits of a semaphore of %d", ErrInvalidPermits, count, permits)
	}
	return nil
}

// checkSemaphore says whether an existing resource r can take a lock on a
// semaphore of permits permits.
func checkSemaphore(r *resource, permits uint32) error {
	switch {
	case r == nil:
		return nil
	case !r.isSem():
		return fmt.Errorf("%w: %q has locks in modes, not permits", ErrKind, r.name)
	case r.semPermits() != permits:
		return fmt.Errorf("%w: %q has %d permits, not %d", ErrPermitsMismatch, r.name, r.semPermits(), permits)
	}
	return nil
}

// makeSemaphore makes r, just created, a semaphore of permits permits.
func (r *resource) makeSemaphore(permits uint32) {
	r.held.sem, r.held.shared = true, permits
}

// requestPermits is Request for a semaphore (req.Permits > 0).
func (t *Table) requestPermits(req Request) (Result, error) {
	switch {
	case req.Mode != modes.NL:
		return Result{}, fmt.Errorf("%w: a semaphore request holds no mode (NL), not %v", ErrInvalidFlags, req.Mode)
	case req.Flags&^NoQueue != 0:
		return Result{}, fmt.Errorf("%w: %v on a semaphore request", ErrInvalidFlags, req.Flags&^NoQueue)
	}
	if err := checkPermits(req.Permits, req.Count); err != nil {
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
	if err := checkSemaphore(r, req.Permits); err != nil {
		return Result{}, err
	}
	if r != nil && !r.canGrantPermits(req.Count) {
		if err := t.checkQueueable(r, req.Flags); err != nil {
			return Result{}, err
		}
	}
	if r == nil {
		r = t.resource(req.Resource, true)
		r.makeSemaphore(req.Permits)
	}
	l := t.newLock(req.Lock, req.Owner, r)
	t.addLock(l, ns)
	tm := t.ensureTimer(l)
	tm.count, tm.ttl = req.Count, req.TTL
	if req.Timeout > 0 {
		tm.deadline = t.now + req.Timeout
	}
	if r.canGrantPermits(req.Count) {
		return t.grantPermits(r, l), nil
	}
	l.queue = QueueWaiting
	r.wait.pushBack(l)
	r.nqueued++
	t.trackQueued(l)
	t.timers.update(tm)
	return Result{Status: Queued, Mode: modes.NL}, nil
}

// grantPermits grants l, a new lock off every queue, its permits.
func (t *Table) grantPermits(r *resource, l *lock) Result {
	r.held.cr += l.count()
	return t.grantLock(r, l, modes.NL, true)
}

// grantPermitsPending grants waiting requests in order while the head's
// permits are free.
func (t *Table) grantPermitsPending(r *resource) {
	for l := r.wait.front(); l != nil && l.count() <= r.semPermits()-r.semUsed(); l = r.wait.front() {
		t.unlink(r, l)
		res := t.grantPermits(r, l)
		t.emit(Effect{Kind: EffectGranted, Resource: r.name, Lock: l.key(), Owner: l.owner, Mode: modes.NL, Token: res.Token})
	}
}

// restorePermits is Restore for a lock on a semaphore (ls.Permits > 0):
// granted or waiting, never converting.
func (t *Table) restorePermits(ls LockState) error {
	if err := t.checkName(ls.Resource); err != nil {
		return err
	}
	switch {
	case ls.Queue != QueueGranted && ls.Queue != QueueWaiting:
		return fmt.Errorf("%w: a semaphore lock on queue %v", ErrInvalidFlags, ls.Queue)
	case ls.Granted != modes.NL || ls.Requested != modes.NL:
		return fmt.Errorf("%w: a semaphore lock holds no mode (NL), not %v/%v", ErrInvalidFlags, ls.Granted, ls.Requested)
	}
	if err := checkPermits(ls.Permits, ls.Count); err != nil {
		return err
	}
	if t.hasLock(ls.Lock) {
		return fmt.Errorf("%w: %v", ErrLockExists, ls.Lock)
	}
	r := t.res[ls.Resource]
	if err := checkSemaphore(r, ls.Permits); err != nil {
		return err
	}
	if r != nil && ls.Queue == QueueGranted && ls.Count > r.semPermits()-r.semUsed() {
		return fmt.Errorf("%w: %v holds %d permits of %q, %d of %d are granted", ErrIncompatible, ls.Lock, ls.Count, ls.Resource, r.semUsed(), r.semPermits())
	}
	r, _ = t.restoring(r, ls.Resource)
	if !r.isSem() {
		r.makeSemaphore(ls.Permits)
	}
	l := t.newLock(ls.Lock, ls.Owner, r)
	t.addLock(l, t.node(ls.Lock.Node))
	l.token = ls.Token
	t.lastToken = max(t.lastToken, ls.Token)
	tm := t.ensureTimer(l)
	tm.count = ls.Count
	if ls.Queue == QueueWaiting {
		l.queue = QueueWaiting
		r.wait.pushBack(l)
		r.nqueued++
		t.trackQueued(l)
		return nil
	}
	r.held.cr += ls.Count
	r.setGranted(l, modes.NL)
	if ls.TTL > 0 {
		tm.ttl, tm.expires = ls.TTL, t.now+ls.TTL
		t.timers.update(tm)
	}
	return nil
}
