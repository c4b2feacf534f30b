package dlm

import (
	"errors"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

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
	sh.unl = wire.UnlockRequest{Epoch: lk.ls.node.epoch(), Lockspace: lk.ls.name, Resource: lk.resource, Lock: lk.id, Owner: uint64(lk.ownerID()), LVB: val, LVBOp: op}
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

// releaseAtMaster tells the master to release the lock, writing the value
// back if the holder set one and holds PW or EX. Caller holds sh.mu.
func (lk *Lock) releaseAtMaster(sh *shard, _ modes.Mode) error {
	op, val := lk.valueToWrite(lk.mode, modes.NL)
	if n := lk.ls.node; n.heldBack(lk.hash) {
		// The bucket is being rebuilt: release the lock once it is.
		n.deferUnlock(lk, op, val)
		return nil
	}
	if lk.local() {
		return fromMaster(lk.ls.tableRelease(sh, master.Release{Lock: lk.key(), Owner: lk.ownerID(), LVBOp: master.LVBOp(op), LVB: val}))
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
	return lk.valueOp, lk.newValue()
}

// keepWrittenValue updates this holder's copy of the value block with what
// it writes (a PW or EX holder is the only writer): a recovery then reports
// the value as written, even if the write never reached the old master.
// Caller holds sh.mu.
func (lk *Lock) keepWrittenValue(op wire.LVBOp, val []byte) {
	switch op {
	case wire.LVBWrite:
		_, seq := lk.heldData()
		lk.keepValue(val, seq+1)
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
		if lost := lk.lostErr(); lost != nil && !errors.Is(lost, ErrClosed) && !lk.lostReported {
			lk.lostReported = true
			return lost
		}
		return ErrNotHeld
	}
	err := lk.releaseAtMaster(sh, modes.NL)
	lk.forgetLocked(sh)
	if lost := lk.lostErr(); lost != nil && err == nil {
		lk.lostReported = true
		err = lost
	}
	return err
}
