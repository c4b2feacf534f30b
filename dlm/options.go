package dlm

import (
	"fmt"
	"time"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
)

// A LockOption modifies a Lock, TryLock or Convert call.
type LockOption func(*lockOpts)

type lockOpts struct {
	owner      *Owner
	onBlocking func(modes.Mode)
	ttl        time.Duration
	flags      master.Flags
	noQueue    bool
	failFast   bool // FailFast: no waiting for quorum
	// permits and count make the request one for count permits of a
	// semaphore of permits (Semaphore.Acquire); zero for a lock.
	permits, count uint32
	session        *Session
}

// WithOwner makes the lock part of an owner: a transaction or process whose
// locks deadlock detection follows together, and which a reentrant owner
// counts. Without it a lock is its own owner.
func WithOwner(o *Owner) LockOption { return func(l *lockOpts) { l.owner = o } }

// OnBlocking registers fn to be called when the lock blocks another
// request, with the mode that request wants: the holder may then convert
// down or unlock (GFS2 and OCFS2 cache locks this way). fn runs on one of
// the node's callback goroutines, never under the library's locks; calls for
// one lock come in order. fn may call the lock API; it should not block for
// long, since it delays the other callbacks of the node.
func OnBlocking(fn func(want modes.Mode)) LockOption {
	return func(l *lockOpts) { l.onBlocking = fn }
}

// WithTTL gives the lock a time to live: the master releases it if it is
// not renewed (Lock.Renew, Lock.KeepAlive) within ttl. The holder's Lost
// channel closes on its own clock before the master can release it.
func WithTTL(ttl time.Duration) LockOption { return func(l *lockOpts) { l.ttl = ttl } }

// QueueConvert (the VMS QUECVT flag) makes an up-conversion wait behind
// conversions already queued, instead of being granted in place ahead of
// them when it is compatible.
func QueueConvert() LockOption { return func(l *lockOpts) { l.flags |= master.QueueConvert } }

// DemoteOnDeadlock (the Linux CONVDEADLK flag) resolves a conversion
// deadlock by demoting this lock to NL and carrying on, instead of failing
// the conversion with ErrDeadlock. Lock.Demoted reports it.
func DemoteOnDeadlock() LockOption { return func(l *lockOpts) { l.flags |= master.ConvDeadlock } }

// Expedite grants a new NL lock at once, ahead of any queue (an NL lock
// without it waits behind queued requests, like any other: no barging).
// It is an option of Lock only: with another mode, with TryLock (whose
// NOQUEUE it would make moot) or with Convert, the call fails with
// ErrInvalidArgument.
func Expedite() LockOption { return func(l *lockOpts) { l.flags |= master.Expedite } }

func buildOpts(opts []LockOption) lockOpts {
	if len(opts) == 0 {
		return lockOpts{} // the common case: no allocation (o below escapes into f)
	}
	o := new(lockOpts)
	for _, f := range opts {
		if f != nil {
			f(o)
		}
	}
	return *o
}

func (o *lockOpts) validate(mode modes.Mode, convert bool) error {
	if !mode.Valid() {
		return fmt.Errorf("%w: %d", ErrInvalidMode, uint8(mode))
	}
	if o.ttl < 0 {
		return fmt.Errorf("%w: negative TTL %v", ErrInvalidArgument, o.ttl)
	}
	if o.flags&master.Expedite != 0 && (mode != modes.NL || convert || o.noQueue) {
		return fmt.Errorf("%w: Expedite is only for new NL locks, without TryLock", ErrInvalidArgument)
	}
	if o.flags&(master.QueueConvert|master.ConvDeadlock) != 0 && !convert {
		return fmt.Errorf("%w: QueueConvert and DemoteOnDeadlock are options of Convert", ErrInvalidArgument)
	}
	if o.flags&master.ConvDeadlock != 0 && o.noQueue {
		return fmt.Errorf("%w: DemoteOnDeadlock cannot be combined with TryConvert", ErrInvalidArgument)
	}
	return nil
}

func (o *lockOpts) tableFlags() master.Flags {
	f := o.flags
	if o.noQueue {
		f |= master.NoQueue
	}
	return f
}
