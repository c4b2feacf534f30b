package dlm

import (
	"context"
	"fmt"
	"sync"

	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// LockAsync is Lock for a caller that must not block, such as a server
// with many clients on few goroutines (the agent's client port): it sends
// the request and returns; done is called once with the granted lock, or
// nil and why not. It is called before LockAsync returns when the answer
// is immediate (a grant by this node's own table, a refusal), otherwise
// later on the node's callback goroutine, in order with the blocking
// callbacks; it must not block for long.
//
// ctx's deadline bounds the wait (the master times the request out, as
// for Lock); its cancellation is not watched: call the returned cancel to
// withdraw the request. done then gets ErrCancelled, or the lock if it was
// granted first. A node in recovery holds the request until the recovery
// ends (on a goroutine of its own, the one case there is one); a node
// without quorum refuses it at once. A reentrant
// owner is refused (ErrInvalidArgument): its count needs a caller that
// waits.
func (ls *Lockspace) LockAsync(ctx context.Context, resource string, mode modes.Mode, done func(*Lock, error), opts ...LockOption) (cancel func()) {
	o := buildOpts(opts)
	finish := func(lk *Lock, err error) {
		ls.node.met.count(opLock, mode, err)
		done(lk, err)
	}
	if err := ls.checkAsync(resource, mode, o); err != nil {
		finish(nil, err)
		return noCancel
	}
	start := func(ctx context.Context) func() {
		lk, pending, err := ls.startNew(ctx, resource, mode, o, finish)
		if !pending {
			finish(lk, err)
			return noCancel
		}
		return lk.cancelAsync
	}
	if !ls.node.serving() {
		return ls.node.afterRecovery(ctx, start, func(err error) { finish(nil, err) })
	}
	return start(ctx)
}

// afterRecovery starts a request once the node serves again: a request
// started during a recovery that has already collected its reports would
// reach no master. It waits on a goroutine of its own (recoveries are
// rare); the cancel it returns withdraws the request, waiting or started.
func (n *Node) afterRecovery(ctx context.Context, start func(context.Context) func(), fail func(error)) func() {
	wctx, stop := context.WithCancel(ctx)
	var mu sync.Mutex
	cancel := func() {}
	go func() {
		defer stop()
		if err := n.waitServing(wctx); err != nil {
			fail(err)
			return
		}
		c := start(ctx)
		mu.Lock()
		cancel = c
		mu.Unlock()
	}()
	return func() {
		stop()
		mu.Lock()
		c := cancel
		mu.Unlock()
		c()
	}
}

// TryLockAsync is LockAsync's TryLock: granted at once or refused with
// ErrNotQueued, but with a remote master the answer still comes later.
func (ls *Lockspace) TryLockAsync(ctx context.Context, resource string, mode modes.Mode, done func(*Lock, error), opts ...LockOption) (cancel func()) {
	return ls.LockAsync(ctx, resource, mode, done, append(opts, tryOption)...)
}

// tryOption marks a LockAsync as a try.
func tryOption(o *lockOpts) { o.noQueue = true }

func (ls *Lockspace) checkAsync(resource string, mode modes.Mode, o lockOpts) error {
	if err := o.validate(mode, false); err != nil {
		return err
	}
	if err := ls.checkResource(resource); err != nil {
		return err
	}
	if o.owner != nil && o.owner.reentrant {
		return fmt.Errorf("%w: a reentrant owner's lock cannot be taken asynchronously", ErrInvalidArgument)
	}
	return ls.node.servingOrRecovering()
}

// ConvertAsync is Convert for a caller that must not block (see
// LockAsync): done is called once with the lock and the conversion's
// outcome.
func (lk *Lock) ConvertAsync(ctx context.Context, mode modes.Mode, done func(*Lock, error), opts ...LockOption) (cancel func()) {
	o := buildOpts(opts)
	finish := func(_ *Lock, err error) {
		lk.ls.node.met.count(opConvert, mode, err)
		done(lk, err)
	}
	if err := o.validate(mode, true); err != nil {
		finish(lk, err)
		return noCancel
	}
	if err := lk.ls.node.servingOrRecovering(); err != nil {
		finish(lk, err)
		return noCancel
	}
	start := func(ctx context.Context) func() {
		pending, err := lk.startConvert(ctx, mode, o, finish)
		if !pending {
			finish(lk, err)
			return noCancel
		}
		return lk.cancelAsync
	}
	if !lk.ls.node.serving() {
		return lk.ls.node.afterRecovery(ctx, start, func(err error) { finish(lk, err) })
	}
	return start(ctx)
}

// TryConvertAsync is ConvertAsync's TryConvert.
func (lk *Lock) TryConvertAsync(ctx context.Context, mode modes.Mode, done func(*Lock, error), opts ...LockOption) (cancel func()) {
	return lk.ConvertAsync(ctx, mode, done, append(opts, tryOption)...)
}

func noCancel() {}

// servingOrRecovering reports why the node takes no request now, if it
// takes none: one in recovery waits for it without blocking anyone.
func (n *Node) servingOrRecovering() error {
	if n.gate.serving.Load() {
		return nil
	}
	g := &n.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.closed:
		return ErrClosed
	case g.joined && g.noQuorum:
		return ErrNoQuorum
	}
	return nil
}

// asyncDone calls the callback of the asynchronous operation that ended.
// It runs on the node's callback goroutine.
func (lk *Lock) asyncDone() {
	sh := lk.sh
	sh.mu.Lock()
	fn := lk.onDone
	lk.onDone = nil
	err, mode, forgotten := lk.opErr, lk.mode, lk.state == stReleased && lk.opErr != nil
	lk.opErr = nil
	sh.mu.Unlock()
	if fn == nil {
		return
	}
	if err == nil {
		lk.observeGrant(mode)
	}
	if forgotten {
		fn(nil, err) // a new lock that was not granted
		return
	}
	fn(lk, err)
}

// cancelAsync withdraws an asynchronous operation still in flight: its
// callback then reports ErrCancelled, or the grant that came first.
func (lk *Lock) cancelAsync() {
	sh := lk.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if lk.onDone == nil || (lk.state != stWaiting && lk.state != stConverting) {
		return
	}
	switch {
	case lk.unsent != nil: // it never reached a master
		lk.unsent = nil
		lk.opErr = ErrCancelled
		if lk.state == stWaiting {
			lk.forgetLocked(sh)
		} else {
			lk.state = stGranted
		}
		lk.signalDone()
	case lk.ls.node.heldBack(lk.hash):
		// Reported to the bucket's new master as it stands: what the
		// recovery makes of it (a grant, most likely) is the answer.
	case lk.local() && lk.ls.node.serving():
		_ = lk.ls.tableCancel(sh, lk.key(), lk.ownerID()) // its effect ends the operation
	case lk.ls.node.serving():
		// The master answers the cancel: cancelled, or the grant.
		lk.postCancel(sh)
	}
}

// postCancel tells the lock's remote master to withdraw its request or
// conversion in flight. Caller holds sh.mu.
func (lk *Lock) postCancel(sh *shard) {
	sh.can = wire.CancelRequest{Epoch: lk.ls.node.epoch(), Lockspace: lk.ls.name, Resource: lk.resource, Lock: lk.id, Owner: uint64(lk.ownerID())}
	_ = lk.post(&sh.can)
}
