package dlm

import (
	"errors"
	"fmt"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

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

// grant records a grant. Caller holds sh.mu.
func (lk *Lock) grant(o outcome) {
	lk.state, lk.mode = stGranted, o.mode
	if o.token != 0 {
		lk.token = o.token
	}
	lk.demoted = lk.demoted || o.demoted
	if o.lvbRead {
		lk.keepValue(o.lvb, o.lvbSeq)
		lk.valueOK = o.lvbValid
	}
}

// finish ends the operation in flight with o. Caller holds sh.mu.
func (lk *Lock) finish(sh *shard, o outcome) {
	if o.granted && !lk.ls.node.rec.LeaseHeld() {
		// The grant comes after this node's lease ended, before the
		// Manager noticed (a process pause): from this node's own table
		// (a holder let go, a TTL ran out) or from a master whose
		// completion waited in the socket. The others may already have
		// given the lock away, so the caller must not be told it holds
		// it: it is fenced as the lease's end will fence it (a waiter's
		// grant is given back, a conversion fails and the lock is lost).
		lk.ls.fenceLockLocked(sh, lk, errLeaseEnded)
	}
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
			lk.writing = wire.LVBNone
		} else {
			// A failed conversion leaves the lock as it was, unless a
			// deadlock demoted it to NL on the way.
			lk.state, lk.opErr = stGranted, o.err
			lk.unwrite()
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
			lk.writing = wire.LVBNone
		} else if lk.pendingConvert {
			lk.unwrite()
		}
		lk.pendingConvert = false
		return
	default:
		return
	}
	lk.signalDone()
}

// unwrite gives the value write of a conversion the master refused back
// to the holder, unless it set another value since: a refused conversion
// wrote nothing, and the write it carried was acknowledged to nobody.
// The holder's own copy (keepWrittenValue) already has the value.
// Caller holds sh.mu.
func (lk *Lock) unwrite() {
	op := lk.writing
	lk.writing = wire.LVBNone
	if op == wire.LVBNone || lk.valueOp != wire.LVBNone {
		return
	}
	lk.valueOp = op
	if op == wire.LVBWrite {
		data, _ := lk.heldData()
		lk.setNewValue(data)
	}
}

// giveBack releases a lock granted after its caller stopped waiting.
func (lk *Lock) giveBack(sh *shard) {
	if lk.local() {
		sh.releases = append(sh.releases, master.Release{Lock: lk.key(), Owner: lk.ownerID()})
		return
	}
	lk.postUnlock(sh, wire.LVBNone, nil, false)
}

// forgetLocked drops the lock from this node's books. Caller holds sh.mu.
func (lk *Lock) forgetLocked(sh *shard) {
	if lk.state == 0 {
		return
	}
	if _, ok := sh.locks[lk.id]; ok {
		delete(sh.locks, lk.id)
		lk.ls.node.nlocks.Add(-1)
		if lk.session != nil {
			lk.session.remove(lk)
		}
	}
	lk.observeHeld()
	lk.cancelContexts(errUnlocked)
	lk.state = stReleased
	if e := lk.ext.Load(); e != nil && e.lease != nil {
		e.lease.Stop()
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
	e := lk.extLocked()
	if e.lostErr != nil {
		return
	}
	if !errors.Is(why, ErrLockLost) && !errors.Is(why, ErrClosed) {
		why = fmt.Errorf("%w: %w", ErrLockLost, why)
	}
	e.lostErr = why
	if e.lost != nil { // else Lost makes it closed, if anyone asks
		close(e.lost)
	}
	lk.observeHeld()
	lk.cancelContexts(why)
	lk.ls.node.met.lost.Inc()
	if lk.session != nil {
		lk.session.lockLost(lk, why)
	}
}

// closeLocked settles the lock as its node closes. Caller holds sh.mu.
func (lk *Lock) closeLocked(sh *shard) {
	switch lk.state {
	case stGranted, stConverting:
		lk.releaseAtMaster(sh, modes.NL)
	case stWaiting:
		if lk.local() {
			_ = sh.table.Cancel(lk.key(), lk.ownerID())
		} else {
			sh.can = wire.CancelRequest{Epoch: lk.ls.node.epoch(), Lockspace: lk.ls.name, Resource: lk.resource, Lock: lk.id, Owner: uint64(lk.ownerID())}
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
