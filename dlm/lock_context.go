package dlm

import (
	"context"
	"fmt"
)

// Context returns a context derived from parent that is cancelled the
// moment the lock stops being safe to act on: when it is lost (Lost
// closes: this node lost its quorum, the TTL ran out on this node's clock,
// the master released it, the node closed) or this holder unlocks it.
// context.Cause on it says why: the error Err returns, or ErrNotHeld after
// an Unlock. Run the work the lock protects under it, so that the work is
// interrupted, not merely told. Call the CancelFunc when the work is done,
// as with context.WithCancel.
//
// The context is an early warning, not the guard. A process can be paused
// (a GC pause, a stopped VM) after it checked the context and before its
// write reaches the store, and the write still arrives after others hold
// the lock; no lock manager can stop that. The fencing token can: send
// Token with every write and have the store refuse a token lower than the
// highest it has accepted.
func (lk *Lock) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	sh := lk.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch {
	case lk.lostErr() != nil:
		cancel(lk.lostErr())
		return ctx, func() {}
	case lk.state != stGranted && lk.state != stConverting:
		cancel(errUnlocked)
		return ctx, func() {}
	}
	e := lk.extLocked()
	if e.ctxs == nil {
		e.ctxs = map[*lockContext]struct{}{}
	}
	c := &lockContext{cancel: cancel}
	e.ctxs[c] = struct{}{}
	return ctx, func() {
		sh.mu.Lock()
		delete(e.ctxs, c)
		sh.mu.Unlock()
		cancel(context.Canceled)
	}
}

// lockContext is a context made by Lock.Context, until it is cancelled.
type lockContext struct{ cancel context.CancelCauseFunc }

// errUnlocked is the cause of a Lock.Context whose lock was unlocked.
var errUnlocked = fmt.Errorf("%w: unlocked", ErrNotHeld)

// cancelContexts cancels the lock's contexts with cause: the lock was lost,
// or left this holder. Caller holds sh.mu.
func (lk *Lock) cancelContexts(cause error) {
	e := lk.ext.Load()
	if e == nil {
		return
	}
	for c := range e.ctxs {
		c.cancel(cause)
	}
	e.ctxs = nil
}
