package dlm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

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
	if lk.answered.Load() {
		// Nothing signals an ended operation's channel again: a held lock
		// need not keep it (a million held locks would keep 96 MB of them,
		// every one scanned by each collection).
		lk.done = nil
	}
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
	n := lk.ls.node
	now := n.sinceStart()
	if lk.semCount() == 0 { // permits are not a mode's wait
		n.met.wait[remote][mode].Observe((now - lk.started).Seconds())
	}
	lk.heldSince.CompareAndSwap(0, int64(now)|1)
}

// sinceStart is the node's monotonic clock: the time since it started.
func (n *Node) sinceStart() time.Duration { return time.Since(n.start) }

// observeHeld records, once per grant, how long the lock was held: it is
// being unlocked or was lost. Caller holds sh.mu.
func (lk *Lock) observeHeld() {
	since := lk.heldSince.Swap(0)
	if since == 0 {
		return
	}
	n := lk.ls.node
	d := (n.sinceStart() - time.Duration(since)).Seconds()
	if lk.semCount() > 0 {
		n.met.heldPermits.Observe(d)
	} else if lk.mode.Valid() {
		n.met.held[lk.mode].Observe(d)
	}
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
			lk.unwrite()
		}
		drain(lk.done)
		return ctxError(cause)
	}
	if lk.local() && lk.ls.node.serving() && !lk.ls.node.heldBack(lk.hash) {
		// The cancel's effect ends the operation at once, under this lock.
		_ = lk.ls.tableCancel(sh, lk.key(), lk.ownerID())
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
	if lk.ls.node.serving() && !lk.ls.node.heldBack(lk.hash) {
		sh.can = wire.CancelRequest{Epoch: lk.ls.node.epoch(), Lockspace: lk.ls.name, Resource: lk.resource, Lock: lk.id, Owner: uint64(lk.ownerID())}
		_ = lk.post(&sh.can)
	}
	if lk.state == stWaiting {
		lk.state = stAbandoned
	} else {
		lk.state = stGranted // the conversion may still happen; Mode tells
		lk.pendingConvert = true
		if modes.IsDown(lk.mode, lk.want) {
			// The master grants a down-conversion whenever it arrives,
			// and may let others in at once: from now on the holder may
			// count only on the weaker mode.
			lk.mode = lk.want
		}
	}
	return ctxError(cause)
}

// signalDone ends the operation in flight for its waiter. Caller holds
// sh.mu.
func (lk *Lock) signalDone() {
	lk.answered.Store(true)
	signal(lk.done)
	lk.lender.Load().Interrupt() // after answered: the reader looks at it
	if lk.onDone != nil {
		lk.ls.node.callbacks.pushDone(lk)
	}
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
