package lockapi

import (
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// An Option modifies an Acquire or a Convert.
type Option func(*Options)

// Options is what the options of one call asked for. Programs use the
// Option functions; implementations read the result of Apply.
type Options struct {
	// Try: grant now or fail with ErrNotQueued, never wait.
	Try bool
	// Owner is the owner the lock belongs to; nil: the lock is its own.
	Owner Owner
	// OnBlocking is called when the lock blocks another request.
	OnBlocking func(want modes.Mode)
	// TTL: the lock's master releases it unless it is renewed within TTL.
	TTL time.Duration
	// QueueConvert, DemoteOnDeadlock: options of Convert.
	QueueConvert, DemoteOnDeadlock bool
	// Expedite: a new NL lock granted ahead of any queue.
	Expedite bool
	// Cached: a PR lock served from a shared-lock cache (see Cached).
	Cached bool
	// FailFast: fail with ErrNoQuorum instead of waiting for quorum.
	FailFast bool
}

// Apply returns what opts ask for; nil options are skipped.
func Apply(opts []Option) Options {
	var o Options
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// Try makes an Acquire or a Convert fail with ErrNotQueued instead of
// waiting, leaving nothing queued.
func Try() Option { return func(o *Options) { o.Try = true } }

// WithOwner makes the lock part of owner o, whose locks deadlock detection
// follows together. The owner must come from the same implementation (and
// lockspace) as the lock.
func WithOwner(o Owner) Option { return func(op *Options) { op.Owner = o } }

// OnBlocking registers fn to be called, with the mode wanted, when the lock
// blocks another request: the holder may then convert down or unlock. Calls
// for one lock come in order, on a goroutine of the implementation's; fn may
// call the lock API but should not block for long.
func OnBlocking(fn func(want modes.Mode)) Option {
	return func(o *Options) { o.OnBlocking = fn }
}

// WithTTL gives the lock a time to live of its own: its master releases it
// unless it is renewed within ttl, and its Lost channel closes on the
// holder's clock before that.
func WithTTL(ttl time.Duration) Option { return func(o *Options) { o.TTL = ttl } }

// QueueConvert (VMS's QUECVT) makes an up-conversion wait behind the
// conversions already queued instead of being granted in place ahead of
// them.
func QueueConvert() Option { return func(o *Options) { o.QueueConvert = true } }

// DemoteOnDeadlock (Linux's CONVDEADLK) resolves a conversion deadlock by
// demoting this lock to NL instead of failing the conversion.
func DemoteOnDeadlock() Option { return func(o *Options) { o.DemoteOnDeadlock = true } }

// Expedite grants a new NL lock at once, ahead of any queue.
func Expedite() Option { return func(o *Options) { o.Expedite = true } }

// Cached asks for a PR lock as a hold on a shared-lock cache (dlm.Cache)
// where the implementation keeps one: a client's agent serves it from the
// one PR lock it keeps per resource for all its clients, which costs no
// message to the resource's master while the lock is cached. A hold has no
// value to write, no conversion and no owner. An embedded lockspace has no
// implicit cache and takes a plain lock (use dlm.Cache directly).
func Cached() Option { return func(o *Options) { o.Cached = true } }

// FailFast makes an Acquire (or a semaphore's Acquire) fail at once with
// ErrNoQuorum while the node that would take the lock (the embedded node,
// or the client's agent) has no quorum, instead of waiting, as long as
// its context allows, for quorum to return. On a Convert it makes a
// conversion that the lock's master refuses for want of quorum fail at
// once with ErrNoQuorum, instead of being asked again. A program that has
// something better to do than wait (serve stale reads, shed the request)
// asks for it.
func FailFast() Option { return func(o *Options) { o.FailFast = true } }
