package client

import (
	"context"
	"fmt"
	"time"

	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Semaphore is a counting semaphore of a fixed number of permits, shared
// by the whole cluster, reached through the client's agent: the same
// semaphore as an embedded node's Lockspace.Semaphore of that name, with
// its rules (FIFO across nodes and clients, no barging; a fencing token
// for every acquisition; a mismatched permit count is ErrPermitsMismatch,
// a name that has locks ErrWrongKind). Permits are held in the client's
// session: a client that dies loses them when its session expires, its
// TTL after its last keep-alive, and not before. Get one from
// Lockspace.Semaphore; it is a name and a count, cheap to make, and safe
// for concurrent use.
type Semaphore struct {
	ls      *Lockspace
	name    string
	permits uint32
}

// Semaphore returns the semaphore name of permits permits
// (1..wire.MaxPermits) in this lockspace. It sends nothing: a count that
// differs from the semaphore's is refused when permits are acquired.
func (ls *Lockspace) Semaphore(name string, permits int) (*Semaphore, error) {
	if err := ls.check(name, 0); err != nil {
		return nil, err
	}
	if permits < 1 || permits > wire.MaxPermits {
		return nil, fmt.Errorf("%w: a semaphore of %d permits, must be 1..%d", lockapi.ErrInvalidArgument, permits, wire.MaxPermits)
	}
	return &Semaphore{ls: ls, name: name, permits: uint32(permits)}, nil
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Permits returns the semaphore's number of permits.
func (s *Semaphore) Permits() int { return int(s.permits) }

// Acquire takes n permits (1..Permits()), waiting in FIFO order as long
// as ctx allows; a cancelled or expired ctx withdraws the request
// (ErrCancelled or ErrTimeout, matching ctx's error too). While the agent
// has no quorum it waits for quorum to return, unless lockapi.FailFast is
// given. lockapi.WithTTL and lockapi.WithOwner apply too; the other
// options are for locks.
func (s *Semaphore) Acquire(ctx context.Context, n int, opts ...lockapi.Option) (*Permit, error) {
	return s.acquire(ctx, n, lockapi.Apply(opts))
}

// TryAcquire takes n permits only if it can at once: they are free and no
// request waits before them. Otherwise it fails with ErrNotQueued and
// leaves nothing behind.
func (s *Semaphore) TryAcquire(ctx context.Context, n int, opts ...lockapi.Option) (*Permit, error) {
	o := lockapi.Apply(opts)
	o.Try = true
	return s.acquire(ctx, n, o)
}

func (s *Semaphore) acquire(ctx context.Context, n int, o lockapi.Options) (*Permit, error) {
	switch {
	case n < 1 || n > int(s.permits):
		return nil, fmt.Errorf("%w: %d permits of a semaphore of %d", lockapi.ErrInvalidArgument, n, s.permits)
	case o.TTL < 0:
		return nil, fmt.Errorf("%w: negative TTL %v", lockapi.ErrInvalidArgument, o.TTL)
	case o.OnBlocking != nil || o.QueueConvert || o.DemoteOnDeadlock || o.Expedite || o.Cached:
		return nil, fmt.Errorf("%w: OnBlocking, QueueConvert, DemoteOnDeadlock, Expedite and Cached are options of locks", lockapi.ErrInvalidArgument)
	}
	ls := s.ls
	m := &wire.ClientAcquire{Lockspace: ls.name, Semaphore: s.name, Permits: s.permits, Count: uint32(n),
		TTL: int64(o.TTL), Timeout: timeoutOf(ctx)}
	var err error
	if m.Owner, err = ls.ownerOf(o.Owner); err != nil {
		return nil, err
	}
	if o.Try {
		m.Flags |= wire.ClientTry
	}
	if o.FailFast {
		m.Flags |= wire.ClientFailFast
	}
	lk := &Lock{ls: ls, resource: s.name, ttl: o.TTL, permits: n}
	sent := time.Now()
	if err := ls.c.doNew(ctx, m, lk); err != nil {
		return nil, waitError(ctx, err)
	}
	if lk.ttl > 0 {
		lk.extendLease(sent)
	}
	return &Permit{lk: lk}, nil
}

// Permit is n permits of a semaphore, held: the result of one Acquire. Its
// methods are safe for concurrent use.
type Permit struct {
	lk *Lock
}

// Count returns how many permits this acquisition holds.
func (p *Permit) Count() int { return p.lk.permits }

// Semaphore returns the name of the semaphore.
func (p *Permit) Semaphore() string { return p.lk.resource }

// Token returns the acquisition's fencing token: larger than that of
// every acquisition of the semaphore before it, cluster-wide.
func (p *Permit) Token() uint64 { return p.lk.Token() }

// Release gives the permits back (without waiting for the agent's
// answer, as Lock.Unlock). A second Release fails with ErrNotHeld; the
// first one after the permits were lost returns why.
func (p *Permit) Release() error { return p.lk.Unlock() }

// Lost returns a channel closed when the permits can no longer be
// trusted (as Lock.Lost); Err says why.
func (p *Permit) Lost() <-chan struct{} { return p.lk.Lost() }

// Err returns why the permits were lost, or nil.
func (p *Permit) Err() error { return p.lk.Err() }

// Context returns a context derived from parent that is cancelled the
// moment the permits are lost or released (see Lock.Context).
func (p *Permit) Context(parent context.Context) (context.Context, context.CancelFunc) {
	return p.lk.Context(parent)
}

// Renew renews the TTL of permits acquired with lockapi.WithTTL (see
// Lock.Renew).
func (p *Permit) Renew(ctx context.Context) error { return p.lk.Renew(ctx) }
