package dlm

import (
	"context"
	"fmt"

	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/modes"
)

// Request is one lock of a LockAll: a resource, the mode to take it in,
// and the options of that lock (WithOwner, WithTTL, OnBlocking, FailFast).
type Request struct {
	Resource string
	Mode     modes.Mode
	Options  []LockOption
}

// LockAll takes every lock of reqs or none of them, as lockapi.LockAll
// does (one implementation for embedded nodes and clients): in a
// canonical order, by resource name, so that two LockAll calls whose sets
// overlap never deadlock each other, releasing what it took if a request
// fails or ctx ends. The locks come back in the order of reqs.
//
// A resource named twice is ErrInvalidArgument, as is a bad mode, name or
// option in any request: all are checked before anything is locked.
// Locks taken by other means while LockAll waits are outside its order: a
// caller that holds a lock and then calls LockAll can deadlock with one
// that does the reverse (Owners and Config.DeadlockWait find that).
func (ls *Lockspace) LockAll(ctx context.Context, reqs []Request) ([]*Lock, error) {
	api := make([]lockapi.Request, len(reqs))
	opts := make(map[string][]LockOption, len(reqs))
	for i, r := range reqs {
		if err := ls.checkResource(r.Resource); err != nil {
			return nil, fmt.Errorf("dlm: LockAll: request %d: %w", i, err)
		}
		o := buildOpts(r.Options)
		if err := o.validate(r.Mode, false); err != nil {
			return nil, fmt.Errorf("dlm: LockAll: request %d (%q): %w", i, r.Resource, err)
		}
		api[i] = lockapi.Request{Resource: r.Resource, Mode: r.Mode}
		opts[r.Resource] = r.Options
	}
	taken, err := lockapi.LockAll(ctx, lockAllSpace{ls, opts}, api)
	if err != nil {
		return nil, err
	}
	locks := make([]*Lock, len(taken))
	for i, lk := range taken {
		locks[i] = Unwrap(lk)
	}
	return locks, nil
}

// lockAllSpace is the lockspace as lockapi.LockAll sees it: each resource
// taken with its request's options of this package (which lockapi's
// cannot carry: InSession, a reentrant owner). A resource is named once
// in a LockAll, so it names its request.
type lockAllSpace struct {
	ls   *Lockspace
	opts map[string][]LockOption
}

func (s lockAllSpace) Name() string { return s.ls.name }

func (s lockAllSpace) Acquire(ctx context.Context, resource string, mode modes.Mode, _ ...lockapi.Option) (lockapi.Lock, error) {
	lk, err := s.ls.Lock(ctx, resource, mode, s.opts[resource]...)
	if err != nil {
		return nil, err
	}
	return apiLock{lk}, nil
}
