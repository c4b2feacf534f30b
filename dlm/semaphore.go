package dlm

import (
	"context"
	"fmt"
	"time"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// MaxPermits is the most permits a semaphore may have.
const MaxPermits = wire.MaxPermits

// Semaphore is a counting semaphore of a fixed number of permits, shared by
// the whole cluster: Acquire takes n of them, waiting while fewer are
// free. Get one from Lockspace.Semaphore; it is a name and a count, cheap
// to make, and safe for concurrent use.
//
// A semaphore is mastered like any resource of its lockspace, and follows
// the same rules as a lock there:
//
//   - FIFO across nodes, no barging: a request is granted at once only if
//     no request waits before it, so a request for 3 permits is never
//     overtaken by a later request for 1, and a stream of small requests
//     cannot starve a large one;
//   - every acquisition gets a fencing token (Permit.Token), strictly
//     larger than every token issued before for the semaphore: a store
//     that limits concurrent writers can refuse a holder that paused past
//     the end of its permits;
//   - the permits of a node that dies come back only after the
//     lock-delay, when its leases are sure to have run out; a node without
//     quorum reports its permits lost (Permit.Lost) before the others can
//     take them;
//   - recovery rebuilds the semaphore, its permit count included, from what
//     the survivors hold and wait for.
//
// The permit count is a property of the semaphore while anyone holds or
// waits for permits of it: an Acquire that says another count fails with
// ErrPermitsMismatch, and a name has locks or permits, not both
// (ErrWrongKind). A semaphore nobody holds or waits for is forgotten, as
// an unlocked resource is, and the next Acquire sets its count.
//
// Deadlock detection across owners sees a request for permits wait for
// the request queued ahead of it, not for the holders: no one holder's
// release is what it needs. A cycle through a semaphore's holders is not
// found; bound such waits with a context.
type Semaphore struct {
	ls      *Lockspace
	name    string
	permits uint32
}

// Semaphore returns the semaphore name of permits permits (1..MaxPermits)
// in this lockspace. It sends nothing: a count that differs from the
// semaphore's is refused when permits are acquired.
func (ls *Lockspace) Semaphore(name string, permits int) (*Semaphore, error) {
	if err := ls.checkResource(name); err != nil {
		return nil, err
	}
	if permits < 1 || permits > MaxPermits {
		return nil, fmt.Errorf("%w: a semaphore of %d permits, must be 1..%d", ErrInvalidArgument, permits, MaxPermits)
	}
	return &Semaphore{ls: ls, name: name, permits: uint32(permits)}, nil
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Permits returns the semaphore's number of permits.
func (s *Semaphore) Permits() int { return int(s.permits) }

// Acquire takes n permits (1..Permits()), waiting in FIFO order as long as
// ctx allows; a cancelled or expired ctx withdraws the request
// (ErrCancelled or ErrTimeout, matching ctx's error too). WithTTL,
// WithOwner and FailFast apply; the other options are for locks.
func (s *Semaphore) Acquire(ctx context.Context, n int, opts ...LockOption) (*Permit, error) {
	return s.acquire(ctx, n, buildOpts(opts))
}

// TryAcquire takes n permits only if it can at once: they are free and no
// request waits before it. Otherwise it fails with ErrNotQueued and leaves
// nothing behind. Like Acquire, it waits (within ctx) for this node to
// have quorum, unless FailFast is given.
func (s *Semaphore) TryAcquire(ctx context.Context, n int, opts ...LockOption) (*Permit, error) {
	o := buildOpts(opts)
	o.noQueue = true
	return s.acquire(ctx, n, o)
}

func (s *Semaphore) acquire(ctx context.Context, n int, o lockOpts) (*Permit, error) {
	if n < 1 || n > int(s.permits) {
		return nil, fmt.Errorf("%w: %d permits of a semaphore of %d", ErrInvalidArgument, n, s.permits)
	}
	if o.onBlocking != nil || o.flags != 0 {
		return nil, fmt.Errorf("%w: OnBlocking, QueueConvert, DemoteOnDeadlock and Expedite are options of locks", ErrInvalidArgument)
	}
	if o.owner != nil && o.owner.reentrant {
		return nil, fmt.Errorf("%w: a reentrant owner counts locks, not permits", ErrInvalidArgument)
	}
	if err := o.validate(modes.NL, false); err != nil {
		return nil, err
	}
	o.permits, o.count = s.permits, uint32(n)
	lk, err := s.ls.acquireRetrying(ctx, s.name, modes.NL, o)
	s.ls.node.met.countPermits(opAcquire, err)
	if err != nil {
		return nil, err
	}
	return &Permit{lk: lk}, nil
}

// Permit is n permits of a semaphore, held: the result of one Acquire. Its
// methods are safe for concurrent use.
type Permit struct {
	lk *Lock
}

// ID returns the acquisition's id on this node, unique among its locks
// and acquisitions (Session.Lock finds it by this id).
func (p *Permit) ID() uint64 { return p.lk.ID() }

// Count returns how many permits this acquisition holds.
func (p *Permit) Count() int { return int(p.lk.semCount()) }

// Semaphore returns the name of the semaphore.
func (p *Permit) Semaphore() string { return p.lk.resource }

// Token returns the acquisition's fencing token: larger than that of every
// acquisition of the semaphore before it, cluster-wide (see Lock.Token).
func (p *Permit) Token() uint64 { return p.lk.Token() }

// Release gives the permits back. A second Release fails with ErrNotHeld;
// one after the permits were lost returns why, once.
func (p *Permit) Release() error {
	err := p.lk.unlock()
	p.lk.ls.node.met.countPermits(opRelease, err)
	return err
}

// Lost returns a channel closed when the permits can no longer be trusted
// (see Lock.Lost); Err says why.
func (p *Permit) Lost() <-chan struct{} { return p.lk.Lost() }

// Err returns why the permits were lost, or nil.
func (p *Permit) Err() error { return p.lk.Err() }

// Context returns a context derived from parent that is cancelled the
// moment the permits are lost or released (see Lock.Context).
func (p *Permit) Context(parent context.Context) (context.Context, context.CancelFunc) {
	return p.lk.Context(parent)
}

// KeepAlive renews the TTL of permits acquired WithTTL until ctx ends or
// they are lost (see Lock.KeepAlive).
func (p *Permit) KeepAlive(ctx context.Context) error { return p.lk.KeepAlive(ctx) }

// onSemaphoreRequest is onLockRequest for permits.
func (n *Node) onSemaphoreRequest(from *member, m *wire.SemaphoreRequest, ls *Lockspace, h uint64) {
	n.masterRequest(from, ls, h, m.Lock, master.Request{
		Resource: m.Resource, Lock: master.LockID{Node: from.id, ID: m.Lock}, Owner: master.OwnerID(m.Owner),
		Mode: modes.NL, Flags: master.Flags(m.Flags), Timeout: ticks(time.Duration(m.Timeout)), TTL: ticks(time.Duration(m.TTL)),
		Permits: m.Permits, Count: m.Count,
	})
}

// semaphoreRequest is the message for a semaphore lock's first request.
func (lk *Lock) semaphoreRequest(flags master.Flags, timeout time.Duration) *wire.SemaphoreRequest {
	return &wire.SemaphoreRequest{
		Epoch: lk.ls.node.epoch(), Lockspace: lk.ls.name, Resource: lk.resource, Lock: lk.id,
		Owner: uint64(lk.ownerID()), Permits: lk.semPermits(), Count: lk.semCount(), Flags: uint32(flags),
		Timeout: int64(timeout), TTL: int64(lk.ttl()),
	}
}
