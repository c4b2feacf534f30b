package dlm

import "github.com/seed-a6839e30/dlm/internal/seam"

// testKnobs are the test-only seams of a node, set by this package's tests
// through start; Start leaves them all off.
type testKnobs struct {
	// deadlockBeforeConfirm, when set, runs on the detector after it found
	// cycles and before it asks for their confirmation; deadlockBeforeFail
	// runs after confirmation, before the victims are failed. Tests use
	// them to change the locks at those moments, or to look.
	deadlockBeforeConfirm func()
	deadlockBeforeFail    func([]victim)
	// deadlockBeforeSearch, when set, runs on the detector with its mutex
	// held, between rounds and before it looks whether to search: a test
	// may replace the reports there, and the search that follows sees
	// exactly them, with no fresh report in between.
	deadlockBeforeSearch func(*deadlocks)
	// noLockDelay switches the lock-delay off (the nemesis tests'
	// control); Start sets it from seam.WithoutLockDelay.
	noLockDelay bool
	// noAgreement accepts every peer whatever configuration it advertises
	// (the agreement tests' control).
	noAgreement bool
	// noJointConsensus moves membership changes straight from the old set
	// to the new (the membership-change tests' control).
	noJointConsensus bool
	// stallLease, when set and true for a node's name, stalls that node's
	// lease bookkeeping (seam.LeaseStall), as a process pause does: its
	// lease ends on the clock while nothing notices.
	stallLease func(node string) bool
}

// NoLockDelay is recovery's seam for the lock-delay (seam.NoLockDelay),
// which control experiments switch off: the nemesis tests through
// testKnobs, other processes through seam.WithoutLockDelay (dlmnode agent
// --unsafe-no-lock-delay).
func (h recoveryHost) NoLockDelay(seam.Key) bool { return h.n.knobs.noLockDelay }

// LeaseStalled is recovery's seam.LeaseStall: tests stall a node's lease
// bookkeeping, as a process pause does.
func (h recoveryHost) LeaseStalled(seam.Key) bool {
	return h.n.knobs.stallLease != nil && h.n.knobs.stallLease(h.n.self.name)
}
