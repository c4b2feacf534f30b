package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Lockspace is a lockspace reached through the client's agent. It
// satisfies lockapi.Lockspace.
type Lockspace struct {
	c    *Client
	name string
}

var _ lockapi.Lockspace = (*Lockspace)(nil)

// Name returns the lockspace's name.
func (ls *Lockspace) Name() string { return ls.name }

// Lock acquires a lock on resource in mode, waiting as long as ctx allows.
// A cancelled or expired ctx withdraws the request (ErrCancelled or
// ErrTimeout, matching ctx's error too). Options are lockapi's.
func (ls *Lockspace) Lock(ctx context.Context, resource string, mode modes.Mode, opts ...lockapi.Option) (*Lock, error) {
	return ls.lock(ctx, resource, mode, lockapi.Apply(opts))
}

// TryLock acquires the lock only if it can be granted at once; otherwise
// it fails with ErrNotQueued and leaves nothing behind.
func (ls *Lockspace) TryLock(ctx context.Context, resource string, mode modes.Mode, opts ...lockapi.Option) (*Lock, error) {
	o := lockapi.Apply(opts)
	o.Try = true
	return ls.lock(ctx, resource, mode, o)
}

// Acquire is Lock (TryLock with lockapi.Try) behind lockapi.Lockspace.
func (ls *Lockspace) Acquire(ctx context.Context, resource string, mode modes.Mode, opts ...lockapi.Option) (lockapi.Lock, error) {
	lk, err := ls.lock(ctx, resource, mode, lockapi.Apply(opts))
	if err != nil {
		return nil, err
	}
	return lk, nil
}

func (ls *Lockspace) check(resource string, mode modes.Mode) error {
	switch {
	case ls.name == "" || len(ls.name) > wire.MaxLockspace:
		return fmt.Errorf("%w: lockspace name must be 1..%d bytes", lockapi.ErrInvalidName, wire.MaxLockspace)
	case resource == "" || len(resource) > wire.DefaultLimits().MaxName:
		return fmt.Errorf("%w: resource name of %d bytes, must be 1..%d", lockapi.ErrInvalidName, len(resource), wire.DefaultLimits().MaxName)
	case !mode.Valid():
		return fmt.Errorf("%w: %d", lockapi.ErrInvalidMode, uint8(mode))
	}
	return nil
}

func (ls *Lockspace) lock(ctx context.Context, resource string, mode modes.Mode, o lockapi.Options) (*Lock, error) {
	if err := ls.check(resource, mode); err != nil {
		return nil, err
	}
	m := &wire.ClientLock{Lockspace: ls.name, Resource: resource, Mode: mode, TTL: int64(o.TTL), Timeout: timeoutOf(ctx)}
	switch {
	case o.TTL < 0:
		return nil, fmt.Errorf("%w: negative TTL %v", lockapi.ErrInvalidArgument, o.TTL)
	case o.QueueConvert || o.DemoteOnDeadlock:
		return nil, fmt.Errorf("%w: QueueConvert and DemoteOnDeadlock are options of Convert", lockapi.ErrInvalidArgument)
	case o.Expedite && (mode != modes.NL || o.Try):
		return nil, fmt.Errorf("%w: Expedite is only for new NL locks, without TryLock", lockapi.ErrInvalidArgument)
	}
	var err error
	if m.Owner, err = ls.ownerOf(o.Owner); err != nil {
		return nil, err
	}
	if o.Try {
		m.Flags |= wire.ClientTry
	}
	if o.Expedite {
		m.Flags |= wire.ClientExpedite
	}
	if o.OnBlocking != nil {
		m.Flags |= wire.ClientNotify
	}
	if o.FailFast {
		m.Flags |= wire.ClientFailFast
	}
	if o.Cached {
		if mode != modes.PR || o.Expedite || o.OnBlocking != nil || o.Owner != nil || o.TTL != 0 {
			return nil, fmt.Errorf("%w: a cached lock is PR, without expedite, blocking notifications, owner or TTL", lockapi.ErrInvalidArgument)
		}
		m.Flags |= wire.ClientCached
	}
	lk := &Lock{ls: ls, resource: resource, onBlock: o.OnBlocking, ttl: o.TTL, cached: o.Cached}
	sent := time.Now()
	if err := ls.c.doNew(ctx, m, lk); err != nil {
		return nil, waitError(ctx, err)
	}
	if lk.ttl > 0 {
		lk.extendLease(sent)
	}
	return lk, nil
}

// errUntrustedGrant: a new lock or permits granted after the client's
// trust in its session ran out, given back (Client.answer).
var errUntrustedGrant = errors.New("granted after the client's trust in its session ran out")

// doNew sends m, a request for a new lock or new permits, for lk. A grant
// that came after the client's trust in its session ran out was given
// back: once a keep-alive restores the trust (the agent regained its
// quorum, say, while the request waited for it), the request is made
// again, as dlm makes again a request that a loss of quorum failed; it
// loses its place in the queue, which a session without trust keeps
// nowhere safely. ctx bounds it all.
func (c *Client) doNew(ctx context.Context, m wire.Message, lk *Lock) error {
	for {
		cl := c.newCall(m)
		cl.lock = lk
		err := c.do(ctx, cl)
		if !errors.Is(err, errUntrustedGrant) || ctx.Err() != nil {
			return err
		}
		if err := c.renew(ctx, 0); err != nil {
			return err
		}
	}
}

// ownerOf returns the session's id of owner o (0 for none), which must be
// one of this client's in this lockspace.
func (ls *Lockspace) ownerOf(o lockapi.Owner) (uint64, error) {
	if o == nil {
		return 0, nil
	}
	own, ok := o.(*Owner)
	if !ok || own.ls.c != ls.c || own.ls.name != ls.name {
		return 0, fmt.Errorf("%w: owner %T is not one of this client's, in lockspace %q", lockapi.ErrInvalidArgument, o, ls.name)
	}
	return own.id, nil
}

// waitError is the error of a wait that failed with err: the context's if
// it ended, and a timeout at the agent (which times a request out at the
// context's deadline too) matching context.DeadlineExceeded. The agent
// times a request out a margin before the deadline (timeoutOf), for its
// answer to arrive in time: that answer waits out the rest of the margin,
// so that the caller, as an embedded node's, is answered at its deadline,
// its context done (a caller that tells "busy" from "failed" by ctx.Err
// would count it failed otherwise).
func waitError(ctx context.Context, err error) error {
	if dl, ok := ctx.Deadline(); ok && ctx.Err() == nil && errors.Is(err, lockapi.ErrTimeout) && time.Until(dl) <= answerMargin {
		// The timer is for a context whose Done never closes; a context's
		// own timer may run late on a loaded machine, and its Err says nil
		// until it has.
		t := time.NewTimer(time.Until(dl) + doneWait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	if ctx.Err() != nil {
		return ctxError(ctx.Err())
	}
	if _, ok := ctx.Deadline(); ok && errors.Is(err, lockapi.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", err, context.DeadlineExceeded)
	}
	return err
}

// timeoutOf is how long, in ns, the agent waits for a request before it
// times it out by itself: what ctx allows, less a margin for its answer to
// arrive before ctx ends. A request the client gave up on first could
// still be granted, and the grant would only be given back: under
// contention that wastes a hand-off per abandoned request. The margin is
// answerMargin, or half of what is left when less than twice that is: the
// grant's way back takes about as long as the request's way there, a
// large share of a short deadline when the agents are busy. 0 for no
// deadline.
func timeoutOf(ctx context.Context) int64 {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return int64(timeoutFor(time.Until(dl)))
}

// timeoutFor is timeoutOf for a deadline left from now.
func timeoutFor(left time.Duration) time.Duration {
	return max(left-min(answerMargin, left/2), time.Microsecond)
}

// answerMargin is how much earlier than the caller's deadline the agent is
// asked to time a request out: a round trip with room to spare.
const answerMargin = 2 * time.Millisecond

// doneWait is how long past its deadline a timeout's answer waits for the
// context to say it is done.
const doneWait = 100 * time.Millisecond

// Owner groups the locks of one transaction or process of this client for
// deadlock detection: a cycle of owners waiting for each other, across
// clients, agents and embedded nodes, fails one request with ErrDeadlock.
type Owner struct {
	ls *Lockspace
	id uint64
}

// NewOwner creates an owner of the session. (Owners are not reentrant
// here: a second lock of the same owner on a resource it holds waits
// behind the first, as for an embedded owner without Reentrant.)
func (ls *Lockspace) NewOwner() *Owner { return &Owner{ls: ls, id: ls.c.ownerID()} }

// ID returns the owner's id within the session.
func (o *Owner) ID() uint64 { return o.id }

// Mutex returns a sync.Locker for an EX lock on resource.
func (ls *Lockspace) Mutex(resource string) *lockapi.Mutex {
	return lockapi.NewMutex(ls, resource, ls.c.log)
}

// Election returns the election called name: the same election as an
// embedded node's Lockspace.Election(name).
func (ls *Lockspace) Election(name string) *lockapi.Election { return lockapi.NewElection(ls, name) }

// RWMutex returns a reader/writer lock on resource (readers in PR, a
// writer in EX, Upgrade and Downgrade in place): the same implementation
// as an embedded node's Lockspace.RWMutex, and the same lock.
func (ls *Lockspace) RWMutex(resource string) *lockapi.RWMutex {
	return lockapi.NewRWMutex(ls, resource, ls.c.log)
}

// LockAll takes every lock of reqs or none of them, in a canonical order
// so that two LockAll calls never deadlock each other (lockapi.LockAll,
// the implementation an embedded node's LockAll shares). The locks come
// back in the order of reqs. Every name and mode is checked before
// anything is locked.
func (ls *Lockspace) LockAll(ctx context.Context, reqs []lockapi.Request) ([]*Lock, error) {
	for i, r := range reqs {
		if err := ls.check(r.Resource, r.Mode); err != nil {
			return nil, fmt.Errorf("dlm: LockAll: request %d: %w", i, err)
		}
	}
	taken, err := lockapi.LockAll(ctx, ls, reqs)
	if err != nil {
		return nil, err
	}
	locks := make([]*Lock, len(taken))
	for i, lk := range taken {
		locks[i] = lk.(*Lock)
	}
	return locks, nil
}

// Resource describes a resource as its master sees it.
type Resource struct {
	// Master is the node that masters the resource.
	Master string
	// Known says whether the master has the resource: someone holds or
	// waits for it.
	Known bool
	// Value is empty: the agent tells the value block's state, not its
	// bytes (a lock reads them). ValueSeq and ValueValid are that state.
	Value      []byte
	ValueSeq   uint64
	ValueValid bool
	// Permits is a semaphore's number of permits; 0 for a resource locked
	// in modes.
	Permits int
	// Omitted counts the locks left out of Locks: more than one answer
	// carries.
	Omitted int
	// Locks are its locks in queue order: granted, converting, waiting.
	Locks []DescribedLock
}

// DescribedLock is one lock of a described resource.
type DescribedLock struct {
	// Queue is 1 for granted, 2 for converting, 3 for waiting.
	Queue     uint8
	Granted   modes.Mode // NL while waiting
	Requested modes.Mode // the mode asked for; Granted once granted
	// Node is the node that holds or asks for it: for a client's lock, the
	// client's agent.
	Node string
	// ID is its id on Node (a client's lock: the id Lock names it by there).
	ID uint64
	// Owner is its owner on Node; 0 for none.
	Owner uint64
	// Token is the fencing token of its latest grant; 0 while waiting.
	Token uint64
	// Waited is how long a converting or waiting lock has waited.
	Waited time.Duration
	// TTL is what is left of its own TTL; 0 for none.
	TTL time.Duration
	// Permits is, on a semaphore, the permits it holds or asks for.
	Permits int
}

// Describe asks the resource's master, wherever it is, through the agent,
// who holds the resource (mode, node, owner, token; permits on a
// semaphore), who converts and who waits, and for how long: each queue in
// the master's order. It waits while the master is unreachable or
// recovering, as long as ctx allows.
func (ls *Lockspace) Describe(ctx context.Context, resource string) (Resource, error) {
	if err := ls.check(resource, modes.NL); err != nil {
		return Resource{}, err
	}
	cl := ls.c.newCall(&wire.ClientDescribe{Lockspace: ls.name, Resource: resource, Timeout: timeoutOf(ctx)})
	if err := ls.c.do(ctx, cl); err != nil {
		return Resource{}, waitError(ctx, err)
	}
	r := cl.res
	out := Resource{Master: r.Master, Known: r.Known, Value: r.LVB, ValueSeq: r.LVBSeq, ValueValid: r.LVBFlags&wire.LVBValid != 0,
		Permits: int(r.Permits), Omitted: int(r.Omitted)}
	for _, dl := range r.Locks {
		out.Locks = append(out.Locks, DescribedLock{Queue: dl.Queue, Granted: dl.Granted, Requested: dl.Requested,
			Node: dl.Node, ID: dl.Lock, Owner: dl.Owner, Token: dl.Token, Waited: time.Duration(dl.Waited),
			TTL: time.Duration(dl.TTL), Permits: int(dl.Count)})
	}
	return out, nil
}

// Lock is a lock the client holds through its agent. It satisfies
// lockapi.Lock. Its methods are safe for concurrent use; one operation
// runs at a time (another meanwhile fails with ErrBusy).
type Lock struct {
	ls       *Lockspace
	resource string
	onBlock  func(modes.Mode)
	ttl      time.Duration
	cached   bool // a hold on the agent's shared-lock cache (lockapi.Cached)
	permits  int  // > 0: permits of a semaphore (Permit), not a lock in a mode

	mu       sync.Mutex
	id       uint64 // the agent's id for it, set with the grant
	mode     modes.Mode
	token    uint64
	demoted  bool
	value    []byte
	valueSeq uint64
	valueOK  bool
	busy     bool
	released bool
	lost     chan struct{}
	lostErr  error
	reported bool // Unlock returned lostErr once
	// With a TTL of its own, the lock's lease on the client's clock: it
	// ends TTL·(1−ρ)/(1+ρ) after the request or renewal last acknowledged
	// was sent (as dlm's TTL locks do), unless renewed first.
	leaseEnds time.Time
	lease     *time.Timer
	ctxs      map[*context.CancelCauseFunc]struct{} // contexts of Context, until cancelled
}

var _ lockapi.Lock = (*Lock)(nil)

// grantLocked records a grant. Caller holds Client.mu.
func (lk *Lock) grantLocked(g *wire.ClientGrant) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	lk.id, lk.mode, lk.token, lk.demoted = g.Lock, g.Mode, g.Token, lk.demoted || g.Demoted
	if g.LVBFlags&wire.LVBPresent != 0 {
		lk.value = append(lk.value[:0], g.LVB...)
		lk.valueSeq, lk.valueOK = g.LVBSeq, g.LVBFlags&wire.LVBValid != 0
	}
}

// loseLocked marks the lock lost. Caller holds Client.mu.
func (lk *Lock) loseLocked(why error) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.lostErr != nil {
		return
	}
	lk.lostErr = why
	if lk.lost == nil {
		lk.lost = make(chan struct{})
	}
	close(lk.lost)
	lk.cancelContextsLocked(why)
}

// Context returns a context derived from parent that is cancelled the
// moment the lock stops being safe to act on: when it is lost (Lost
// closes: its session ended or expired, the agent died or lost its
// quorum, the client's trust in its lease ran out, its own TTL ran out,
// the agent pushed its loss) or the client unlocks it. context.Cause says
// why: the error Err returns, or ErrNotHeld after an Unlock. Call the
// CancelFunc when the work is done.
//
// The context is an early warning, not the guard: a process paused after
// it checked the context still writes late. Send Token with every write
// and have the store refuse a token lower than the highest it accepted.
func (lk *Lock) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	lk.mu.Lock()
	defer lk.mu.Unlock()
	switch {
	case lk.lostErr != nil:
		cancel(lk.lostErr)
		return ctx, func() {}
	case lk.released:
		cancel(errUnlocked)
		return ctx, func() {}
	}
	if lk.ctxs == nil {
		lk.ctxs = map[*context.CancelCauseFunc]struct{}{}
	}
	key := &cancel
	lk.ctxs[key] = struct{}{}
	return ctx, func() {
		lk.mu.Lock()
		delete(lk.ctxs, key)
		lk.mu.Unlock()
		cancel(context.Canceled)
	}
}

// errUnlocked is the cause of a Lock.Context whose lock was unlocked.
var errUnlocked = fmt.Errorf("%w: unlocked", lockapi.ErrNotHeld)

// cancelContextsLocked cancels the lock's contexts with cause. Caller
// holds lk.mu.
func (lk *Lock) cancelContextsLocked(cause error) {
	for c := range lk.ctxs {
		(*c)(cause)
	}
	lk.ctxs = nil
}

// begin starts an operation on the lock.
func (lk *Lock) begin() error {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	switch {
	case lk.cached:
		return fmt.Errorf("%w: a cached hold is neither converted nor given a value", lockapi.ErrInvalidArgument)
	case lk.permits > 0:
		return fmt.Errorf("%w: permits are neither converted nor given a value", lockapi.ErrInvalidArgument)
	case lk.lostErr != nil:
		return lk.lostErr
	case lk.released:
		return lockapi.ErrNotHeld
	case lk.busy:
		return lockapi.ErrBusy
	}
	lk.busy = true
	return nil
}

func (lk *Lock) end() {
	lk.mu.Lock()
	lk.busy = false
	lk.mu.Unlock()
}

// Resource returns the locked resource's name.
func (lk *Lock) Resource() string { return lk.resource }

// Lockspace returns the lock's lockspace.
func (lk *Lock) Lockspace() *Lockspace { return lk.ls }

// Mode returns the granted mode.
func (lk *Lock) Mode() modes.Mode {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.mode
}

// Token returns the fencing token of the latest grant or up-conversion.
func (lk *Lock) Token() uint64 {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.token
}

// Demoted reports whether a conversion deadlock demoted the lock to NL.
func (lk *Lock) Demoted() bool {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.demoted
}

// Value returns a copy of the value block as of the latest grant or
// up-conversion, and whether it is valid.
func (lk *Lock) Value() ([]byte, bool) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return slices.Clone(lk.value), lk.valueOK
}

// ValueSeq returns the sequence number of the value Value returns.
func (lk *Lock) ValueSeq() uint64 {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.valueSeq
}

// Lost returns a channel closed when the lock can no longer be trusted.
func (lk *Lock) Lost() <-chan struct{} {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.lost == nil {
		lk.lost = make(chan struct{})
	}
	return lk.lost
}

// Err returns why the lock was lost, or nil.
func (lk *Lock) Err() error {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.lostErr
}

// Unlock releases the lock, writing back the value set by SetValue if it
// is held in PW or EX. It does not wait for the agent's answer (requests
// on the connection are handled in order, so a lock requested after it
// finds it released). A second Unlock fails with ErrNotHeld; the first
// Unlock of a lost lock returns why it was lost.
func (lk *Lock) Unlock() error {
	lk.mu.Lock()
	switch {
	case lk.busy:
		lk.mu.Unlock()
		return lockapi.ErrBusy
	case lk.released:
		err := error(lockapi.ErrNotHeld)
		if lk.lostErr != nil && !lk.reported {
			lk.reported, err = true, lk.lostErr
		}
		lk.mu.Unlock()
		return err
	}
	lk.released = true
	id, lost := lk.id, lk.lostErr
	if lost != nil {
		lk.reported = true
	}
	lk.cancelContextsLocked(errUnlocked)
	lk.mu.Unlock()
	c := lk.ls.c
	c.mu.Lock()
	if c.locks[id] == lk {
		delete(c.locks, id)
	}
	c.mu.Unlock()
	if lost != nil {
		return lost // the agent forgot it already
	}
	c.post(&wire.ClientUnlock{Lock: id})
	return nil
}

// Convert changes the lock's mode: down at once, up waiting as long as ctx
// allows (with lockapi.Try, not at all). Options are lockapi's:
// QueueConvert, DemoteOnDeadlock, Try, FailFast. A conversion that the
// lock's master refuses for want of quorum is asked again within ctx,
// unless lockapi.FailFast makes it fail at once with ErrNoQuorum.
func (lk *Lock) Convert(ctx context.Context, mode modes.Mode, opts ...lockapi.Option) error {
	o := lockapi.Apply(opts)
	if !mode.Valid() {
		return fmt.Errorf("%w: %d", lockapi.ErrInvalidMode, uint8(mode))
	}
	if o.Try && o.DemoteOnDeadlock {
		return fmt.Errorf("%w: DemoteOnDeadlock cannot be combined with Try", lockapi.ErrInvalidArgument)
	}
	if err := lk.begin(); err != nil {
		return err
	}
	defer lk.end()
	m := &wire.ClientConvert{Lock: lk.idOf(), Mode: mode, Timeout: timeoutOf(ctx)}
	if o.Try {
		m.Flags |= wire.ClientTry
	}
	if o.QueueConvert {
		m.Flags |= wire.ClientQueue
	}
	if o.DemoteOnDeadlock {
		m.Flags |= wire.ClientDemote
	}
	if o.FailFast {
		m.Flags |= wire.ClientFailFast
	}
	c := lk.ls.c
	cl := c.newCall(m)
	if err := c.do(ctx, cl); err != nil {
		if ctx.Err() != nil || errors.Is(err, lockapi.ErrTimeout) {
			return waitError(ctx, err)
		}
		if o.DemoteOnDeadlock {
			_ = lk.refresh(ctx) // a deadlock may have demoted it on the way
		}
		return err
	}
	c.mu.Lock()
	lk.grantLocked(&cl.grant)
	c.mu.Unlock()
	return nil
}

// TryConvert converts only if the conversion can be granted at once.
func (lk *Lock) TryConvert(ctx context.Context, mode modes.Mode, opts ...lockapi.Option) error {
	return lk.Convert(ctx, mode, append(opts, lockapi.Try())...)
}

// refresh reads the lock's state from the agent.
func (lk *Lock) refresh(ctx context.Context) error {
	c := lk.ls.c
	cl := c.newCall(&wire.ClientValue{Lock: lk.idOf()})
	if err := c.do(ctx, cl); err != nil {
		return err
	}
	c.mu.Lock()
	lk.grantLocked(&cl.grant)
	c.mu.Unlock()
	return nil
}

func (lk *Lock) idOf() uint64 {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.id
}

// SetValue sets the value block written back when the lock, held in PW or
// EX, next converts down or is unlocked. It waits for the agent (at most
// the session's TTL): a value longer than the lockspace allows is
// ErrLimit.
func (lk *Lock) SetValue(v []byte) error {
	if len(v) > wire.DefaultLimits().MaxLVB {
		return fmt.Errorf("%w: value of %d bytes", lockapi.ErrLimit, len(v))
	}
	return lk.setValue(&wire.ClientSetValue{Lock: lk.idOf(), LVBOp: wire.LVBWrite, LVB: slices.Clone(v)})
}

// InvalidateValue marks the value block not valid when the lock, held in
// PW or EX, next converts down or is unlocked.
func (lk *Lock) InvalidateValue() error {
	return lk.setValue(&wire.ClientSetValue{Lock: lk.idOf(), LVBOp: wire.LVBInvalidate})
}

func (lk *Lock) setValue(m *wire.ClientSetValue) error {
	if err := lk.begin(); err != nil {
		return err
	}
	defer lk.end()
	c := lk.ls.c
	ctx, cancel := context.WithTimeout(context.Background(), c.sessionTTL())
	defer cancel()
	return c.do(ctx, c.newCall(m))
}

func (c *Client) sessionTTL() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(c.ttl, time.Second)
}

// Renew renews the lock's own TTL (WithTTL) at its master. Locks without
// one live by the session, which the client keeps alive by itself.
func (lk *Lock) Renew(ctx context.Context) error {
	if lk.ttl <= 0 {
		return fmt.Errorf("%w: the lock has no TTL of its own", lockapi.ErrInvalidArgument)
	}
	if err := lk.Err(); err != nil {
		return err
	}
	sent := time.Now()
	if err := lk.ls.c.renew(ctx, lk.idOf()); err != nil {
		return err
	}
	lk.extendLease(sent)
	return nil
}

// extendLease moves the end of the lock's own lease after an acknowledged
// request or renewal sent at sent.
func (lk *Lock) extendLease(sent time.Time) {
	rho := lk.ls.c.cfg.ClockDrift
	end := sent.Add(time.Duration(float64(lk.ttl) * (1 - rho) / (1 + rho)))
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if !end.After(lk.leaseEnds) || lk.released || lk.lostErr != nil {
		return
	}
	lk.leaseEnds = end
	if lk.lease == nil {
		lk.lease = time.AfterFunc(time.Until(end), lk.leaseTimer)
	} else {
		lk.lease.Reset(time.Until(end))
	}
}

func (lk *Lock) leaseTimer() {
	c := lk.ls.c
	c.mu.Lock()
	defer c.mu.Unlock()
	lk.mu.Lock()
	if d := time.Until(lk.leaseEnds); d > 0 || lk.released {
		if d > 0 {
			lk.lease.Reset(d)
		}
		lk.mu.Unlock()
		return
	}
	id := lk.id
	lk.mu.Unlock()
	lk.loseLocked(fmt.Errorf("%w: TTL of %v ran out before a renewal", lockapi.ErrLockLost, lk.ttl))
	if c.locks[id] == lk {
		delete(c.locks, id)
		c.orphanLocked(id)
	}
}
