package dlm

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/seed-a6839e30/dlm/modes"
)

// Request is one lock of a LockAll: a resource, the mode to take it in,
// and the options of that lock (WithOwner, WithTTL, OnBlocking, FailFast).
type Request struct {
	Resource string
	Mode     modes.Mode
	Options  []LockOption
}

// LockAll takes every lock of reqs or none of them. It takes them one by
// one in a canonical order, by resource name (bytewise), whatever the order
// of reqs, so two LockAll calls (on any nodes) whose sets overlap can never
// deadlock each other: neither can wait for a lock the other holds while
// holding one the other waits for. If a request fails or ctx ends, it
// unlocks what it took, in reverse order, and returns the error, naming
// the resource. The locks come back in the order of reqs.
//
// A resource named twice is ErrInvalidArgument, as is a bad mode, name or
// option in any request: all are checked before anything is locked.
// Locks taken by other means while LockAll waits are outside its order: a
// caller that holds a lock and then calls LockAll can deadlock with one
// that does the reverse (Owners and Config.DeadlockWait find that).
func (ls *Lockspace) LockAll(ctx context.Context, reqs []Request) ([]*Lock, error) {
	order, err := ls.lockAllOrder(reqs)
	if err != nil {
		return nil, err
	}
	locks := make([]*Lock, len(reqs))
	for n, i := range order {
		r := reqs[i]
		lk, err := ls.Lock(ctx, r.Resource, r.Mode, r.Options...)
		if err != nil {
			for _, j := range slices.Backward(order[:n]) {
				_ = locks[j].Unlock() // lost or not, it is released
			}
			return nil, fmt.Errorf("dlm: LockAll: %q in %v: %w", r.Resource, r.Mode, err)
		}
		locks[i] = lk
	}
	return locks, nil
}

// lockAllOrder checks the requests and returns their indexes in the order
// to take them.
func (ls *Lockspace) lockAllOrder(reqs []Request) ([]int, error) {
	order := make([]int, len(reqs))
	for i, r := range reqs {
		if err := ls.checkResource(r.Resource); err != nil {
			return nil, fmt.Errorf("dlm: LockAll: request %d: %w", i, err)
		}
		o := buildOpts(r.Options)
		if err := o.validate(r.Mode, false); err != nil {
			return nil, fmt.Errorf("dlm: LockAll: request %d (%q): %w", i, r.Resource, err)
		}
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(reqs[a].Resource, reqs[b].Resource) })
	for k := 1; k < len(order); k++ {
		if reqs[order[k]].Resource == reqs[order[k-1]].Resource {
			return nil, fmt.Errorf("%w: LockAll names %q twice", ErrInvalidArgument, reqs[order[k]].Resource)
		}
	}
	return order, nil
}
