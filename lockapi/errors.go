package lockapi

import (
	"errors"
	"fmt"

	"github.com/seed-a6839e30/dlm/modes"
)

// Errors of every implementation: dlm's and client's sentinels are these
// values. Check them with errors.Is; most come wrapped with detail. dlm's
// documentation of each says when it happens.
var (
	ErrNotQueued       = errors.New("dlm: lock not available")
	ErrDeadlock        = errors.New("dlm: deadlock")
	ErrLockLost        = errors.New("dlm: lock lost")
	ErrNoQuorum        = errors.New("dlm: no quorum")
	ErrClosed          = errors.New("dlm: closed")
	ErrNotHeld         = errors.New("dlm: lock not held")
	ErrBusy            = errors.New("dlm: lock busy with another operation")
	ErrInvalidMode     = fmt.Errorf("dlm: %w", modes.ErrInvalidMode)
	ErrInvalidName     = errors.New("dlm: invalid name")
	ErrInvalidArgument = errors.New("dlm: invalid argument")
	ErrLimit           = errors.New("dlm: limit exceeded")
	ErrUnavailable     = errors.New("dlm: master unavailable")
	ErrReentrantMode   = errors.New("dlm: owner holds the resource in a weaker mode")
	ErrTimeout         = errors.New("dlm: timed out")
	ErrCancelled       = errors.New("dlm: cancelled")
	// ErrWrongKind: locks were asked for on a semaphore's name, or
	// permits on a name that has locks (a name is one or the other while
	// it is in use).
	ErrWrongKind = errors.New("dlm: resource is of another kind")
	// ErrPermitsMismatch: permits were asked for with another number of
	// permits than the semaphore has while it is in use.
	ErrPermitsMismatch = errors.New("dlm: semaphore has another number of permits")
	// ErrNoLeader: nobody holds the election.
	ErrNoLeader = errors.New("dlm: no leader")
)
