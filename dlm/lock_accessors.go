package dlm

import (
	"fmt"
	"slices"

	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

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
	data, _ := lk.heldData()
	return slices.Clone(data), lk.valueOK
}

// ValueSeq returns the sequence number of the value Value returns: it
// counts writes to the resource's value.
func (lk *Lock) ValueSeq() uint64 {
	lk.sh.mu.Lock()
	defer lk.sh.mu.Unlock()
	_, seq := lk.heldData()
	return seq
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
	lk.setNewValue(v)
	lk.valueOp = wire.LVBWrite
	return nil
}

// InvalidateValue marks the value block not valid when the lock, held in
// PW or EX, next converts down or is unlocked (the holder could not finish
// what the value describes).
func (lk *Lock) InvalidateValue() {
	lk.sh.mu.Lock()
	defer lk.sh.mu.Unlock()
	lk.setNewValue(nil)
	lk.valueOp = wire.LVBInvalidate
}

// Lost returns a channel closed when the lock can no longer be trusted:
// its TTL ran out on this node's clock (before the master can release it),
// the master released it, or the node closed. Err says why.
func (lk *Lock) Lost() <-chan struct{} {
	lk.sh.mu.Lock()
	defer lk.sh.mu.Unlock()
	e := lk.extLocked()
	if e.lost == nil {
		e.lost = make(chan struct{})
		if e.lostErr != nil {
			close(e.lost)
		}
	}
	return e.lost
}

// Err returns why the lock was lost, or nil.
func (lk *Lock) Err() error {
	lk.sh.mu.Lock()
	defer lk.sh.mu.Unlock()
	return lk.lostErr()
}
