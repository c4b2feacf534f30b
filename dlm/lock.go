package dlm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// lockState is where a lock is in its life, as this node sees it.
type lockState uint8

const (
	stWaiting    lockState = iota + 1 // first request in flight or queued
	stGranted                         // held, nothing in flight
	stConverting                      // held, conversion in flight or queued
	stAbandoned                       // caller gave up on the first request
	stReleased                        // unlocked, failed or released by the master
)

// Lock is a lock this node holds (or held) on a resource. Its methods are
// safe for concurrent use, but a lock runs one operation at a time: a
// Convert or Unlock while another is in progress fails with ErrBusy.
type Lock struct {
	ls       *Lockspace
	sh       *shard
	id       uint64
	resource string
	owner    *Owner
	ownerID  master.OwnerID
	hash     uint64 // resource hash: picks the shard and, per view, the master
	onBlock  func(modes.Mode)
	ttl      time.Duration
	started  time.Time // when the in-flight operation started, for metrics

	// Guarded by sh.mu.
	state    lockState
	mode     modes.Mode // granted mode
	want     modes.Mode // mode asked for by the operation in flight
	token    uint64
	demoted  bool
	value    []byte // this holder's copy of the value block
	valueSeq uint64
	valueOK  bool
	newValue []byte // set by SetValue, written back on down-convert or unlock
	valueOp  wire.LVBOp
	opErr    error // outcome of the operation in flight
	// done is signalled when the operation in flight ends. The waiter
	// makes it only when it has to block (wait): a remote answer read by
	// the waiting goroutine itself needs none, which spares a remote
	// operation an allocation.
	done chan struct{}
	// answered says the operation in flight has ended, and stays true
	// until the next operation starts: what wait checks before making done,
	// and the Lock's Waiter for the transport (lockWait). Written under
	// sh.mu.
	answered atomic.Bool
	// lender is the master's connection while the waiter reads it for its
	// answer (lockWait): an answer that arrives otherwise (a local event,
	// another master after recovery) must interrupt that reading.
	lender  atomic.Pointer[transport.Lender]
	lost    chan struct{} // closed when the lock is lost; made on demand
	lostErr error
	refs    int // acquisitions of a reentrant owner
	// pendingConvert: the caller gave up on a conversion that may still
	// be granted.
	pendingConvert bool
	lostReported   bool // Unlock has returned lostErr once
	// wanted: the master said another request waits for this lock (a
	// blocking notification). Its unlock then leaves at once; otherwise it
	// may ride on the next message to the master (see postUnlock).
	wanted  bool
	noQueue bool // the operation in flight is a try: recovery fails it
	// unsent is the request or conversion in flight when its master could
	// not be reached: the tick loop sends it again, and a recovery reports
	// it (a dead master's requests wait for the view without it).
	unsent    *pendingReq
	lease     *time.Timer
	leaseEnds time.Time
}

// outcome is how an operation in flight ended, from a table effect or a
// master's completion.
type outcome struct {
	granted  bool
	mode     modes.Mode
	token    uint64
	demoted  bool
	lvbRead  bool
	lvb      []byte
	lvbSeq   uint64
	lvbValid bool
	err      error
}

// Lock acquires a lock on resource in mode, waiting as long as ctx allows.
// A cancelled or expired ctx withdraws the request (ErrCancelled or
// ErrTimeout, matching ctx's error too).
func (ls *Lockspace) Lock(ctx context.Context, resource string, mode modes.Mode, opts ...LockOption) (*Lock, error) {
	return ls.acquire(ctx, resource, mode, buildOpts(opts))
}

// TryLock acquires the lock only if it can be granted at once; otherwise it
// fails with ErrNotQueued and leaves nothing behind.
func (ls *Lockspace) TryLock(ctx context.Context, resource string, mode modes.Mode, opts ...LockOption) (*Lock, error) {
	o := buildOpts(opts)
	o.noQueue = true
	return ls.acquire(ctx, resource, mode, o)
}

func (ls *Lockspace) checkResource(resource string) error {
	if resource == "" || len(resource) > ls.cfg.MaxNameLen {
		return fmt.Errorf("%w: resource name of %d bytes, must be 1..%d", ErrInvalidName, len(resource), ls.cfg.MaxNameLen)
	}
	return nil
}

func (ls *Lockspace) acquire(ctx context.Context, resource string, mode modes.Mode, o lockOpts) (*Lock, error) {
	if err := o.validate(mode, false); err != nil {
		return nil, err
	}
	if err := ls.checkResource(resource); err != nil {
		return nil, err
	}
	if o.owner != nil && o.owner.reentrant {
		return o.owner.acquire(ctx, ls, resource, mode, o)
	}
	lk, err := ls.acquireNew(ctx, resource, mode, o)
	ls.node.met.count(opLock, mode, err)
	return lk, err
}

func (ls *Lockspace) acquireNew(ctx context.Context, resource string, mode modes.Mode, o lockOpts) (*Lock, error) {
	n := ls.node
	if err := n.waitServing(ctx); err != nil {
		return nil, err
	}
	if max := n.cfg.MaxLocks; max > 0 && n.nlocks.Add(1) > int64(max) {
		n.nlocks.Add(-1)
		n.met.limits.WithLabelValues("locks_per_node").Inc()
		return nil, fmt.Errorf("%w: this node holds %d locks", ErrLimit, max)
	} else if max <= 0 {
		n.nlocks.Add(1)
	}
	h := resourceHash(ls.seed, resource)
	sh := ls.shardOf(h)
	lk := &Lock{
		ls: ls, sh: sh, id: n.newLockID(sh), resource: resource, owner: o.owner,
		hash: h, onBlock: o.onBlocking, ttl: o.ttl, started: time.Now(),
		state: stWaiting, want: mode, noQueue: o.noQueue,
	}
	if o.owner != nil {
		lk.ownerID = o.owner.id
	}
	sh.mu.Lock()
	sh.locks[lk.id] = lk
	if err := lk.startRequest(ctx, o); err != nil {
		lk.forgetLocked(sh)
		sh.mu.Unlock()
		return nil, err
	}
	if lk.state == stGranted {
		mode := lk.mode
		sh.mu.Unlock()
		lk.observeGrant(mode)
		return lk, nil
	}
	sh.mu.Unlock()
	if err := lk.wait(ctx); err != nil {
		return nil, err
	}
	return lk, nil
}

// masterName is the node that masters the lock's resource in the current
// view: operations always go there, so that after a recovery moved the
// resource they reach its new master.
func (lk *Lock) masterName() string {
	return lk.ls.node.view.Load().masterOf(lk.hash).name
}

func (lk *Lock) local() bool { return lk.masterName() == lk.ls.node.self.name }

func (lk *Lock) key() master.LockID { return master.LockID{Node: lk.ls.node.self.id, ID: lk.id} }

// startRequest sends the first request to the master (or runs it on the
// local table). If a recovery began since the caller checked the gate, it
// sends nothing: the lock waits, and the recovery reports it to the new
// master. Caller holds sh.mu.
func (lk *Lock) startRequest(ctx context.Context, o lockOpts) error {
	timeout := deadlineOf(ctx)
	if lk.ttl > 0 {
		lk.startLease(time.Now())
	}
	if !lk.ls.node.serving() {
		lk.beginOp()
		return nil
	}
	if lk.local() {
		res, err := lk.ls.tableRequest(lk.sh, master.Request{
			Resource: lk.resource, Lock: lk.key(), Owner: lk.ownerID, Mode: lk.want,
			Flags: o.tableFlags(), Timeout: ticks(timeout), TTL: ticks(lk.ttl),
		})
		if err != nil {
			return fromMaster(err)
		}
		if res.Status == master.Granted {
			lk.grant(outcome{granted: true, mode: res.Mode, token: res.Token, lvbRead: res.LVBRead, lvb: res.LVB.Data, lvbSeq: res.LVB.Seq, lvbValid: res.LVB.Valid})
		}
		return nil
	}
	lk.beginOp()
	p := pendingReq{flags: o.tableFlags()}
	if timeout > 0 {
		p.deadline = time.Now().Add(timeout)
	}
	lk.sendPending(&p)
	return nil
}

// pendingReq is a request or conversion to send (again).
type pendingReq struct {
	convert  bool
	flags    master.Flags
	deadline time.Time // zero: none
	lvbOp    wire.LVBOp
	lvb      []byte
}

// sendPending sends the lock's request or conversion to its master. If the
// master cannot be reached it keeps it to send again: the caller waits as
// long as its context allows, through the recovery that follows if the
// master is dead. Caller holds sh.mu.
func (lk *Lock) sendPending(p *pendingReq) {
	sh := lk.sh
	var timeout time.Duration
	if !p.deadline.IsZero() {
		if timeout = time.Until(p.deadline); timeout <= 0 {
			timeout = time.Microsecond // the caller's context is about to end
		}
	}
	var m wire.Message
	if p.convert {
		sh.conv = wire.ConvertRequest{
			Epoch: lk.ls.node.epoch(), Lockspace: lk.ls.name, Resource: lk.resource, Lock: lk.id,
			Owner: uint64(lk.ownerID), Mode: lk.want, Flags: uint32(p.flags), Timeout: int64(timeout),
			LVB: p.lvb, LVBOp: p.lvbOp,
		}
		m = &sh.conv
	} else {
		sh.req = wire.LockRequest{
			Epoch: lk.ls.node.epoch(), Lockspace: lk.ls.name, Resource: lk.resource, Lock: lk.id,
			Owner: uint64(lk.ownerID), Mode: lk.want, Flags: uint32(p.flags),
			Timeout: int64(timeout), TTL: int64(lk.ttl),
		}
		m = &sh.req
	}
	if err := lk.send(m); err != nil {
		if lk.unsent == nil {
			sh.unsent = append(sh.unsent, lk)
		}
		if p != lk.unsent {
			// Kept to send again: a copy, so that a first try's p lives on
			// its caller's stack.
			q := new(pendingReq)
			*q = *p
			q.lvb = slices.Clone(p.lvb)
			lk.unsent = q
		}
		return
	}
	lk.unsent = nil
}

func (lk *Lock) send(m wire.Message) error {
	name := lk.masterName()
	if err := lk.ls.node.links.Send(name, m); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, name, err)
	}
	return nil
}

// post sends a message nobody waits for (unlock, cancel): it may leave with
// the next message to the same master rather than in a write of its own.
func (lk *Lock) post(m wire.Message) error {
	name := lk.masterName()
	if err := lk.ls.node.links.Post(name, m); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, name, err)
	}
	return nil
}

// deadlineOf returns how long ctx allows, 0 for no deadline. The master
// times the request out by itself too, in case the cancel never reaches it.
func deadlineOf(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Microsecond)
	}
	return 0
}

// ctxError turns a context's error into the public error, matching both.
func ctxError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return fmt.Errorf("%w: %w", ErrCancelled, err)
}

// wait blocks until the operation in flight ends or ctx does. If ctx ends
// first the operation is withdrawn; if it ended meanwhile, its outcome wins.
func (lk *Lock) wait(ctx context.Context) error {
	if name := lk.masterName(); name != lk.ls.node.self.name {
		if ld := lk.ls.node.links.Lender(name); ld != nil {
			lk.lender.Store(ld)
			w := ld.Await(ctx, (*lockWait)(lk))
			lk.lender.Store(nil)
			defer w.End()
		}
	}
	sh := lk.sh
	sh.mu.Lock()
	if !lk.answered.Load() {
		if lk.done == nil {
			lk.done = make(chan struct{}, 1)
		}
		done := lk.done
		sh.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			if err := lk.withdraw(ctx.Err()); err != nil {
				return err
			}
		}
		sh.mu.Lock()
	}
	err, mode := lk.opErr, lk.mode
	lk.opErr = nil
	sh.mu.Unlock()
	if err == nil {
		lk.observeGrant(mode)
	}
	if _, ok := ctx.Deadline(); ok && errors.Is(err, ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		// The master timed the request out at the context's deadline.
		err = fmt.Errorf("%w: %w", err, context.DeadlineExceeded)
	}
	return err
}

// observeGrant records the wait of a grant in mode, read with the grant
// under sh.mu.
func (lk *Lock) observeGrant(mode modes.Mode) {
	remote := 0
	if !lk.local() {
		remote = 1
	}
	lk.ls.node.met.wait[remote][mode].Observe(time.Since(lk.started).Seconds())
}

// withdraw cancels the operation in flight because the caller stopped
// waiting. It returns the error to report, or nil if the operation ended
// after all and its outcome should be reported instead.
func (lk *Lock) withdraw(cause error) error {
	sh := lk.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if lk.state != stWaiting && lk.state != stConverting {
		return nil
	}
	if lk.unsent != nil { // it never reached a master: nothing to cancel
		lk.unsent = nil
		if lk.state == stWaiting {
			lk.forgetLocked(sh)
		} else {
			lk.state = stGranted
		}
		drain(lk.done)
		return ctxError(cause)
	}
	if lk.local() && lk.ls.node.serving() {
		// The cancel's effect ends the operation at once, under this lock.
		_ = lk.ls.tableCancel(sh, lk.key(), lk.ownerID)
		if lk.state != stWaiting && lk.state != stConverting {
			drain(lk.done)
			if errors.Is(lk.opErr, ErrCancelled) {
				lk.opErr = nil
				return ctxError(cause)
			}
			return nil
		}
	}
	// A remote master learns of it by message; the answer may still be a
	// grant, which finish then gives back.
	if lk.ls.node.serving() {
		sh.can = wire.CancelRequest{Epoch: lk.ls.node.epoch(), Lockspace: lk.ls.name, Resource: lk.resource, Lock: lk.id, Owner: uint64(lk.ownerID)}
		_ = lk.post(&sh.can)
	}
	if lk.state == stWaiting {
		lk.state = stAbandoned
	} else {
		lk.state = stGranted // the conversion may still happen; Mode tells
		lk.pendingConvert = true
	}
	return ctxError(cause)
}

// signalDone ends the operation in flight for its waiter. Caller holds
// sh.mu.
func (lk *Lock) signalDone() {
	lk.answered.Store(true)
	signal(lk.done)
	lk.lender.Load().Interrupt() // after answered: the reader looks at it
}

// beginOp readies the lock for an operation about to start: not answered,
// and no done channel a signal of the last operation may be left in.
// Caller holds sh.mu.
func (lk *Lock) beginOp() {
	lk.done = nil
	lk.answered.Store(false)
}

// lockWait is a Lock waiting for its remote master's answer, as the
// transport's Waiter.
type lockWait Lock

func (w *lockWait) Done() bool { return (*Lock)(w).answered.Load() }

func drain(c chan struct{}) {
	select {
	case <-c:
	default:
	}
}

func signal(c chan struct{}) {
	if c == nil {
		return
	}
	select {
	case c <- struct{}{}:
	default:
	}
}

// grant records a grant. Caller holds sh.mu.
func (lk *Lock) grant(o outcome) {
	lk.state, lk.mode = stGranted, o.mode
	if o.token != 0 {
		lk.token = o.token
	}
	lk.demoted = lk.demoted || o.demoted
	if o.lvbRead {
		lk.value = append(lk.value[:0], o.lvb...)
		lk.valueSeq, lk.valueOK = o.lvbSeq, o.lvbValid
	}
}

// finish ends the operation in flight with o. Caller holds sh.mu.
func (lk *Lock) finish(sh *shard, o outcome) {
	switch lk.state {
	case stWaiting:
		if o.granted {
			lk.grant(o)
		} else {
			lk.opErr = o.err
			lk.forgetLocked(sh)
		}
	case stConverting:
		if o.granted {
			lk.grant(o)
		} else {
			// A failed conversion leaves the lock as it was, unless a
			// deadlock demoted it to NL on the way.
			lk.state, lk.opErr = stGranted, o.err
			if o.demoted {
				lk.mode, lk.demoted = modes.NL, true
			}
		}
	case stAbandoned:
		if o.granted {
			lk.giveBack(sh)
		}
		lk.forgetLocked(sh)
		return
	case stGranted:
		if lk.pendingConvert && o.granted {
			lk.grant(o) // a conversion the caller gave up on went through
		}
		lk.pendingConvert = false
		return
	default:
		return
	}
	lk.signalDone()
}

// giveBack releases a lock granted after its caller stopped waiting.
func (lk *Lock) giveBack(sh *shard) {
	if lk.local() {
		sh.releases = append(sh.releases, master.Release{Lock: lk.key(), Owner: lk.ownerID})
		return
	}
	lk.postUnlock(sh, wire.LVBNone, nil, false)
}

// postUnlock posts the release of the lock to its master; if the master
// cannot be reached now, the tick loop posts it again (a recovery drops it:
// the lock is no longer reported). Caller holds sh.mu.
//
// With lazy, the release rides on the next message to the master
// (transport's Piggyback): a goroutine that unlocks and locks again there
// pays one write for both. Only the unlock of a lock no other request
// waited for goes so (the master sends a blocking notification when one
// does: lk.wanted); it waits at most until the link's parked reader next
// looks at the connection (20 µs in a busy process, a millisecond in an
// idle one), and only when nobody on this node waits on that link.
// Meanwhile the master still counts the lock as held: a request for it
// waits that much longer, a try-lock may fail.
func (lk *Lock) postUnlock(sh *shard, op wire.LVBOp, val []byte, lazy bool) {
	sh.unl = wire.UnlockRequest{Epoch: lk.ls.node.epoch(), Lockspace: lk.ls.name, Resource: lk.resource, Lock: lk.id, Owner: uint64(lk.ownerID), LVB: val, LVBOp: op}
	links, name := lk.ls.node.links, lk.masterName()
	var err error
	if lazy {
		err = links.Piggyback(name, &sh.unl)
	} else {
		err = links.Post(name, &sh.unl)
	}
	if err != nil {
		lk.ls.node.deferUnlock(lk, op, val)
	}
}

// forgetLocked drops the lock from this node's books. Caller holds sh.mu.
func (lk *Lock) forgetLocked(sh *shard) {
	if lk.state == 0 {
		return
	}
	if _, ok := sh.locks[lk.id]; ok {
		delete(sh.locks, lk.id)
		lk.ls.node.nlocks.Add(-1)
	}
	lk.state = stReleased
	if lk.lease != nil {
		lk.lease.Stop()
	}
}

// blocked queues the lock's blocking callback. Caller holds sh.mu.
func (lk *Lock) blocked(want modes.Mode) {
	lk.ls.node.met.blocking.Inc()
	lk.wanted = true
	if lk.onBlock != nil && (lk.state == stGranted || lk.state == stConverting) {
		lk.ls.node.callbacks.push(lk.onBlock, want)
	}
}

// released records that the master let the lock go by itself (TTL expired,
// node purged). Caller holds sh.mu.
func (lk *Lock) released(sh *shard, why error) {
	if lk.state == stWaiting || lk.state == stConverting {
		lk.opErr = fmt.Errorf("%w: %w", ErrLockLost, why)
		lk.signalDone()
	}
	lk.loseLocked(why)
	lk.forgetLocked(sh)
}

// loseLocked marks the lock lost: its holder must stop relying on it.
// Caller holds sh.mu.
func (lk *Lock) loseLocked(why error) {
	if lk.lostErr != nil {
		return
	}
	if !errors.Is(why, ErrLockLost) && !errors.Is(why, ErrClosed) {
		why = fmt.Errorf("%w: %w", ErrLockLost, why)
	}
	lk.lostErr = why
	if lk.lost == nil {
		lk.lost = make(chan struct{})
	}
	close(lk.lost)
	lk.ls.node.met.lost.Inc()
}

// closeLocked settles the lock as its node closes. Caller holds sh.mu.
func (lk *Lock) closeLocked(sh *shard) {
	switch lk.state {
	case stGranted, stConverting:
		lk.releaseAtMaster(sh, modes.NL)
	case stWaiting:
		if lk.local() {
			_ = sh.table.Cancel(lk.key(), lk.ownerID)
		} else {
			sh.can = wire.CancelRequest{Epoch: lk.ls.node.epoch(), Lockspace: lk.ls.name, Resource: lk.resource, Lock: lk.id, Owner: uint64(lk.ownerID)}
			_ = lk.post(&sh.can)
		}
	}
	if lk.state == stWaiting || lk.state == stConverting {
		lk.opErr = ErrClosed
		lk.signalDone()
	}
	lk.loseLocked(ErrClosed)
	lk.forgetLocked(sh)
}

// releaseAtMaster tells the master to release the lock, writing the value
// back if the holder set one and holds PW or EX. Caller holds sh.mu.
func (lk *Lock) releaseAtMaster(sh *shard, _ modes.Mode) error {
	op, val := lk.valueToWrite(lk.mode, modes.NL)
	if n := lk.ls.node; n.recovering() {
		// The tables are being rebuilt: release the lock once they are.
		n.deferUnlock(lk, op, val)
		return nil
	}
	if lk.local() {
		return fromMaster(lk.ls.tableRelease(sh, master.Release{Lock: lk.key(), Owner: lk.ownerID, LVBOp: master.LVBOp(op), LVB: val}))
	}
	lk.postUnlock(sh, op, val, !lk.wanted)
	return nil
}

// valueToWrite says what an operation from mode from to mode to does with
// the value block: write the holder's new value if it set one and holds PW
// or EX and is going down (or unlocking), else nothing.
func (lk *Lock) valueToWrite(from, to modes.Mode) (wire.LVBOp, []byte) {
	if lk.valueOp == wire.LVBNone || !modeWrites(from) || modes.IsUp(from, to) {
		return wire.LVBNone, nil
	}
	return lk.valueOp, lk.newValue
}

// keepWrittenValue updates this holder's copy of the value block with what
// it writes (a PW or EX holder is the only writer): a recovery then reports
// the value as written, even if the write never reached the old master.
// Caller holds sh.mu.
func (lk *Lock) keepWrittenValue(op wire.LVBOp, val []byte) {
	switch op {
	case wire.LVBWrite:
		lk.value = append(lk.value[:0], val...)
		lk.valueSeq++
		lk.valueOK = true
	case wire.LVBInvalidate:
		lk.valueOK = false
	}
}

// Unlock releases the lock. For a remote master Unlock does not wait for an
// answer (there is nothing to wait for: the lock is gone as far as this
// node is concerned). The master is told at once if another request waited
// for the lock; otherwise the message may wait up to the transport's
// reader park (20 µs busy, a millisecond idle) to leave with this node's
// next message to that master. A second Unlock fails with
// ErrNotHeld; an Unlock while a Convert is in progress with ErrBusy.
func (lk *Lock) Unlock() error {
	if o := lk.owner; o != nil && o.reentrant {
		return o.release(lk)
	}
	err := lk.unlock()
	lk.ls.node.met.count(opUnlock, lk.Mode(), err)
	return err
}

func (lk *Lock) unlock() error {
	sh := lk.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch lk.state {
	case stGranted:
	case stWaiting, stConverting:
		return ErrBusy
	default:
		if lk.lostErr != nil && !errors.Is(lk.lostErr, ErrClosed) && !lk.lostReported {
			lk.lostReported = true
			return lk.lostErr
		}
		return ErrNotHeld
	}
	err := lk.releaseAtMaster(sh, modes.NL)
	lk.forgetLocked(sh)
	if lk.lostErr != nil && err == nil {
		lk.lostReported = true
		err = lk.lostErr
	}
	return err
}

// Convert changes the lock's mode: down (never waits) or up (may wait, as
// long as ctx allows; a cancelled ctx leaves the lock in its old mode, or,
// if the conversion was granted meanwhile, in the new one: Mode tells).
// If the holder set a value (SetValue) and holds PW or EX, a down-conversion
// writes it back. A conversion deadlock fails with ErrDeadlock, the lock
// keeping its mode, unless DemoteOnDeadlock is given.
func (lk *Lock) Convert(ctx context.Context, mode modes.Mode, opts ...LockOption) error {
	err := lk.convert(ctx, mode, buildOpts(opts))
	lk.ls.node.met.count(opConvert, mode, err)
	return err
}

// TryConvert converts only if the conversion can be granted at once;
// otherwise it fails with ErrNotQueued and the lock keeps its mode.
func (lk *Lock) TryConvert(ctx context.Context, mode modes.Mode, opts ...LockOption) error {
	o := buildOpts(opts)
	o.noQueue = true
	err := lk.convert(ctx, mode, o)
	lk.ls.node.met.count(opConvert, mode, err)
	return err
}

func (lk *Lock) convert(ctx context.Context, mode modes.Mode, o lockOpts) error {
	if err := o.validate(mode, true); err != nil {
		return err
	}
	if err := lk.ls.node.waitServing(ctx); err != nil {
		return err
	}
	sh := lk.sh
	sh.mu.Lock()
	if err := lk.checkHeld(); err != nil {
		sh.mu.Unlock()
		return err
	}
	op, val := lk.valueToWrite(lk.mode, mode)
	lk.keepWrittenValue(op, val)
	lk.state, lk.want, lk.started, lk.noQueue = stConverting, mode, time.Now(), o.noQueue
	lk.beginOp()
	timeout := deadlineOf(ctx)
	var err error
	if !lk.ls.node.serving() {
		// A recovery began: the conversion waits in the report instead.
	} else if lk.local() {
		err = lk.convertLocal(o, op, val, timeout)
	} else {
		p := pendingReq{convert: true, flags: o.tableFlags(), lvbOp: op, lvb: val}
		if timeout > 0 {
			p.deadline = time.Now().Add(timeout)
		}
		lk.sendPending(&p)
	}
	if err == nil && op != wire.LVBNone {
		lk.valueOp, lk.newValue = wire.LVBNone, lk.newValue[:0]
	}
	if err != nil || lk.state == stGranted {
		sh.mu.Unlock()
		return err
	}
	sh.mu.Unlock()
	return lk.wait(ctx)
}

func (lk *Lock) convertLocal(o lockOpts, op wire.LVBOp, val []byte, timeout time.Duration) error {
	res, err := lk.ls.tableConvert(lk.sh, master.Convert{
		Lock: lk.key(), Owner: lk.ownerID, Mode: lk.want, Flags: o.tableFlags(),
		Timeout: ticks(timeout), LVBOp: master.LVBOp(op), LVB: val,
	})
	if res.Demoted {
		lk.demoted, lk.mode = true, modes.NL
	}
	if err != nil {
		lk.state = stGranted
		return fromMaster(err)
	}
	if res.Status == master.Granted {
		lk.grant(outcome{granted: true, mode: res.Mode, token: res.Token, lvbRead: res.LVBRead, lvb: res.LVB.Data, lvbSeq: res.LVB.Seq, lvbValid: res.LVB.Valid})
	}
	return nil
}

// checkHeld reports why the lock cannot start an operation, if it cannot.
// Caller holds sh.mu.
func (lk *Lock) checkHeld() error {
	switch {
	case lk.lostErr != nil:
		return lk.lostErr
	case lk.state == stGranted:
		return nil
	case lk.state == stConverting || lk.state == stWaiting:
		return ErrBusy
	}
	return ErrNotHeld
}

// Mode returns the lock's granted mode.
func (lk *Lock) Mode() modes.Mode {
	lk.sh.mu.Lock()
	defer lk.sh.mu.Unlock()
	return lk.mode
}

// Token returns the fencing token of the lock's latest grant or
// up-conversion: a number that strictly increases for every grant of the
// resource, cluster-wide. Send it with every write to what the lock
// protects, and have the store refuse a token lower than the highest it
// has seen: a holder that was paused and lost its lock is then refused.
func (lk *Lock) Token() uint64 {
	lk.sh.mu.Lock()
	defer lk.sh.mu.Unlock()
	return lk.token
}

// Resource returns the name of the locked resource.
func (lk *Lock) Resource() string { return lk.resource }

// Lockspace returns the lockspace of the lock.
func (lk *Lock) Lockspace() *Lockspace { return lk.ls }

// Demoted reports whether a conversion deadlock demoted the lock to NL
// (DemoteOnDeadlock).
func (lk *Lock) Demoted() bool {
	lk.sh.mu.Lock()
	defer lk.sh.mu.Unlock()
	return lk.demoted
}

// Value returns a copy of the lock value block as of the lock's latest
// grant or up-conversion above NL, and whether it is valid: false means a
// holder that could have been writing it was lost, and the value may be
// stale.
func (lk *Lock) Value() ([]byte, bool) {
	lk.sh.mu.Lock()
	defer lk.sh.mu.Unlock()
	return slices.Clone(lk.value), lk.valueOK
}

// ValueSeq returns the sequence number of the value Value returns: it
// counts writes to the resource's value.
func (lk *Lock) ValueSeq() uint64 {
	lk.sh.mu.Lock()
	defer lk.sh.mu.Unlock()
	return lk.valueSeq
}

// SetValue sets the value block to write back when the lock, held in PW or
// EX, next converts down or is unlocked. Longer than the lockspace's MaxLVB
// is ErrLimit.
func (lk *Lock) SetValue(v []byte) error {
	if len(v) > lk.ls.cfg.MaxLVB {
		return fmt.Errorf("%w: value of %d bytes, lockspace allows %d", ErrLimit, len(v), lk.ls.cfg.MaxLVB)
	}
	lk.sh.mu.Lock()
	defer lk.sh.mu.Unlock()
	lk.newValue = append(lk.newValue[:0], v...)
	lk.valueOp = wire.LVBWrite
	return nil
}

// InvalidateValue marks the value block not valid when the lock, held in
// PW or EX, next converts down or is unlocked (the holder could not finish
// what the value describes).
func (lk *Lock) InvalidateValue() {
	lk.sh.mu.Lock()
	defer lk.sh.mu.Unlock()
	lk.newValue, lk.valueOp = lk.newValue[:0], wire.LVBInvalidate
}

// Lost returns a channel closed when the lock can no longer be trusted:
// its TTL ran out on this node's clock (before the master can release it),
// the master released it, or the node closed. Err says why.
func (lk *Lock) Lost() <-chan struct{} {
	lk.sh.mu.Lock()
	defer lk.sh.mu.Unlock()
	if lk.lost == nil {
		lk.lost = make(chan struct{})
	}
	return lk.lost
}

// Err returns why the lock was lost, or nil.
func (lk *Lock) Err() error {
	lk.sh.mu.Lock()
	defer lk.sh.mu.Unlock()
	return lk.lostErr
}
