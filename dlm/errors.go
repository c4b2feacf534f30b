package dlm

import (
	"errors"
	"fmt"
	"strings"

	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/master"
)

// Errors. Check them with errors.Is: most are wrapped with detail. They are
// lockapi's, which the client package returns too.
var (
	// ErrNotQueued: a TryLock (or a try-convert) could not be granted at
	// once, and was not queued.
	ErrNotQueued = lockapi.ErrNotQueued
	// ErrDeadlock: the request would never be granted: a conversion
	// deadlock on one resource (refused at once), or a cycle of owners
	// waiting for each other across resources and nodes (found after
	// Config.DeadlockWait; this request was chosen to break it). The error
	// says which. The lock, if any, keeps the mode it had, and the owner's
	// other locks stay granted. See "Deadlocks" in the package
	// documentation.
	ErrDeadlock = lockapi.ErrDeadlock
	// ErrLockLost: the lock can no longer be trusted: its TTL ran out, its
	// node lost contact with the cluster, or its master forgot it. Whatever
	// it protected may now be held by someone else; fencing tokens tell.
	ErrLockLost = lockapi.ErrLockLost
	// ErrNoQuorum: this node cannot reach a majority of the cluster, so it
	// grants nothing and reports held locks lost. A new request waits for
	// quorum to return; it gets ErrNoQuorum with FailFast, or together with
	// ErrTimeout or ErrCancelled when its context ends first.
	ErrNoQuorum = lockapi.ErrNoQuorum
	// ErrClosed: the node, or the lock, has been closed or released.
	ErrClosed = lockapi.ErrClosed
	// ErrNotHeld: an operation on a lock that was already unlocked (a double
	// unlock) or never granted.
	ErrNotHeld = lockapi.ErrNotHeld
	// ErrBusy: another operation on the same lock is still in progress.
	ErrBusy = lockapi.ErrBusy
	// ErrInvalidMode: a mode outside NL..EX. It wraps modes.ErrInvalidMode.
	ErrInvalidMode = lockapi.ErrInvalidMode
	// ErrInvalidName: an empty resource or lockspace name, or one longer
	// than its limit (LockspaceConfig.MaxNameLen for resources).
	ErrInvalidName = lockapi.ErrInvalidName
	// ErrInvalidArgument: an option or argument that makes no sense (a
	// negative TTL, Expedite on a mode other than NL or with TryLock, ...).
	ErrInvalidArgument = lockapi.ErrInvalidArgument
	// ErrLimit: a configured limit would be exceeded: locks per node,
	// locks per node in a lockspace, waiters per resource, value block
	// size. Nothing was queued. (A name over its limit is ErrInvalidName.)
	ErrLimit = lockapi.ErrLimit
	// ErrUnavailable: the resource's master cannot be reached right now.
	ErrUnavailable = lockapi.ErrUnavailable
	// ErrReentrantMode: a reentrant owner asked again for a resource it
	// already holds in a weaker mode; convert the lock instead.
	ErrReentrantMode = lockapi.ErrReentrantMode
	// ErrTimeout: a request waited past its deadline. It also matches
	// context.DeadlineExceeded when the deadline came from the context.
	ErrTimeout = lockapi.ErrTimeout
	// ErrCancelled: the request was cancelled. It also matches
	// context.Canceled when the context was cancelled.
	ErrCancelled = lockapi.ErrCancelled
	// ErrWrongKind: a lock was asked for on a resource that is a semaphore
	// (permits are held on it), or permits on a resource that has locks: a
	// name is one or the other while it is in use.
	ErrWrongKind = lockapi.ErrWrongKind
	// ErrPermitsMismatch: permits were asked for with another number of
	// permits than the semaphore has while it is in use.
	ErrPermitsMismatch = lockapi.ErrPermitsMismatch
)

// fromMaster turns an error of the lock table into the public error.
func fromMaster(err error) error {
	if err == nil {
		return nil
	}
	var pub error
	switch {
	case errors.Is(err, master.ErrNotQueued):
		pub = ErrNotQueued
	case errors.Is(err, master.ErrDeadlock):
		pub = ErrDeadlock
	case errors.Is(err, master.ErrTimeout):
		pub = ErrTimeout
	case errors.Is(err, master.ErrCancelled):
		pub = ErrCancelled
	case errors.Is(err, master.ErrExpired), errors.Is(err, master.ErrPurged):
		pub = ErrLockLost
	case errors.Is(err, master.ErrLimit), errors.Is(err, master.ErrLVBTooLarge):
		pub = ErrLimit
	case errors.Is(err, master.ErrInvalidMode):
		pub = ErrInvalidMode
	case errors.Is(err, master.ErrEmptyName), errors.Is(err, master.ErrNameTooLong):
		pub = ErrInvalidName
	case errors.Is(err, master.ErrInvalidFlags):
		pub = ErrInvalidArgument
	case errors.Is(err, master.ErrReleased), errors.Is(err, master.ErrUnknownLock),
		errors.Is(err, master.ErrNotGranted):
		pub = ErrNotHeld
	case errors.Is(err, master.ErrConvertPending):
		pub = ErrBusy
	case errors.Is(err, master.ErrKind):
		pub = ErrWrongKind
	case errors.Is(err, master.ErrPermitsMismatch):
		pub = ErrPermitsMismatch
	case errors.Is(err, master.ErrInvalidPermits):
		pub = ErrInvalidArgument
	default:
		return fmt.Errorf("dlm: %w", err)
	}
	if pub.Error() == err.Error() {
		return pub
	}
	return fmt.Errorf("%w (%v)", pub, err)
}

// masterSentinels are the table errors a master sends back by name in a
// Completion, so the requester can rebuild the sentinel.
var masterSentinels = []error{
	master.ErrNotQueued, master.ErrDeadlock, master.ErrTimeout, master.ErrCancelled,
	master.ErrExpired, master.ErrPurged, master.ErrLimit, master.ErrLVBTooLarge,
	master.ErrInvalidMode, master.ErrEmptyName, master.ErrNameTooLong,
	master.ErrInvalidFlags, master.ErrReleased, master.ErrUnknownLock,
	master.ErrNotGranted, master.ErrConvertPending, master.ErrLockExists,
	master.ErrNotOwner, master.ErrIncompatible,
	master.ErrKind, master.ErrPermitsMismatch, master.ErrInvalidPermits,
}

// remoteError rebuilds the public error from the text a master sent.
func remoteError(text string) error {
	if strings.HasPrefix(text, ErrNoQuorum.Error()) {
		return fmt.Errorf("%w (at the master)", ErrNoQuorum)
	}
	for _, s := range masterSentinels {
		if len(text) >= len(s.Error()) && text[:len(s.Error())] == s.Error() {
			return fromMaster(fmt.Errorf("%w%s", s, text[len(s.Error()):]))
		}
	}
	return fmt.Errorf("dlm: master refused: %s", text)
}
