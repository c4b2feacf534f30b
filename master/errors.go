package master

import "errors"

// Errors returned by the table. Input errors leave the table exactly as it was.
// Outcome errors (ErrNotQueued, ErrDeadlock, ErrTimeout, ErrCancelled,
// ErrExpired) report how a request ended.
var (
	// ErrInvalidMode: a mode outside NL..EX. It wraps modes.ErrInvalidMode too.
	ErrInvalidMode = errors.New("master: invalid lock mode")
	// ErrEmptyName: a request named no resource.
	ErrEmptyName = errors.New("master: empty resource name")
	// ErrNameTooLong: a resource name longer than Config.MaxNameLen.
	ErrNameTooLong = errors.New("master: resource name too long")
	// ErrLVBTooLarge: a lock value block longer than Config.MaxLVB.
	ErrLVBTooLarge = errors.New("master: lock value block too large")
	// ErrInvalidFlags: a flag combination that makes no sense (EXPEDITE on a
	// mode other than NL, QUECVT on a new request, and the like).
	ErrInvalidFlags = errors.New("master: invalid flag combination")
	// ErrInvalidSession: a lock in a session without a TTL, or a
	// semaphore request in a session.
	ErrInvalidSession = errors.New("master: invalid session")
	// ErrLockExists: a new request reused the id of a lock the table holds.
	ErrLockExists = errors.New("master: lock id already in use")
	// ErrUnknownLock: a convert, release, cancel or renew named a lock the
	// table never had.
	ErrUnknownLock = errors.New("master: unknown lock")
	// ErrReleased: a convert, release, cancel or renew named a lock that
	// existed and is gone: a double unlock, or use after unlock.
	ErrReleased = errors.New("master: lock already released")
	// ErrNotOwner: the lock exists but belongs to another owner.
	ErrNotOwner = errors.New("master: lock belongs to another owner")
	// ErrNotGranted: a convert of a lock that is still waiting for its first
	// grant.
	ErrNotGranted = errors.New("master: lock not granted")
	// ErrConvertPending: a convert of a lock that already has a conversion
	// queued.
	ErrConvertPending = errors.New("master: conversion already pending")
	// ErrNotPending: a cancel of a lock with nothing queued.
	ErrNotPending = errors.New("master: nothing to cancel")
	// ErrIncompatible: a restored lock's granted mode conflicts with a mode
	// already granted on the resource; survivors' reports disagree.
	ErrIncompatible = errors.New("master: restored lock conflicts with granted locks")
	// ErrKind: a lock request or conversion named a semaphore, or a
	// semaphore request named a resource that has locks: a name is one or
	// the other while it has locks (as a Redis key has one type).
	ErrKind = errors.New("master: resource is of another kind")
	// ErrInvalidPermits: a semaphore request for no permits, for more than
	// the semaphore has, or for a semaphore of more than MaxPermits.
	ErrInvalidPermits = errors.New("master: invalid permit count")
	// ErrPermitsMismatch: a semaphore request or restored lock says the
	// semaphore has another number of permits than it does.
	ErrPermitsMismatch = errors.New("master: semaphore has another number of permits")
	// ErrLimit: a configured limit (locks per node, waiters per resource)
	// would be exceeded; nothing was queued.
	ErrLimit = errors.New("master: limit exceeded")

	// ErrNotQueued: a NOQUEUE request could not be granted at once.
	ErrNotQueued = errors.New("master: not granted and not queued")
	// ErrDeadlock: the request or conversion could never be granted. The
	// table returns it (wrapped, naming the conversion) for a conversion
	// deadlock on one resource; FailRequest fails a request with whatever
	// error a deadlock detector found across resources, which should wrap
	// it too. A failed conversion keeps its granted mode.
	ErrDeadlock = errors.New("master: deadlock")
	// ErrTimeout: a queued request or conversion waited past its timeout.
	ErrTimeout = errors.New("master: request timed out")
	// ErrCancelled: a queued request or conversion was cancelled, or its lock
	// was released while it waited.
	ErrCancelled = errors.New("master: request cancelled")
	// ErrExpired: a granted lock was not renewed within its TTL and was
	// released by the table.
	ErrExpired = errors.New("master: lock TTL expired")
	// ErrPurged: the lock belonged to a node that was purged.
	ErrPurged = errors.New("master: lock purged with its node")
)
