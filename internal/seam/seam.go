// Package seam holds the types of the test-only seams between this
// module's packages. A seam is a method whose signature names a type of
// this package: only code inside the module can name it, so no user of the
// library can implement one and switch a seam on, by accident or
// otherwise. The package has no state; the seams' values live in the
// values that implement them.
package seam

import "context"

// Key is the parameter that makes a method a seam.
type Key struct{}

// NoLockDelay is implemented by a recovery.Host that may switch the
// lock-delay off (dlm's, see WithoutLockDelay): a removed node's
// locks are then re-granted as soon as the view without it commits. That
// is unsafe, and exists so that a control experiment can show the history
// checker catching the double grant it allows.
type NoLockDelay interface {
	NoLockDelay(Key) bool
}

type noLockDelayKey struct{}

// WithoutLockDelay returns a context that makes dlm.Start start a node with
// the lock-delay off (the NoLockDelay seam). Only code in this module can
// call it: dlmnode agent --unsafe-no-lock-delay, for the chaos harness's
// control run across processes.
func WithoutLockDelay(ctx context.Context) context.Context {
	return context.WithValue(ctx, noLockDelayKey{}, true)
}

// LockDelayOff reports whether ctx came from WithoutLockDelay.
func LockDelayOff(ctx context.Context) bool {
	off, _ := ctx.Value(noLockDelayKey{}).(bool)
	return off
}

// NoJointConsensus is implemented by a recovery.Host that may switch the
// joint step of membership changes off: the cluster then moves straight
// from the old member set to the new one, and a quorum of the old and one
// of the new may not overlap. Unsafe; for the control experiment of the
// membership-change nemesis tests.
type NoJointConsensus interface {
	NoJointConsensus(Key) bool
}

// LeaseStall is implemented by a recovery.Host whose tests stall its
// node's lease bookkeeping: while LeaseStalled is true the Manager does not
// look at its lease (neither its timer nor its heartbeats do), as when the
// process is stopped (SIGSTOP, a long GC or scheduling pause) and the
// timer that would end the lease runs late. The lease still ends on time
// on the clock, which is what the node must go by.
type LeaseStall interface {
	LeaseStalled(Key) bool
}
