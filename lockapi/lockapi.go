package lockapi

import (
	"context"

	"github.com/seed-a6839e30/dlm/modes"
)

// Lockspace is a namespace of resources to lock. Implementations are safe
// for concurrent use.
type Lockspace interface {
	// Name returns the lockspace's name.
	Name() string
	// Acquire takes a lock on resource in mode, waiting as long as ctx
	// allows (with Try, not at all: ErrNotQueued). A cancelled or expired
	// ctx withdraws the request (ErrCancelled or ErrTimeout, which also
	// match the context's error).
	Acquire(ctx context.Context, resource string, mode modes.Mode, opts ...Option) (Lock, error)
}

// Lock is a granted lock. Its methods are safe for concurrent use; one
// operation (Convert, Unlock) runs at a time, another meanwhile failing
// with ErrBusy.
type Lock interface {
	// Resource returns the locked resource's name.
	Resource() string
	// Mode returns the granted mode.
	Mode() modes.Mode
	// Token returns the fencing token of the latest grant or
	// up-conversion: it strictly increases for every grant of the
	// resource, cluster-wide. Send it with every write to what the lock
	// protects, and have the store refuse tokens below the highest it has
	// seen.
	Token() uint64
	// Convert changes the mode: down never waits; up waits as long as ctx
	// allows (with Try, not at all). A conversion deadlock fails with
	// ErrDeadlock, the lock keeping its mode, unless DemoteOnDeadlock.
	Convert(ctx context.Context, mode modes.Mode, opts ...Option) error
	// Unlock releases the lock, writing back the value set by SetValue if
	// the lock is held in PW or EX. A second Unlock fails with ErrNotHeld;
	// the first Unlock of a lost lock returns why it was lost.
	Unlock() error
	// Value returns the lock value block as of the latest grant or
	// up-conversion above NL, and whether it is valid (false: a holder
	// that could have been writing it was lost).
	Value() ([]byte, bool)
	// SetValue sets the value block written back when the lock, held in
	// PW or EX, next converts down or is unlocked. Too long is ErrLimit.
	SetValue(v []byte) error
	// Lost returns a channel closed when the lock can no longer be
	// trusted; Err says why.
	Lost() <-chan struct{}
	// Err returns why the lock was lost, or nil.
	Err() error
	// Context returns a context derived from parent, cancelled the
	// moment the lock is lost (Lost closes) or unlocked; context.Cause
	// says why (Err, or ErrNotHeld after an Unlock). Run the work the lock
	// protects under it, so that a lost lock interrupts the work; the
	// fencing token, not the context, is what keeps a paused holder's late
	// write out. Call the CancelFunc when the work is done.
	Context(parent context.Context) (context.Context, context.CancelFunc)
}

// Owner groups the locks of one transaction or process for deadlock
// detection. Each implementation makes its own (dlm's Lockspace.NewOwner,
// client's Lockspace.NewOwner) and accepts only those.
type Owner interface {
	// ID returns the owner's id.
	ID() uint64
}
