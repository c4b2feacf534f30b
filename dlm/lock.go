package dlm

import (
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
	owner    *Owner // nil: the lock is its own owner
	hash     uint64 // resource hash: picks the shard and, per view, the master
	onBlock  func(modes.Mode)
	started  time.Duration // when the in-flight operation started (Node.sinceStart), for metrics

	// Guarded by sh.mu.
	// (The one-byte fields sit together, with answered filling out their
	// word: a Lock must stay in its size class, see TestLockSize.)
	state   lockState
	mode    modes.Mode // granted mode
	want    modes.Mode // mode asked for by the operation in flight
	demoted bool
	valueOK bool
	valueOp wire.LVBOp
	// writing is the value operation the conversion in flight carries:
	// given back to valueOp if the master refuses the conversion (no
	// quorum), so that the next one, or the unlock, writes it after all.
	writing wire.LVBOp
	// answered says the operation in flight has ended, and stays true
	// until the next operation starts: what wait checks before making done,
	// and the Lock's Waiter for the transport (lockWait). Written under
	// sh.mu.
	answered atomic.Bool
	// pendingConvert: the caller gave up on a conversion that may still
	// be granted.
	pendingConvert bool
	lostReported   bool // Unlock has returned the loss once
	// wanted: the master said another request waits for this lock (a
	// blocking notification). Its unlock then leaves at once; otherwise it
	// may ride on the next message to the master (see postUnlock).
	wanted  bool
	noQueue bool // the operation in flight is a try: recovery fails it
	token   uint64
	// value is this holder's copy of the value block, nil while the
	// resource's value is empty and was never written: most locks carry
	// none, and pay only this pointer.
	value *heldValue
	opErr error // outcome of the operation in flight
	// done is signalled when the operation in flight ends. The waiter
	// makes it only when it has to block (wait): a remote answer read by
	// the waiting goroutine itself needs none, which spares a remote
	// operation an allocation.
	done chan struct{}
	// lender is the master's connection while the waiter reads it for its
	// answer (lockWait): an answer that arrives otherwise (a local event,
	// another master after recovery) must interrupt that reading.
	lender atomic.Pointer[transport.Lender]
	refs   int // acquisitions of a reentrant owner
	// unsent is the request or conversion in flight when its master could
	// not be reached, or while a recovery held its bucket back: the tick
	// loop (or Resume) sends it again, and a recovery reports it (a dead
	// master's requests wait for the view without it).
	unsent *pendingReq
	// reportedAt is the epoch this lock was last reported to a new master
	// in: answers of earlier epochs come from its old master and are
	// dropped (the report said the lock stood as it did without them).
	reportedAt uint64
	session    *Session // nil: the lock is in no session (InSession)
	// onDone is the callback of the operation in flight when it was
	// started by LockAsync or ConvertAsync (lock_async.go). Guarded by
	// sh.mu.
	onDone func(*Lock, error)
	// heldSince is when the lock was first granted (Node.sinceStart, 0:
	// not granted, or the hold already observed), for
	// dlm_lock_held_seconds.
	heldSince atomic.Int64
	// ext is what few locks need (nil for most): the contexts of
	// Lock.Context, the permits of a lock on a semaphore, a value set by
	// SetValue, a TTL and its lease, the loss of a lost lock and the channel
	// of Lost. Made when the lock is made or under
	// sh.mu (extLocked); read without it only for the permits and the TTL,
	// which are set when the lock is made.
	ext atomic.Pointer[lockExt]
}

// lockExt is what only some locks need, kept out of Lock so that a lock
// stays in its allocation size class. A lock on a semaphore has one from
// the start; Lock.Context gives one to any other lock, under sh.mu.
type lockExt struct {
	// ctxs are the contexts of Lock.Context, cancelled when the lock is
	// lost or leaves this node's books (lock_context.go). Guarded by sh.mu.
	ctxs map[*lockContext]struct{}
	// permits and count make the lock hold count permits of a semaphore of
	// permits (semaphore.go); zero for a lock in a mode. Fixed when the
	// lock is made.
	permits, count uint32
	// ttl is the lock's own TTL (WithTTL), 0 for none. Set when the lock
	// is made, like the permits.
	ttl time.Duration
	// newValue is set by SetValue, written back on down-convert or
	// unlock. Guarded by sh.mu.
	newValue []byte
	// lease and leaseEnds are the holder's lease of a lock with a TTL
	// (ttl.go). Guarded by sh.mu.
	lease     *time.Timer
	leaseEnds time.Time
	// lost is closed when the lock is lost, made by the first Lost (closed
	// already if the loss came first), and lostErr says why. Guarded by
	// sh.mu: a lock that is never lost and never asked for Lost needs
	// neither, and one lost that nobody watched needs no channel.
	lost    chan struct{}
	lostErr error
}

// heldValue is a holder's copy of its resource's value block and the
// sequence of the write that made it.
type heldValue struct {
	data []byte
	seq  uint64
}

// ownerID is the owner the master knows the lock by: 0 for a lock that
// is its own owner.
func (lk *Lock) ownerID() master.OwnerID {
	if lk.owner != nil {
		return lk.owner.id
	}
	return 0
}

// lostErr says why the lock was lost, nil while it is not. Caller holds
// sh.mu.
func (lk *Lock) lostErr() error {
	if e := lk.ext.Load(); e != nil {
		return e.lostErr
	}
	return nil
}

// heldData returns this holder's copy of the value block (aliased: copy
// it to keep it) and its sequence. Caller holds sh.mu.
func (lk *Lock) heldData() ([]byte, uint64) {
	if v := lk.value; v != nil {
		return v.data, v.seq
	}
	return nil, 0
}

// keepValue makes data (copied) and seq this holder's copy of the value
// block. An empty value never written needs no copy. Caller holds sh.mu.
func (lk *Lock) keepValue(data []byte, seq uint64) {
	v := lk.value
	if v == nil {
		if len(data) == 0 && seq == 0 {
			return
		}
		v = &heldValue{}
		lk.value = v
	}
	v.data, v.seq = append(v.data[:0], data...), seq
}

// ttl is the lock's own TTL, 0 for none.
func (lk *Lock) ttl() time.Duration {
	if e := lk.ext.Load(); e != nil {
		return e.ttl
	}
	return 0
}

// extLocked returns the lock's lockExt, made if it has none. Caller holds
// sh.mu.
func (lk *Lock) extLocked() *lockExt {
	e := lk.ext.Load()
	if e == nil {
		e = &lockExt{}
		lk.ext.Store(e)
	}
	return e
}

// newValue is the value SetValue set, if any. Caller holds sh.mu.
func (lk *Lock) newValue() []byte {
	if e := lk.ext.Load(); e != nil {
		return e.newValue
	}
	return nil
}

// setNewValue makes v (copied) the value to write back; nil v clears it
// (keeping its buffer). Caller holds sh.mu.
func (lk *Lock) setNewValue(v []byte) {
	e := lk.ext.Load()
	if e == nil {
		if len(v) == 0 {
			return
		}
		e = lk.extLocked()
	}
	e.newValue = append(e.newValue[:0], v...)
}

// semCount returns the permits a semaphore lock holds or asks for, 0 for a
// lock in a mode.
func (lk *Lock) semCount() uint32 {
	if e := lk.ext.Load(); e != nil {
		return e.count
	}
	return 0
}

// semPermits returns the permits of a semaphore lock's semaphore.
func (lk *Lock) semPermits() uint32 {
	if e := lk.ext.Load(); e != nil {
		return e.permits
	}
	return 0
}

// masterName is the node that masters the lock's resource in the current
// view: operations always go there, so that after a recovery moved the
// resource they reach its new master.
func (lk *Lock) masterName() string {
	return lk.ls.node.view.Load().masterOf(lk.hash).name
}

func (lk *Lock) local() bool { return lk.masterName() == lk.ls.node.self.name }

func (lk *Lock) key() master.LockID { return master.LockID{Node: lk.ls.node.self.id, ID: lk.id} }
