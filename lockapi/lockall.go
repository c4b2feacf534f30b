package lockapi

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/seed-a6839e30/dlm/modes"
)

// Request is one lock of a LockAll: a resource, the mode to take it in,
// and the options of that lock.
type Request struct {
	Resource string
	Mode     modes.Mode
	Options  []Option
}

// LockAll takes every lock of reqs in ls, or none of them. It takes them
// one by one in a canonical order, by resource name (bytewise), whatever
// the order of reqs, so two LockAll calls (on any nodes or clients) whose
// sets overlap can never deadlock each other: neither can wait for a lock
// the other holds while holding one the other waits for. If a request
// fails or ctx ends, it unlocks what it took, in reverse order, and
// returns the error, naming the resource. The locks come back in the
// order of reqs.
//
// A resource named twice, an empty name or a bad mode is refused before
// anything is locked (ErrInvalidArgument, ErrInvalidName,
// ErrInvalidMode); other bad options are the lockspace's to refuse, when
// their lock's turn comes. Locks taken by other means while LockAll
// waits are outside its order: a caller that holds a lock and then calls
// LockAll can deadlock with one that does the reverse (owners and the
// implementation's deadlock detection find that).
func LockAll(ctx context.Context, ls Lockspace, reqs []Request) ([]Lock, error) {
	order, err := lockAllOrder(reqs)
	if err != nil {
		return nil, err
	}
	locks := make([]Lock, len(reqs))
	for n, i := range order {
		r := reqs[i]
		lk, err := ls.Acquire(ctx, r.Resource, r.Mode, r.Options...)
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
func lockAllOrder(reqs []Request) ([]int, error) {
	order := make([]int, len(reqs))
	for i, r := range reqs {
		switch {
		case r.Resource == "":
			return nil, fmt.Errorf("dlm: LockAll: request %d: %w: empty resource name", i, ErrInvalidName)
		case !r.Mode.Valid():
			return nil, fmt.Errorf("dlm: LockAll: request %d (%q): %w: %d", i, r.Resource, ErrInvalidMode, uint8(r.Mode))
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
