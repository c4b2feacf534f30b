package dlm

import (
	"context"
	"fmt"

	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/modes"
)

// The lockspace as a lockapi.Lockspace, the interface a lockspace of the
// client package satisfies too.
var _ lockapi.Lockspace = (*Lockspace)(nil)

// Acquire is Lock (or, with lockapi.Try, TryLock) for code written against
// lockapi.Lockspace; the lock it returns is a *Lock behind lockapi.Lock.
func (ls *Lockspace) Acquire(ctx context.Context, resource string, mode modes.Mode, opts ...lockapi.Option) (lockapi.Lock, error) {
	o, try, err := ls.fromAPI(opts)
	if err != nil {
		return nil, err
	}
	var lk *Lock
	if try {
		lk, err = ls.TryLock(ctx, resource, mode, o...)
	} else {
		lk, err = ls.Lock(ctx, resource, mode, o...)
	}
	if err != nil {
		return nil, err
	}
	return apiLock{lk}, nil
}

// fromAPI turns lockapi options into this package's.
func (ls *Lockspace) fromAPI(opts []lockapi.Option) ([]LockOption, bool, error) {
	if len(opts) == 0 {
		return nil, false, nil
	}
	a := lockapi.Apply(opts)
	var o []LockOption
	if a.Owner != nil {
		own, ok := a.Owner.(*Owner)
		if !ok {
			return nil, false, fmt.Errorf("%w: owner %T is not a dlm owner", ErrInvalidArgument, a.Owner)
		}
		o = append(o, WithOwner(own))
	}
	if a.OnBlocking != nil {
		o = append(o, OnBlocking(a.OnBlocking))
	}
	if a.TTL != 0 {
		o = append(o, WithTTL(a.TTL))
	}
	if a.QueueConvert {
		o = append(o, QueueConvert())
	}
	if a.DemoteOnDeadlock {
		o = append(o, DemoteOnDeadlock())
	}
	if a.Expedite {
		o = append(o, Expedite())
	}
	if a.FailFast {
		o = append(o, FailFast())
	}
	return o, a.Try, nil
}

// apiLock is a *Lock whose Convert takes lockapi options.
type apiLock struct{ *Lock }

// Convert is Lock.Convert (or, with lockapi.Try, TryConvert).
func (l apiLock) Convert(ctx context.Context, mode modes.Mode, opts ...lockapi.Option) error {
	o, try, err := l.ls.fromAPI(opts)
	if err != nil {
		return err
	}
	if try {
		return l.Lock.TryConvert(ctx, mode, o...)
	}
	return l.Lock.Convert(ctx, mode, o...)
}

// Unwrap returns the *Lock behind a lock that Acquire returned, or nil.
func Unwrap(lk lockapi.Lock) *Lock {
	if a, ok := lk.(apiLock); ok {
		return a.Lock
	}
	return nil
}
