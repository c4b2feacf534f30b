package dlm

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Lock acquires a lock on resource in mode, waiting as long as ctx allows.
// A cancelled or expired ctx withdraws the request (ErrCancelled or
// ErrTimeout, matching ctx's error too). While this node has no quorum the
// request waits for it to return (a ctx that ends then gives an error that
// matches ErrNoQuorum too); FailFast fails at once with ErrNoQuorum.
func (ls *Lockspace) Lock(ctx context.Context, resource string, mode modes.Mode, opts ...LockOption) (*Lock, error) {
	return ls.acquire(ctx, resource, mode, buildOpts(opts))
}

// TryLock acquires the lock only if it can be granted at once; otherwise it
// fails with ErrNotQueued and leaves nothing behind. Like Lock, it waits
// (within ctx) for this node to have quorum, unless FailFast is given.
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
	lk, err := ls.acquireRetrying(ctx, resource, mode, o)
	ls.node.met.count(opLock, mode, err)
	return lk, err
}

func (ls *Lockspace) acquireNew(ctx context.Context, resource string, mode modes.Mode, o lockOpts) (*Lock, error) {
	if err := ls.node.waitFor(ctx, resourceHash(ls.seed, resource)); err != nil {
		return nil, err
	}
	lk, pending, err := ls.startNew(ctx, resource, mode, o, nil)
	if err != nil || !pending {
		return lk, err
	}
	if err := lk.wait(ctx); err != nil {
		return nil, err
	}
	return lk, nil
}

// startNew makes the lock and sends its request. It returns it granted,
// or pending (the answer comes later: wait for it, or onDone, if not nil,
// is called with it; see LockAsync), or the error that refused it at once.
func (ls *Lockspace) startNew(ctx context.Context, resource string, mode modes.Mode, o lockOpts, onDone func(*Lock, error)) (*Lock, bool, error) {
	n := ls.node
	if max := n.cfg.MaxLocks; max > 0 && n.nlocks.Add(1) > int64(max) {
		n.nlocks.Add(-1)
		n.met.limits.WithLabelValues("locks_per_node").Inc()
		return nil, false, fmt.Errorf("%w: this node holds %d locks", ErrLimit, max)
	} else if max <= 0 {
		n.nlocks.Add(1)
	}
	h := resourceHash(ls.seed, resource)
	sh := ls.shardOf(h)
	lk := &Lock{
		ls: ls, sh: sh, id: n.newLockID(sh, h), resource: resource, owner: o.owner,
		hash: h, onBlock: o.onBlocking, started: n.sinceStart(),
		state: stWaiting, want: mode, noQueue: o.noQueue,
	}
	if o.count > 0 || o.ttl > 0 {
		lk.ext.Store(&lockExt{permits: o.permits, count: o.count, ttl: o.ttl})
	}
	if err := lk.joinSession(o.session); err != nil {
		n.nlocks.Add(-1)
		return nil, false, err
	}
	sh.mu.Lock()
	sh.locks[lk.id] = lk
	if err := lk.startRequest(ctx, o); err != nil {
		lk.forgetLocked(sh)
		sh.mu.Unlock()
		return nil, false, err
	}
	if lk.state == stGranted {
		mode := lk.mode
		sh.mu.Unlock()
		lk.observeGrant(mode)
		return lk, false, nil
	}
	lk.onDone = onDone
	sh.mu.Unlock()
	return lk, true, nil
}

// startRequest sends the first request to the master (or runs it on the
// local table). If the node stopped serving since the caller checked the
// gate, or a recovery began that rebuilds the resource's bucket, it sends
// nothing now: the lock waits, and the recovery reports it to the new
// master, or it is sent once the bucket is served again. Caller holds
// sh.mu.
func (lk *Lock) startRequest(ctx context.Context, o lockOpts) error {
	timeout := deadlineOf(ctx)
	if lk.ttl() > 0 {
		lk.startLease(time.Now())
	}
	if n := lk.ls.node; !n.serving() || n.heldBack(lk.hash) {
		lk.beginOp()
		p := pendingReq{flags: o.tableFlags()}
		if timeout > 0 {
			p.deadline = time.Now().Add(timeout)
		}
		lk.keepUnsent(&p)
		return nil
	}
	if lk.local() {
		res, err := lk.ls.tableRequest(lk.sh, master.Request{
			Resource: lk.resource, Lock: lk.key(), Owner: lk.ownerID(), Mode: lk.want,
			Flags: o.tableFlags(), Timeout: ticks(timeout), TTL: ticks(lk.masterTTL()), Session: lk.masterSession(),
			Permits: lk.semPermits(), Count: lk.semCount(),
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

// sendPending sends the lock's request or conversion to its master (runs
// it on the local table if the master is this node: a request kept while
// its bucket moved here). If the master cannot be reached it keeps it to
// send again: the caller waits as long as its context allows, through the
// recovery that follows if the master is dead. Caller holds sh.mu.
func (lk *Lock) sendPending(p *pendingReq) {
	sh := lk.sh
	if lk.local() {
		lk.unsent = nil
		lk.runLocal(p)
		return
	}
	var timeout time.Duration
	if !p.deadline.IsZero() {
		if timeout = time.Until(p.deadline); timeout <= 0 {
			timeout = time.Microsecond // the caller's context is about to end
		}
	}
	var m wire.Message
	if lk.semCount() > 0 {
		m = lk.semaphoreRequest(p.flags, timeout)
	} else if p.convert {
		sh.conv = wire.ConvertRequest{
			Epoch: lk.ls.node.epoch(), Lockspace: lk.ls.name, Resource: lk.resource, Lock: lk.id,
			Owner: uint64(lk.ownerID()), Mode: lk.want, Flags: uint32(p.flags), Timeout: int64(timeout),
			LVB: p.lvb, LVBOp: p.lvbOp,
		}
		m = &sh.conv
	} else {
		sh.req = wire.LockRequest{
			Epoch: lk.ls.node.epoch(), Lockspace: lk.ls.name, Resource: lk.resource, Lock: lk.id,
			Owner: uint64(lk.ownerID()), Mode: lk.want, Flags: uint32(p.flags),
			Timeout: int64(timeout), TTL: int64(lk.masterTTL()), Session: lk.masterSession(),
		}
		m = &sh.req
	}
	if err := lk.send(m); err != nil {
		lk.keepUnsent(p)
		return
	}
	lk.unsent = nil
}

// keepUnsent keeps the lock's request or conversion to send again (the
// tick loop, and Resume, send what can go). Caller holds sh.mu.
func (lk *Lock) keepUnsent(p *pendingReq) {
	if lk.unsent == nil {
		lk.sh.unsent = append(lk.sh.unsent, lk)
	}
	if p != lk.unsent {
		// Kept to send again: a copy, so that a first try's p lives on
		// its caller's stack.
		q := new(pendingReq)
		*q = *p
		q.lvb = slices.Clone(p.lvb)
		lk.unsent = q
	}
}

// runLocal runs a kept request or conversion on the local table, and ends
// the operation if the table answers at once. Caller holds sh.mu.
func (lk *Lock) runLocal(p *pendingReq) {
	sh := lk.sh
	var timeout time.Duration
	if !p.deadline.IsZero() {
		timeout = max(time.Until(p.deadline), time.Microsecond)
	}
	var res master.Result
	var err error
	if p.convert {
		res, err = lk.ls.tableConvert(sh, master.Convert{
			Lock: lk.key(), Owner: lk.ownerID(), Mode: lk.want, Flags: p.flags,
			Timeout: ticks(timeout), LVBOp: master.LVBOp(p.lvbOp), LVB: p.lvb,
		})
	} else {
		res, err = lk.ls.tableRequest(sh, master.Request{
			Resource: lk.resource, Lock: lk.key(), Owner: lk.ownerID(), Mode: lk.want,
			Flags: p.flags, Timeout: ticks(timeout), TTL: ticks(lk.ttl()),
		})
	}
	switch {
	case err != nil:
		lk.finish(sh, outcome{mode: lk.mode, demoted: res.Demoted, err: fromMaster(err)})
	case res.Status == master.Granted:
		lk.finish(sh, outcome{granted: true, mode: res.Mode, token: res.Token, demoted: res.Demoted, lvbRead: res.LVBRead, lvb: res.LVB.Data, lvbSeq: res.LVB.Seq, lvbValid: res.LVB.Valid})
	}
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

// Convert changes the lock's mode: down (never waits) or up (may wait, as
// long as ctx allows; a cancelled ctx leaves the lock in its old mode, or,
// if the conversion was granted meanwhile, in the new one: Mode tells).
// A down-conversion whose ctx ends before the master's answer leaves the
// lock in the new mode at once: the master may have granted it, and let
// others in, already.
// If the holder set a value (SetValue) and holds PW or EX, a down-conversion
// writes it back. A conversion deadlock fails with ErrDeadlock, the lock
// keeping its mode, unless DemoteOnDeadlock is given. A conversion that
// the resource's master refuses for want of quorum is asked again, within
// ctx, until the master has quorum again or the resource has a new one
// (a ctx that ends then gives an error matching ErrNoQuorum too); with
// FailFast it fails at once with ErrNoQuorum, the lock keeping its mode.
// A lock outlives no loss of quorum on its own node: Convert then fails
// with the lock's ErrLockLost, FailFast or not.
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
	return lk.convertRetrying(ctx, mode, o)
}

// convertOnce sends the conversion and waits for its outcome.
func (lk *Lock) convertOnce(ctx context.Context, mode modes.Mode, o lockOpts) error {
	if err := lk.ls.node.waitFor(ctx, lk.hash); err != nil {
		return err
	}
	pending, err := lk.startConvert(ctx, mode, o, nil)
	if err != nil || !pending {
		return err
	}
	return lk.wait(ctx)
}

// startConvert sends the conversion. It returns whether it is pending (its
// answer comes later: wait for it, or onDone, if not nil, is called with
// it; see ConvertAsync), or the error that refused it at once.
func (lk *Lock) startConvert(ctx context.Context, mode modes.Mode, o lockOpts, onDone func(*Lock, error)) (bool, error) {
	sh := lk.sh
	sh.mu.Lock()
	if err := lk.checkHeld(); err != nil {
		sh.mu.Unlock()
		return false, err
	}
	op, val := lk.valueToWrite(lk.mode, mode)
	lk.keepWrittenValue(op, val)
	lk.writing = wire.LVBNone
	lk.state, lk.want, lk.started, lk.noQueue = stConverting, mode, lk.ls.node.sinceStart(), o.noQueue
	lk.beginOp()
	timeout := deadlineOf(ctx)
	var err error
	if n := lk.ls.node; !n.serving() || n.heldBack(lk.hash) {
		// The bucket moves: the conversion waits in the report, or until
		// the bucket is served again.
		p := pendingReq{convert: true, flags: o.tableFlags(), lvbOp: op, lvb: val}
		if timeout > 0 {
			p.deadline = time.Now().Add(timeout)
		}
		lk.keepUnsent(&p)
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
		lk.valueOp = wire.LVBNone
		lk.setNewValue(nil)
		if lk.state == stConverting {
			lk.writing = op
		}
	}
	if err != nil || lk.state == stGranted {
		sh.mu.Unlock()
		return false, err
	}
	lk.onDone = onDone
	sh.mu.Unlock()
	return true, nil
}

func (lk *Lock) convertLocal(o lockOpts, op wire.LVBOp, val []byte, timeout time.Duration) error {
	res, err := lk.ls.tableConvert(lk.sh, master.Convert{
		Lock: lk.key(), Owner: lk.ownerID(), Mode: lk.want, Flags: o.tableFlags(),
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
	case lk.lostErr() != nil:
		return lk.lostErr()
	case lk.state == stGranted:
		return nil
	case lk.state == stConverting || lk.state == stWaiting:
		return ErrBusy
	}
	return ErrNotHeld
}
