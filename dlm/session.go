package dlm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// A Session is a lease shared by many locks, as etcd's concurrency.Session
// and Chubby's sessions are: the program renews the session (Renew,
// KeepAlive), not each lock, and when the session ends every lock in it
// goes. Take a lock in a session with InSession.
//
// At each master, the session's locks live by one lease of the session's
// TTL: a renewal names the session, not its locks, so keeping a session
// alive costs one small message per master it has locks on (and
// lockspace), however many locks it has there. A session whose renewals
// stop expires:
//
//	holder:  the session's lease ends at  sent + TTL·(1−ρ)/(1+ρ)
//	master:  its locks are released at    received + TTL
//
// where sent is when the last acknowledged renewal left this node (or the
// session was created) and ρ is Config.ClockDrift, as for TTL locks (see
// ttl.go). When the holder's lease ends, every lock of the session is lost
// (Lost closes, Err wraps ErrLockLost) and this node releases them at once;
// a master that does not hear of it releases them TTL after the later of
// their last renewal and the latest grant of a lock of the session there.
// Either way no master re-grants a lock before its holder has
// stopped trusting it. Locks of a session that ends by Close are released
// as by Unlock, their Lost closed with ErrClosed.
//
// A lock may also have a TTL of its own (WithTTL): its master then keeps it
// by that TTL, renewed by Lock.Renew or Lock.KeepAlive, and the lock is lost
// when either its own lease or the session's ends.
//
// Sessions are safe for concurrent use.
type Session struct {
	node *Node
	id   uint64
	ttl  time.Duration

	onLost func(*Lock, error) // OnLockLost
	onEnd  func(error)        // OnSessionEnd

	mu        sync.Mutex
	locks     map[uint64]*Lock // by id
	leaseEnds time.Time
	// due is when the node's lease clock next looks at the session (its
	// lease's end as last scheduled, a renewal only moves leaseEnds
	// later), and at its place in the clock's heap, plus one; 0 once
	// ended. Guarded by the node's sessions.mu.
	due  time.Duration
	at   int32
	lost chan struct{}
	err  error // why the session ended; nil while it lives
}

// ErrSessionEnded: the session was closed or expired; it takes no new
// locks and cannot be renewed. Err says which.
var ErrSessionEnded = errors.New("dlm: session ended")

// sessions are the node's live sessions, so that they end with the node,
// and their lease clock: one timer for all of them, at the earliest lease
// end of a heap of sessions, where a timer each would cost a session more
// than all its other books. A renewal does not touch the heap: when a
// session's old end comes, the clock finds it renewed and puts it back at
// its new end.
type sessions struct {
	mu     sync.Mutex
	all    map[*Session]struct{}
	heap   []*Session // by due; Session.at is the place
	base   time.Time  // dues are durations since base (monotonic)
	timer  *time.Timer
	firing bool // timer is set, at heap[0].due
}

func (ss *sessions) add(s *Session, leaseEnds time.Time) {
	ss.mu.Lock()
	if ss.all == nil {
		ss.all = map[*Session]struct{}{}
		ss.base = time.Now()
	}
	ss.all[s] = struct{}{}
	ss.scheduleLocked(s, leaseEnds)
	ss.mu.Unlock()
}

func (ss *sessions) remove(s *Session) {
	ss.mu.Lock()
	delete(ss.all, s)
	if s.at > 0 {
		ss.removeAt(int(s.at - 1))
		ss.armLocked()
	}
	ss.mu.Unlock()
}

// schedule has the clock look at s again at end. Caller holds s.mu, with
// s alive.
func (ss *sessions) schedule(s *Session, end time.Time) {
	ss.mu.Lock()
	ss.scheduleLocked(s, end)
	ss.mu.Unlock()
}

func (ss *sessions) scheduleLocked(s *Session, end time.Time) {
	if ss.all == nil {
		return // the node closed
	}
	s.due = end.Sub(ss.base)
	if s.at > 0 {
		ss.up(ss.down(int(s.at - 1)))
	} else {
		s.at = int32(len(ss.heap) + 1)
		ss.heap = append(ss.heap, s)
		ss.up(len(ss.heap) - 1)
	}
	ss.armLocked()
}

// armLocked sets the timer for the heap's first session.
func (ss *sessions) armLocked() {
	if len(ss.heap) == 0 {
		if ss.firing {
			ss.timer.Stop()
			ss.firing = false
		}
		return
	}
	d := ss.heap[0].due - time.Since(ss.base)
	if ss.timer == nil {
		ss.timer = time.AfterFunc(d, ss.fire)
	} else {
		ss.timer.Reset(d)
	}
	ss.firing = true
}

// fire looks at every session whose due time came.
func (ss *sessions) fire() {
	ss.mu.Lock()
	now := time.Since(ss.base)
	var due []*Session
	for len(ss.heap) > 0 && ss.heap[0].due <= now {
		due = append(due, ss.heap[0])
		ss.removeAt(0)
	}
	ss.firing = false
	if len(ss.heap) > 0 {
		ss.armLocked()
	}
	ss.mu.Unlock()
	for _, s := range due {
		s.leaseTimer()
	}
}

func (ss *sessions) removeAt(i int) {
	s := ss.heap[i]
	last := len(ss.heap) - 1
	if i != last {
		ss.swap(i, last)
	}
	ss.heap[last] = nil
	ss.heap = ss.heap[:last]
	if i != last {
		ss.up(ss.down(i))
	}
	s.at = 0
}

func (ss *sessions) swap(i, j int) {
	h := ss.heap
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = int32(i+1), int32(j+1)
}

// up moves heap[i] towards the root while it is due before its parent.
func (ss *sessions) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if ss.heap[p].due <= ss.heap[i].due {
			return
		}
		ss.swap(i, p)
		i = p
	}
}

// down moves heap[i] towards the leaves while a child is due before it,
// and returns where it ends.
func (ss *sessions) down(i int) int {
	h := ss.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return i
		}
		m := l
		if r := l + 1; r < len(h) && h[r].due < h[l].due {
			m = r
		}
		if h[i].due <= h[m].due {
			return i
		}
		ss.swap(i, m)
		i = m
	}
}

// stopAll ends every session's lease timer as the node shuts down; the
// locks themselves were settled by Close or Halt.
func (ss *sessions) stopAll() {
	ss.mu.Lock()
	all := ss.all
	ss.all = nil
	for _, s := range ss.heap {
		s.at = 0
	}
	ss.heap = nil
	if ss.firing {
		ss.timer.Stop()
		ss.firing = false
	}
	ss.mu.Unlock()
	for s := range all {
		s.end(fmt.Errorf("%w: the node closed", ErrSessionEnded))
	}
}

// A SessionOption configures a session.
type SessionOption func(*Session)

// OnLockLost registers fn to be called for every lock of the session that
// is lost (Lock.Lost closes), with why. It runs on the node's callback
// goroutine, as OnBlocking callbacks do, and must not block for long.
func OnLockLost(fn func(lk *Lock, why error)) SessionOption {
	return func(s *Session) { s.onLost = fn }
}

// OnSessionEnd registers fn to be called once when the session ends
// (closed or expired), with why, on the node's callback goroutine.
func OnSessionEnd(fn func(why error)) SessionOption {
	return func(s *Session) { s.onEnd = fn }
}

// NewSession starts a session whose lease lasts ttl past its creation and
// each acknowledged renewal. Keep it alive with KeepAlive (or Renew at
// least every TTL·(1−ρ)/(1+ρ)), and Close it when done.
func (n *Node) NewSession(ttl time.Duration, opts ...SessionOption) (*Session, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("%w: session TTL must be positive, not %v", ErrInvalidArgument, ttl)
	}
	if n.closed.Load() {
		return nil, ErrClosed
	}
	s := &Session{node: n, id: randomUint64(), ttl: ttl}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	s.mu.Lock()
	s.leaseEnds = time.Now().Add(s.leaseFor())
	end := s.leaseEnds
	s.mu.Unlock()
	n.sessions.add(s, end)
	n.met.sessions.Inc()
	return s, nil
}

// InSession takes the lock in session s: it lives at its master by the
// session's TTL and is lost when the session ends. The lockspace's node
// must be the session's.
func InSession(s *Session) LockOption { return func(l *lockOpts) { l.session = s } }

// ID returns the session's id: random, unique on its node.
func (s *Session) ID() uint64 { return s.id }

// TTL returns the session's time to live.
func (s *Session) TTL() time.Duration { return s.ttl }

// Lock returns the session's lock of that id (Lock.ID), held or waited
// for, or nil.
func (s *Session) Lock(id uint64) *Lock {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.locks[id]
}

// Len returns how many locks the session holds or waits for.
func (s *Session) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.locks)
}

// LeaseEnds returns when the holder's lease of the session ends, if no
// renewal comes first; the zero time once the session has ended.
func (s *Session) LeaseEnds() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return time.Time{}
	}
	return s.leaseEnds
}

// Lost returns a channel closed when the session ends (closed or expired).
func (s *Session) Lost() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil {
		s.lost = make(chan struct{})
	}
	return s.lost
}

// Err returns why the session ended, or nil while it lives. An expired
// session's error wraps ErrLockLost and ErrSessionEnded.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *Session) leaseFor() time.Duration {
	rho := s.node.cfg.ClockDrift
	return time.Duration(float64(s.ttl) * (1 - rho) / (1 + rho))
}

// add puts a lock about to send its first request into the session.
func (s *Session) add(lk *Lock) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if s.locks == nil {
		s.locks = map[uint64]*Lock{} // on the first lock: a node may keep many idle sessions
	}
	s.locks[lk.id] = lk
	return nil
}

// remove takes a lock that this node forgot out of the session. Callers
// hold lk.sh.mu (the order is shard, then session).
func (s *Session) remove(lk *Lock) {
	s.mu.Lock()
	delete(s.locks, lk.id)
	s.mu.Unlock()
}

// masterTTL is the TTL the lock's master keeps it by: its own, or its
// session's.
func (lk *Lock) masterTTL() time.Duration {
	if lk.ttl() > 0 || lk.session == nil {
		return lk.ttl()
	}
	return lk.session.ttl
}

// masterSession is the session whose lease the lock's master keeps it by,
// 0 when it keeps the lock by a TTL of the lock's own: a lock's own TTL,
// and a semaphore's permits, are renewed by id.
func (lk *Lock) masterSession() uint64 {
	if lk.session == nil || lk.ttl() > 0 || lk.semPermits() != 0 {
		return 0
	}
	return lk.session.id
}

// Renew restarts the TTL of every lock of the session at its master (one
// message per master and lockspace, naming the session rather than its
// locks) and extends the holder's lease from
// the moment it was sent. It fails, extending nothing, if a master could
// not be reached (ErrUnavailable) or this node has no quorum; a lock a
// master no longer has was lost on its own, and its holder told.
func (s *Session) Renew(ctx context.Context) error {
	n := s.node
	if err := n.waitServing(ctx); err != nil {
		return err
	}
	sent := time.Now()
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return s.err
	}
	locks := make([]*Lock, 0, len(s.locks))
	for _, lk := range s.locks {
		if lk.ttl() <= 0 { // a lock with a TTL of its own is renewed by itself
			locks = append(locks, lk)
		}
	}
	s.mu.Unlock()
	if err := n.renewAll(ctx, s.id, locks); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if end := sent.Add(s.leaseFor()); end.After(s.leaseEnds) {
		s.leaseEnds = end // the lease clock finds it when the old end comes
	}
	return nil
}

// renewTarget is one Renew message's destination: a master and a
// lockspace.
type renewTarget struct {
	master    string
	lockspace string
}

// renewing is what one Renew message to a target carries: the session, if
// the target masters a lock kept by its lease, and the ids of the locks it
// keeps by their own.
type renewing struct {
	session bool
	ids     []uint64
}

// renewAll renews locks at their masters: the local ones in the tables,
// the others in one Renew per master and lockspace (several if they are
// more than a message carries), all at once. A lock kept by session's
// lease (masterSession) is renewed with the lease, once per table or
// target; the others by id.
func (n *Node) renewAll(ctx context.Context, session uint64, locks []*Lock) error {
	remote := map[renewTarget]*renewing{}
	local := map[*shard][]*Lock{}
	for _, lk := range locks {
		m := lk.masterName()
		if m == n.self.name {
			local[lk.sh] = append(local[lk.sh], lk)
			continue
		}
		t := renewTarget{m, lk.ls.name}
		r := remote[t]
		if r == nil {
			r = &renewing{}
			remote[t] = r
		}
		if lk.masterSession() != 0 {
			r.session = true
		} else {
			r.ids = append(r.ids, lk.id)
		}
	}
	now := n.now()
	for sh, lks := range local {
		sh.mu.Lock()
		sh.table.Tick(now)
		leased := false
		for _, lk := range lks {
			if lk.masterSession() == 0 {
				_ = sh.table.Renew(lk.key()) // unknown: released already, and said so
			} else if !leased {
				leased = true
				// None: no lock of the session was granted there since
				// its lease ended, and the locks that had been were lost.
				_ = sh.table.RenewSession(n.self.id, session)
			}
		}
		lks[0].ls.deliver(sh)
		sh.mu.Unlock()
	}
	if len(remote) == 0 {
		return nil
	}
	g, ctx := errgroup.WithContext(ctx)
	per := wire.DefaultLimits().MaxRenew // the links' limits (startLinks)
	for t, r := range remote {
		var leased uint64
		if r.session {
			leased = session
		}
		ids := r.ids
		for first := true; first || len(ids) > 0; first = false {
			batch := ids[:min(len(ids), per)]
			ids = ids[len(batch):]
			g.Go(func() error { return n.renewAt(ctx, t, leased, batch) })
		}
	}
	return g.Wait()
}

func (n *Node) renewAt(ctx context.Context, t renewTarget, session uint64, ids []uint64) error {
	reply, err := n.links.Call(ctx, t.master, &wire.Renew{Epoch: n.epoch(), Lockspace: t.lockspace, Session: session, Locks: ids})
	if err != nil {
		return fmt.Errorf("%w: renew at %s: %w", ErrUnavailable, t.master, err)
	}
	c, ok := reply.(*wire.Completion)
	switch {
	case !ok:
		return fmt.Errorf("%w: %s answered a renewal with a %v", ErrUnavailable, t.master, reply.Type())
	case c.Status == wire.StatusError:
		return remoteError(c.Err)
	}
	// StatusExpired: a lock of the batch was unknown there, released
	// meanwhile; its master told its holder, or this node forgot it.
	return nil
}

// KeepAlive renews the session every third of its TTL until ctx ends (it
// then returns nil) or the session ends (it returns why). A renewal that
// fails for a reason that may pass (a master unreachable for a moment) is
// tried again at the next tick. Run it on a goroutine of its own.
func (s *Session) KeepAlive(ctx context.Context) error {
	t := time.NewTicker(s.ttl / 3)
	defer t.Stop()
	lost := s.Lost()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-lost:
			return s.Err()
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, s.ttl/3)
			err := s.Renew(rctx)
			cancel()
			switch {
			case err == nil || ctx.Err() != nil:
			case s.Err() != nil:
				return s.Err()
			case !isTransient(err) && !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrCancelled):
				return err
			}
		}
	}
}

// Close ends the session: its locks are released (values written back as
// by Unlock), its waiting requests fail with ErrClosed, and Lost closes.
// Closing an ended session does nothing.
func (s *Session) Close() error {
	s.end(fmt.Errorf("%w: closed", ErrSessionEnded))
	return nil
}

func (s *Session) leaseTimer() {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	if time.Until(s.leaseEnds) > 0 { // renewed since it was scheduled
		s.node.sessions.schedule(s, s.leaseEnds)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.node.met.sessionsExpired.Inc()
	s.end(fmt.Errorf("%w: %w: TTL of %v ran out before a renewal", ErrLockLost, ErrSessionEnded, s.ttl))
}

// end ends the session with why and settles its locks: lost (a session
// that expired) or closed, and released at their masters.
func (s *Session) end(why error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = why
	if s.lost == nil {
		s.lost = make(chan struct{})
	}
	close(s.lost)
	locks := make([]*Lock, 0, len(s.locks))
	for _, lk := range s.locks {
		locks = append(locks, lk)
	}
	s.mu.Unlock()
	s.node.sessions.remove(s)
	s.node.met.sessions.Dec()
	lockWhy := why
	if !errors.Is(why, ErrLockLost) {
		lockWhy = fmt.Errorf("%w: %w", ErrClosed, why)
	}
	for _, lk := range locks {
		sh := lk.sh
		sh.mu.Lock()
		lk.endWithSession(sh, lockWhy)
		sh.mu.Unlock()
	}
	if fn := s.onEnd; fn != nil {
		s.node.callbacks.push(func(modes.Mode) { fn(why) }, 0)
	}
}

// lockLost tells the session's OnLockLost callback that lk was lost. Caller
// holds lk.sh.mu.
func (s *Session) lockLost(lk *Lock, why error) {
	if fn := s.onLost; fn != nil {
		s.node.callbacks.push(func(modes.Mode) { fn(lk, why) }, 0)
	}
}

// endWithSession settles a lock whose session ended: a held lock is
// released at its master (a conversion in flight ends with it), a request
// in flight withdrawn, and the holder told why. Caller holds sh.mu.
func (lk *Lock) endWithSession(sh *shard, why error) {
	switch lk.state {
	case 0, stReleased, stAbandoned:
		return // an abandoned request's grant, if one comes, is given back
	}
	if lk.ls.node.closed.Load() {
		lk.loseLocked(why) // Close or Halt settles the rest
		return
	}
	inFlight := lk.state == stWaiting || lk.state == stConverting
	if lk.state == stConverting {
		lk.state, lk.unsent = stGranted, nil
	}
	abandon := false
	if lk.state == stGranted {
		_ = lk.releaseAtMaster(sh, 0)
	} else {
		switch {
		case lk.unsent != nil:
			lk.unsent = nil
		case lk.local():
			_ = lk.ls.tableCancel(sh, lk.key(), lk.ownerID())
		default:
			lk.postCancel(sh)
			abandon = true // a grant may still be on its way; finish gives it back
		}
	}
	lk.loseLocked(why)
	if inFlight {
		lk.opErr = why
		lk.signalDone()
	}
	if abandon && lk.state == stWaiting {
		lk.state = stAbandoned
		return
	}
	lk.forgetLocked(sh)
}

// joinSession puts a new lock into the session its options name, if any.
func (lk *Lock) joinSession(s *Session) error {
	if s == nil {
		return nil
	}
	if s.node != lk.ls.node {
		return fmt.Errorf("%w: the session belongs to another node", ErrInvalidArgument)
	}
	lk.session = s
	return s.add(lk)
}

// QuorumLease returns when this node's quorum lease ends if no further
// acknowledgement comes (on its monotonic clock): the others may re-grant
// its locks only some time after that, so a program that holds locks
// through this node (a client of an agent) can trust them until then at
// most. held is false while the node has no lease; a node alone in its
// cluster holds one that never ends, the zero time with held true.
func (n *Node) QuorumLease() (ends time.Time, held bool) { return n.rec.LeaseEnd() }
