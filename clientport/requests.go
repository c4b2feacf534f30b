package clientport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// handle runs one request, read on c. A request that can be answered at
// once is answered here, on the reading goroutine, so that its reply
// leaves with the batch; one that waits (a lock or a conversion queued
// behind others, or at a master on another node; a renewal) waits on a
// goroutine of its own. An error breaks the protocol and ends the
// connection.
func (ss *session) handle(c *conn, id uint64, m wire.Message) error {
	ss.mu.Lock()
	if id <= ss.last {
		ss.mu.Unlock()
		return fmt.Errorf("request id %d not above the last one, %d", id, ss.last)
	}
	ss.last, ss.handled = id, id
	ss.mu.Unlock()
	ss.srv.met.requests[m.Type()].Inc()
	switch m := m.(type) {
	case *wire.ClientLock:
		ss.lock(id, m)
	case *wire.ClientConvert:
		ss.convert(id, m)
	case *wire.ClientUnlock:
		ss.unlock(id, m)
	case *wire.ClientCancel:
		ss.cancel(id, m)
	case *wire.ClientValue:
		ss.value(id, m)
	case *wire.ClientSetValue:
		ss.setValue(id, m)
	case *wire.ClientKeepAlive:
		ss.keepAlive(id, m)
	case *wire.ClientDescribe:
		ss.describe(id, m)
	case *wire.ClientAcquire:
		ss.acquire(id, m)
	case *wire.ClientBye:
		ss.bye(c, id)
	case *wire.ClientAck:
		ss.ack(id, m)
	default:
		return fmt.Errorf("a client does not send %v", m.Type())
	}
	return nil
}

func (ss *session) fail(id uint64, err error) { ss.reply(id, errorMsg(err), false) }

func (ss *session) refuse(id uint64, reason string, err error) {
	ss.srv.met.refused[reason].Inc()
	ss.fail(id, err)
}

// lockspace opens the lockspace a request names.
func (ss *session) lockspace(name string) (*dlm.Lockspace, error) {
	return ss.srv.node.Lockspace(name)
}

// owner returns the session's owner id in ls, creating it: a client names
// its owners by ids of its own choosing, the agent keeps one dlm owner for
// each.
func (ss *session) owner(ls *dlm.Lockspace, id uint64) (*dlm.Owner, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	k := ownerKey{ls.Name(), id}
	if o := ss.seen().owners[k]; o != nil {
		return o, nil
	}
	if len(ss.x().owners) >= ss.srv.cfg.MaxLocks {
		return nil, fmt.Errorf("%w: the session has %d owners", dlm.ErrLimit, len(ss.x().owners))
	}
	if ss.x().owners == nil {
		ss.x().owners = map[ownerKey]*dlm.Owner{}
	}
	o := ls.NewOwner()
	ss.x().owners[k] = o
	return o, nil
}

// startOp registers a request that will wait, within the session's
// limits. It returns the context the wait runs under (a renewal's).
func (ss *session) startOp(id uint64, timeout int64) (context.Context, error) {
	ctx, cancel := context.WithCancel(ss.srv.ctx)
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ss.srv.ctx, time.Duration(timeout))
	}
	if err := ss.reserve(id, cancel); err != nil {
		cancel()
		return nil, err
	}
	ss.setStop(id, cancel)
	ss.srv.wg.Add(1)
	return ctx, nil
}

func (ss *session) endOp(id uint64) {
	ss.release(id)
	ss.srv.wg.Done()
}

// reserve counts a request that may wait against MaxPending; cancel, if
// not nil, withdraws it (ClientCancel).
func (ss *session) reserve(id uint64, cancel func()) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.pending) >= ss.srv.cfg.MaxPending {
		ss.srv.met.refused[refusedPending].Inc()
		return fmt.Errorf("%w: the session has %d requests waiting, the agent's limit", dlm.ErrLimit, len(ss.pending))
	}
	if ss.pending == nil {
		ss.pending = map[uint64]*op{}
	}
	ss.pending[id] = &op{cancel: cancel}
	return nil
}

// release ends a reserved request (and its context, for a renewal). It
// reports whether a ClientCancel came for it.
func (ss *session) release(id uint64) (cancelled bool) {
	ss.mu.Lock()
	o := ss.pending[id]
	delete(ss.pending, id)
	ss.mu.Unlock()
	if o == nil {
		return false
	}
	if o.stop != nil {
		o.stop()
	}
	return o.cancelled
}

// setStop gives a reserved request what ends its context once it is
// answered.
func (ss *session) setStop(id uint64, stop func()) {
	ss.mu.Lock()
	if o := ss.pending[id]; o != nil {
		o.stop = stop
	}
	ss.mu.Unlock()
}

// setCancel gives a reserved request the function that withdraws it, if
// it is still waiting and has none: one refused at once for want of
// quorum may have gone on to wait for it (waitQuorum), with a cancel of
// its own. A request still waiting tells the batch under way that its
// answer comes later (writer.expectAnswer).
func (ss *session) setCancel(id uint64, cancel func()) {
	ss.mu.Lock()
	if o := ss.pending[id]; o != nil {
		if o.cancel == nil {
			o.cancel = cancel
		}
		if ss.c != nil {
			ss.c.w.expectAnswer()
		}
	}
	ss.mu.Unlock()
}

// deadline is a context with a deadline and nothing else: what the
// asynchronous lock calls read of one (the master times the request out),
// without the timer a context.WithTimeout would start.
type deadline struct {
	context.Context
	at time.Time
}

func (d deadline) Deadline() (time.Time, bool) { return d.at, true }

func (ss *session) waitCtx(timeout int64) context.Context {
	if timeout <= 0 {
		return context.Background()
	}
	return deadline{context.Background(), time.Now().Add(time.Duration(timeout))}
}

// blockNote delivers a lock's blocking notifications to the client. The
// first may come before the lock is handed to the client (the grant and
// a conflicting request can meet at the master): it waits for the id.
type blockNote struct {
	ss   *session
	mu   sync.Mutex
	id   uint64
	want modes.Mode
	seen bool
}

func (b *blockNote) blocked(want modes.Mode) {
	b.mu.Lock()
	id := b.id
	if id == 0 {
		b.want, b.seen = want, true
	}
	b.mu.Unlock()
	if id != 0 {
		b.ss.send(wire.Header{}, &wire.ClientBlocking{Lock: id, Mode: want}, false)
	}
}

func (b *blockNote) granted(id uint64) {
	b.mu.Lock()
	b.id = id
	want, seen := b.want, b.seen
	b.mu.Unlock()
	if seen {
		b.ss.send(wire.Header{}, &wire.ClientBlocking{Lock: id, Mode: want}, false)
	}
}

// lockspaceWithRoom opens the lockspace of a request for a new lock or
// new permits, if the session may hold another; otherwise it answers the
// request and returns nil.
func (ss *session) lockspaceWithRoom(id uint64, name string) *dlm.Lockspace {
	ss.mu.Lock()
	held := ss.ds.Len() + len(ss.seen().holds) // a waiting lock is in ds already
	ss.mu.Unlock()
	if held >= ss.srv.cfg.MaxLocks {
		ss.refuse(id, refusedLocks, fmt.Errorf("%w: the session holds or waits for %d locks, the agent's limit", dlm.ErrLimit, held))
		return nil
	}
	ls, err := ss.lockspace(name)
	if err != nil {
		ss.fail(id, err)
		return nil
	}
	return ls
}

func (ss *session) lock(id uint64, m *wire.ClientLock) {
	ls := ss.lockspaceWithRoom(id, m.Lockspace)
	if ls == nil {
		return
	}
	if m.Flags&wire.ClientCached != 0 {
		ss.cached(id, ls, m)
		return
	}
	opts := make([]dlm.LockOption, 1, 4)
	opts[0] = ss.in
	if m.Owner != 0 {
		o, err := ss.owner(ls, m.Owner)
		if err != nil {
			ss.fail(id, err)
			return
		}
		opts = append(opts, dlm.WithOwner(o))
	}
	var note *blockNote
	if m.Flags&wire.ClientNotify != 0 {
		note = &blockNote{ss: ss}
		opts = append(opts, dlm.OnBlocking(note.blocked))
	}
	if m.TTL > 0 {
		opts = append(opts, dlm.WithTTL(time.Duration(m.TTL)))
	}
	if m.Flags&wire.ClientExpedite != 0 {
		opts = append(opts, dlm.Expedite())
	}
	failFast, try := m.Flags&wire.ClientFailFast != 0, m.Flags&wire.ClientTry != 0
	if failFast {
		opts = append(opts, dlm.FailFast())
	}
	// Answered at once (a grant or refusal by this node's table) in the
	// batch; otherwise when its master answers, on the node's callback
	// goroutine. No goroutine waits for it, unless the node has no
	// quorum: then (without ClientFailFast) one waits for quorum to return.
	if err := ss.reserve(id, nil); err != nil {
		ss.fail(id, err)
		return
	}
	var deadline time.Time
	if m.Timeout > 0 {
		deadline = time.Now().Add(time.Duration(m.Timeout))
	}
	resource, mode := m.Resource, m.Mode
	done := func(lk *dlm.Lock, err error) {
		if !failFast && errors.Is(err, dlm.ErrNoQuorum) && ss.waitQuorum(id, ls, resource, mode, try, deadline, note, opts) {
			return
		}
		cancelled := ss.release(id)
		if err == nil {
			lk, err = givenBack(lk, cancelled)
		}
		ss.granted(id, lk, note, err)
	}
	var cancel func()
	if try {
		cancel = ls.TryLockAsync(ss.waitCtx(m.Timeout), m.Resource, m.Mode, done, opts...)
	} else {
		cancel = ls.LockAsync(ss.waitCtx(m.Timeout), m.Resource, m.Mode, done, opts...)
	}
	ss.setCancel(id, cancel)
}

// givenBack unlocks a new lock granted after the client's ClientCancel
// for its request was read, and returns the error that answers the
// request instead (dlm's cancel lost the race with the grant); it returns
// lk itself otherwise. The client gave up on the request and would only
// give the grant back, a round trip to it later; meanwhile the master
// counts the lock as held, and every request queued behind it waits that
// round trip: under contention, with requests that give up soon, nearly
// every hand-off of the resource would cost one.
func givenBack(lk *dlm.Lock, cancelled bool) (*dlm.Lock, error) {
	if !cancelled {
		return lk, nil
	}
	_ = lk.Unlock()
	return nil, fmt.Errorf("%w: granted after the client cancelled the request; the agent gave it back", dlm.ErrCancelled)
}

// waitQuorum goes on with a lock request that the agent's node refused
// for want of quorum: as dlm's Lock does for a program of the node, it
// waits, within the request's timeout and until the client cancels it,
// for quorum to return, and then asks again, on a goroutine of its own
// (the blocking Lock). It reports false, leaving the refusal as the
// answer, if the request was cancelled or the session is over.
func (ss *session) waitQuorum(id uint64, ls *dlm.Lockspace, resource string, mode modes.Mode, try bool, deadline time.Time, note *blockNote, opts []dlm.LockOption) bool {
	ctx, ok := ss.quorumWaitCtx(id, deadline)
	if !ok {
		return false
	}
	go func() {
		defer ss.endOp(id)
		var lk *dlm.Lock
		var err error
		if try {
			lk, err = ls.TryLock(ctx, resource, mode, opts...)
		} else {
			lk, err = ls.Lock(ctx, resource, mode, opts...)
		}
		ss.granted(id, lk, note, err)
	}()
	return true
}

// granted answers a lock request with its outcome, and hands a granted
// lock to the client.
func (ss *session) granted(id uint64, lk *dlm.Lock, note *blockNote, err error) {
	if err != nil {
		ss.fail(id, err)
		return
	}
	ss.mu.Lock()
	over := ss.over
	ss.mu.Unlock()
	if over {
		_ = lk.Unlock()
		ss.fail(id, dlm.ErrSessionEnded)
		return
	}
	if err := lk.Err(); err != nil {
		// Lost before the client was told of it (lockLost has told it of
		// a lock it never saw, which it ignores).
		_ = lk.Unlock()
		ss.fail(id, err)
		return
	}
	ss.replyGrant(id, lk, false)
	if note != nil {
		// After the grant: a notification about a lock the client has not
		// been granted yet means nothing to it.
		note.granted(lk.ID())
	}
}

// okMsg is every ClientOK: a message is only read, to be encoded.
var okMsg = &wire.ClientOK{}

// grants recycles the ClientGrant replies: send encodes a message before
// it returns, and keeps nothing of it.
var grants = sync.Pool{New: func() any { return new(wire.ClientGrant) }}

// replyGrant answers id with lk's state.
func (ss *session) replyGrant(id uint64, lk *dlm.Lock, block bool) {
	g := grants.Get().(*wire.ClientGrant)
	v, ok := lk.Value()
	*g = wire.ClientGrant{Lock: lk.ID(), Mode: lk.Mode(), Token: lk.Token(), Demoted: lk.Demoted(),
		LVB: v, LVBSeq: lk.ValueSeq(), LVBFlags: wire.LVBPresent}
	if ok {
		g.LVBFlags |= wire.LVBValid
	}
	ss.reply(id, g, block)
	*g = wire.ClientGrant{}
	grants.Put(g)
}

// heldLock returns the session's lock of that id: the session's books
// are its dlm session's.
func (ss *session) heldLock(id uint64) (*dlm.Lock, error) {
	if ss.permit(id) != nil {
		return nil, fmt.Errorf("%w: %d names permits of a semaphore, which are released, not converted nor given a value", dlm.ErrInvalidArgument, id)
	}
	if lk := ss.ds.Lock(id); lk != nil {
		return lk, nil
	}
	if ss.lostUntold(id) {
		return nil, fmt.Errorf("%w: lock %d was lost; the ClientLost that says so is on its way", dlm.ErrLockLost, id)
	}
	return nil, fmt.Errorf("%w: the session holds no lock %d", dlm.ErrNotHeld, id)
}

func (ss *session) convert(id uint64, m *wire.ClientConvert) {
	lk, err := ss.heldLock(m.Lock)
	if err != nil {
		ss.fail(id, err)
		return
	}
	var opts []dlm.LockOption
	if m.Flags&wire.ClientQueue != 0 {
		opts = append(opts, dlm.QueueConvert())
	}
	if m.Flags&wire.ClientDemote != 0 {
		opts = append(opts, dlm.DemoteOnDeadlock())
	}
	failFast, try := m.Flags&wire.ClientFailFast != 0, m.Flags&wire.ClientTry != 0
	if failFast {
		opts = append(opts, dlm.FailFast())
	}
	if err := ss.reserve(id, nil); err != nil {
		ss.fail(id, err)
		return
	}
	var deadline time.Time
	if m.Timeout > 0 {
		deadline = time.Now().Add(time.Duration(m.Timeout))
	}
	mode := m.Mode
	done := func(lk *dlm.Lock, err error) {
		if !failFast && errors.Is(err, dlm.ErrNoQuorum) && lk.Err() == nil && ss.waitConvertQuorum(id, lk, mode, try, deadline, opts) {
			return
		}
		ss.release(id)
		ss.converted(id, lk, err)
	}
	var cancel func()
	if try {
		cancel = lk.TryConvertAsync(ss.waitCtx(m.Timeout), m.Mode, done, opts...)
	} else {
		cancel = lk.ConvertAsync(ss.waitCtx(m.Timeout), m.Mode, done, opts...)
	}
	ss.setCancel(id, cancel)
}

// waitConvertQuorum goes on with a conversion that the lock's master
// refused for want of quorum, the lock still held: as dlm's Convert does
// for a program of the node, it asks again (the blocking Convert, on a
// goroutine of its own) within the request's timeout and until the client
// cancels it. It reports false, leaving the refusal as the answer, if the
// request was cancelled or the session is over.
func (ss *session) waitConvertQuorum(id uint64, lk *dlm.Lock, mode modes.Mode, try bool, deadline time.Time, opts []dlm.LockOption) bool {
	ctx, ok := ss.quorumWaitCtx(id, deadline)
	if !ok {
		return false
	}
	go func() {
		defer ss.endOp(id)
		var err error
		if try {
			err = lk.TryConvert(ctx, mode, opts...)
		} else {
			err = lk.Convert(ctx, mode, opts...)
		}
		ss.converted(id, lk, err)
	}()
	return true
}

// quorumWaitCtx makes the context of a request that goes on to wait for
// quorum, within deadline (if not zero), cancelled by ClientCancel and
// when the agent closes; it reports false if the request was cancelled
// or the session is over. The wait counts as an operation (endOp).
func (ss *session) quorumWaitCtx(id uint64, deadline time.Time) (context.Context, bool) {
	ctx, cancel := context.WithCancel(ss.srv.ctx)
	if !deadline.IsZero() {
		ctx, cancel = context.WithDeadline(ss.srv.ctx, deadline)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	o := ss.pending[id]
	if o == nil || o.cancelled || ss.over {
		cancel()
		return nil, false
	}
	o.cancel, o.stop = cancel, cancel
	ss.srv.wg.Add(1)
	return ctx, true
}

func (ss *session) converted(id uint64, lk *dlm.Lock, err error) {
	if err != nil {
		ss.fail(id, err)
		return
	}
	ss.replyGrant(id, lk, false)
}

func (ss *session) unlock(id uint64, m *wire.ClientUnlock) {
	if m.Lock&(1<<63) != 0 && ss.releaseHold(m.Lock) {
		ss.replyLazy(id, okMsg)
		return
	}
	if ok, err := ss.releasePermit(m.Lock); ok {
		if err != nil {
			ss.fail(id, err)
		} else {
			ss.replyLazy(id, okMsg)
		}
		return
	}
	lk, err := ss.heldLock(m.Lock)
	if err != nil {
		ss.fail(id, err)
		return
	}
	if err := lk.Unlock(); err != nil { // ErrBusy: a conversion is in progress, the lock stays
		ss.fail(id, err)
		return
	}
	ss.replyLazy(id, okMsg)
}

func (ss *session) cancel(id uint64, m *wire.ClientCancel) {
	ss.mu.Lock()
	var cancel func()
	if o := ss.pending[m.Request]; o != nil {
		cancel, o.cancelled = o.cancel, true
	}
	ss.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	// The withdrawn request answers for itself: cancelled, or granted if
	// the grant came first. A request no longer waiting has its answer.
	ss.reply(id, okMsg, false)
}

func (ss *session) value(id uint64, m *wire.ClientValue) {
	if g, ok := ss.holdState(m.Lock); ok {
		ss.reply(id, g, false)
		return
	}
	if p := ss.permit(m.Lock); p != nil {
		ss.reply(id, &wire.ClientGrant{Lock: m.Lock, Mode: modes.NL, Token: p.Token()}, false)
		return
	}
	lk, err := ss.heldLock(m.Lock)
	if err != nil {
		ss.fail(id, err)
		return
	}
	ss.replyGrant(id, lk, false)
}

func (ss *session) setValue(id uint64, m *wire.ClientSetValue) {
	lk, err := ss.heldLock(m.Lock)
	if err != nil {
		ss.fail(id, err)
		return
	}
	if m.LVBOp == wire.LVBInvalidate {
		lk.InvalidateValue()
	} else if err := lk.SetValue(m.LVB); err != nil {
		ss.fail(id, err)
		return
	}
	ss.reply(id, okMsg, false)
}

// keepAlive renews the session at its masters (or a lock's own TTL) and
// tells the client how long it may trust its locks from its request on.
func (ss *session) keepAlive(id uint64, m *wire.ClientKeepAlive) {
	var lk *dlm.Lock
	if m.Lock != 0 {
		// A lock's or permits' own TTL: both are the session's locks.
		if lk = ss.ds.Lock(m.Lock); lk == nil {
			ss.fail(id, fmt.Errorf("%w: the session holds no lock %d", dlm.ErrNotHeld, m.Lock))
			return
		}
	}
	ctx, err := ss.startOp(id, int64(ss.ttl/2))
	if err != nil {
		ss.fail(id, err)
		return
	}
	go func() {
		defer ss.endOp(id)
		var err error
		switch {
		case lk != nil:
			err = lk.Renew(ctx)
		case renewDue(time.Now(), ss.ds.LeaseEnds(), ss.ttl):
			err = ss.ds.Renew(ctx)
		}
		if err != nil {
			ss.reply(id, errorMsg(err), true)
			return
		}
		lease, err := ss.lease()
		if err != nil {
			ss.reply(id, errorMsg(err), true)
			return
		}
		ss.reply(id, &wire.ClientAlive{Lease: int64(lease)}, true)
	}()
}

// renewDue reports whether a keep-alive of a session of TTL ttl, whose
// lease at its masters ends at leaseEnds, renews it there. A renewal
// restarts every lock's TTL at its master, work that grows with the locks
// held; but a client keeps alive every third of the shorter of the TTL and
// the lease the agent answers, which the quorum lease bounds (1.5 s by
// default), so that it trusts its locks no longer than the agent holds a
// quorum. Renewing only once two thirds of the TTL are left keeps that to
// a renewal every third of the TTL, and a silent client's session outlives
// it by two thirds of its TTL to all of it, as with keep-alives every third
// of the TTL. The answer's lease is the one left either way.
func renewDue(now, leaseEnds time.Time, ttl time.Duration) bool {
	return leaseEnds.Sub(now) < ttl-ttl/3
}

// describe asks the resource's master, wherever it is, for its queues
// (dlm's Lockspace.Describe), on a goroutine of its own: the master may be
// on another node, or recovering.
func (ss *session) describe(id uint64, m *wire.ClientDescribe) {
	ls, err := ss.lockspace(m.Lockspace)
	if err != nil {
		ss.fail(id, err)
		return
	}
	timeout := m.Timeout
	if timeout == 0 {
		timeout = int64(ss.ttl)
	}
	ss.describeIn(id, ls, m.Resource, timeout)
}

// describeIn answers request id with the description of resource in ls.
func (ss *session) describeIn(id uint64, ls *dlm.Lockspace, resource string, timeout int64) {
	ctx, err := ss.startOp(id, timeout)
	if err != nil {
		ss.fail(id, err)
		return
	}
	what := &described{lockspace: ls.Name(), resource: resource}
	go func() {
		defer ss.endOp(id)
		rd, err := ls.Describe(ctx, resource)
		if err != nil {
			ss.reply(id, errorMsg(err), true)
			return
		}
		ss.mu.Lock()
		defer ss.mu.Unlock()
		ss.sendNotedLocked(wire.Header{ID: id, Reply: true}, describedResource(rd, ss.srv.cfg.MaxFrame), true, what)
	}()
}

// describedResource is the ClientResource of a master's description: the
// locks that fit in a frame of maxFrame bytes (and MaxDescribed), in
// queue order, the rest counted in Omitted. The value block's state is
// told, not its bytes.
func describedResource(rd dlm.ResourceDump, maxFrame int) *wire.ClientResource {
	r := &wire.ClientResource{Master: rd.Master, Omitted: uint32(rd.Omitted)}
	room := maxFrame - 64 - len(rd.Master) // header, the resource's fields
	for q, locks := range [][]dlm.LockInfo{rd.Granted, rd.Converting, rd.Waiting} {
		for _, l := range locks {
			r.Known = true
			// A described lock is at most 1 (array) + 3 + 2+node + 5·9 + 5 bytes.
			size := 56 + len(l.Node)
			if len(r.Locks) >= wire.MaxDescribed || size > room {
				r.Omitted++
				continue
			}
			room -= size
			r.Locks = append(r.Locks, wire.ClientDescribedLock{
				Queue: uint8(q) + wire.QueueGranted, Granted: l.Mode, Requested: l.Requested,
				Node: l.Node, Lock: l.ID, Owner: l.Owner, Token: l.Token,
				Waited: int64(l.Wait), TTL: int64(l.TTL), Count: uint32(l.Permits),
			})
		}
	}
	if rd.Omitted > 0 {
		r.Known = true
	}
	if r.Known {
		r.LVBSeq, r.Permits = rd.Value.Seq, uint32(rd.Permits)
		if rd.Value.Valid {
			r.LVBFlags = wire.LVBValid
		}
	}
	return r
}

// bye ends the session at the client's request.
func (ss *session) bye(c *conn, id uint64) {
	ss.mu.Lock()
	ss.c = nil // nothing more for the client but the answer
	ss.mu.Unlock()
	ss.end()
	c.w.queue(wire.Header{ID: id, Reply: true}, okMsg, false)
	c.w.finish()
}
