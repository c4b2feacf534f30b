package dlm

import (
	"context"
	"fmt"
	"sync"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
)

// Owner groups the locks of one transaction or process. Deadlock detection
// follows owners: a cycle of owners each waiting for a lock another holds
// (or for a request another queued ahead) is a deadlock even across
// resources and nodes, and once its requests have waited
// Config.DeadlockWait, one of them fails with ErrDeadlock (see "Deadlocks"
// in the package documentation). Detection assumes an owner that waits
// for a lock changes none of its other locks meanwhile, as a transaction
// does. A lock taken without an owner is its own owner.
//
// A reentrant owner (Reentrant) counts a second acquisition of a resource
// it already holds in a mode at least as strong, instead of queueing a
// second lock behind the first (which would deadlock with itself); each
// acquisition needs its Unlock, and the lock is released with the last.
type Owner struct {
	ls        *Lockspace
	id        master.OwnerID
	reentrant bool

	// mu serialises a reentrant owner's acquisitions, so two of its
	// goroutines cannot both miss the count and queue two locks.
	mu   sync.Mutex
	held map[string]*Lock
}

// An OwnerOption configures an Owner.
type OwnerOption func(*Owner)

// Reentrant makes the owner reentrant.
func Reentrant() OwnerOption { return func(o *Owner) { o.reentrant = true } }

// NewOwner creates an owner whose id is unique in the cluster: this node's
// id in the high 32 bits, a counter in the low.
func (ls *Lockspace) NewOwner(opts ...OwnerOption) *Owner {
	n := ls.node
	o := &Owner{ls: ls, id: master.OwnerID(uint64(n.self.id)<<32 | uint64(n.nextOwnerID.Add(1)))}
	for _, f := range opts {
		f(o)
	}
	if o.reentrant {
		o.held = map[string]*Lock{}
	}
	return o
}

// ID returns the owner's cluster-wide id.
func (o *Owner) ID() uint64 { return uint64(o.id) }

// Lock takes a lock on behalf of the owner (Lockspace.Lock with WithOwner).
func (o *Owner) Lock(ctx context.Context, resource string, mode modes.Mode, opts ...LockOption) (*Lock, error) {
	return o.ls.Lock(ctx, resource, mode, append(opts, WithOwner(o))...)
}

// TryLock is Lockspace.TryLock on behalf of the owner.
func (o *Owner) TryLock(ctx context.Context, resource string, mode modes.Mode, opts ...LockOption) (*Lock, error) {
	return o.ls.TryLock(ctx, resource, mode, append(opts, WithOwner(o))...)
}

// covers reports whether holding held gives everything want would.
func covers(held, want modes.Mode) bool { return held == want || modes.Stronger(held, want) }

// acquire is Lock for a reentrant owner.
func (o *Owner) acquire(ctx context.Context, ls *Lockspace, resource string, mode modes.Mode, opts lockOpts) (*Lock, error) {
	if ls != o.ls {
		return nil, fmt.Errorf("%w: owner belongs to lockspace %q", ErrInvalidArgument, o.ls.name)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if lk := o.held[resource]; lk != nil {
		lk.sh.mu.Lock()
		defer lk.sh.mu.Unlock()
		if !covers(lk.mode, mode) {
			return nil, fmt.Errorf("%w: holds %q in %v, asked for %v", ErrReentrantMode, resource, lk.mode, mode)
		}
		lk.refs++
		return lk, nil
	}
	lk, err := ls.acquireRetrying(ctx, resource, mode, opts)
	ls.node.met.count(opLock, mode, err)
	if err != nil {
		return nil, err
	}
	lk.refs = 1
	o.held[resource] = lk
	return lk, nil
}

// release is Unlock for a reentrant owner's lock.
func (o *Owner) release(lk *Lock) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	lk.sh.mu.Lock()
	if lk.refs > 1 {
		lk.refs--
		lk.sh.mu.Unlock()
		return nil
	}
	lk.refs = 0
	lk.sh.mu.Unlock()
	if o.held[lk.resource] == lk {
		delete(o.held, lk.resource)
	}
	err := lk.unlock()
	o.ls.node.met.count(opUnlock, lk.Mode(), err)
	return err
}

// Held returns how many times a reentrant owner holds resource (0 if not).
func (o *Owner) Held(resource string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	lk := o.held[resource]
	if lk == nil {
		return 0
	}
	lk.sh.mu.Lock()
	defer lk.sh.mu.Unlock()
	return lk.refs
}
