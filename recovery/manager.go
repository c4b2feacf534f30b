package recovery

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-a6839e30/dlm/internal/seam"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Host is the lock-state side of recovery: the node that embeds a Manager.
// The Manager decides when; the Host moves the locks. No method is called
// with the Manager's mutex held, and calls come from one goroutine at a
// time for a given view.
type Host interface {
	// Prepare tells every member of v what this node's lock state is (which
	// tables it holds, which views it went through) and returns once it
	// knows every member's, or ctx ends: from them every member decides
	// alike which resources move in v. Lock traffic goes on as before.
	Prepare(ctx context.Context, v View) error
	// Suspend installs v: from now on lock messages carry v's epoch, the
	// resources that move (as Prepare decided) are held back until Resume,
	// and every other resource keeps being served.
	Suspend(v View)
	// Report sends what this node knows of the moving resources to their
	// masters in v: the locks it holds or waits for there, and what it
	// mastered of them before. It returns once every report has been
	// acknowledged, or ctx ends.
	Report(ctx context.Context, v View) error
	// Rebuild drops from the tables this node keeps the locks of nodes
	// that left (the lock-delay has passed for them), and builds the
	// tables of the resources that moved to it from the reports it
	// received for v.
	Rebuild(v View)
	// Resume serves the moved resources in view v.
	Resume(v View)
	// LeaseLost tells the node it has no quorum lease: it must stop
	// granting, fail waiting requests and report its locks lost. evicted
	// says the cluster agreed a view without it: it must also drop all lock
	// state, since the cluster has already given its locks away or will.
	LeaseLost(evicted bool)
	// LeaseRegained tells the node it may serve again (locks it reported
	// lost stay lost).
	LeaseRegained()
}

// Links is what the Manager needs of transport.Links.
type Links interface {
	Send(peer string, m wire.Message) error
	Go(peer string, m wire.Message, cb func(wire.Message, error)) error
	Call(ctx context.Context, peer string, m wire.Message) (wire.Message, error)
	Reply(to transport.ReplyTo, m wire.Message) error
}

// Manager runs membership epochs, the quorum lease and recovery for one
// node. See the package documentation.
type Manager struct {
	cfg   Config
	self  Member
	links Links
	host  Host
	log   *slog.Logger
	met   *metrics
	// noLockDelay: the host switched the lock-delay off (seam.NoLockDelay:
	// dlm's tests, and dlmnode agent --unsafe-no-lock-delay). Unsafe.
	noLockDelay bool

	mu          sync.Mutex
	alive       map[string]uint64 // configured members membership says are up
	quorumSince time.Time         // when alive first held a quorum
	committed   View              // latest view committed here (Epoch 0: none)
	promised    uint64            // highest epoch promised
	pending     *View             // the proposal promised last
	highest     uint64            // highest epoch seen anywhere
	proposing   bool
	// round is the proposal round under way while proposing: membership
	// news that makes it hopeless ends it at once (see abortRoundLocked).
	round      *round
	retryAfter time.Time // a failed proposal waits until then
	stall      stall     // the rounds failed since the last commit
	run        *recoveryRun
	runDone    chan struct{} // closed when the latest run's goroutine ends
	resumed    uint64        // epoch whose recovery completed here
	// recoveredView is that epoch's view: what the next recovery's
	// figures (Stats.Removed, Added) are counted from.
	recoveredView View
	evicted       bool    // a newer view left this node out
	barrier       barrier // coordinator's side of the current epoch's recovery
	acks          map[string]time.Time
	leaseOK       bool
	leaseTimer    *time.Timer
	ackGiven      map[Member]time.Time // last heartbeat this node acked, per member
	servedOnce    bool
	stats         Stats   // the latest recovery completed here
	resyncAfter   uint64  // a resync is wanted: a view newer than this epoch
	forceAfter    uint64  // coordinator: propose even with the same members while committed ≤ this
	refusal       refusal // peers refused for their configuration; see refusal.go
	change        change  // the configuration and membership changes; see change.go

	// leaseEnd is when the lease ends as of the last checkLease (zero: it
	// never ends, a cluster of one). leaseUntil is the same moment for
	// LeaseHeld, which takes no lock: nanoseconds of the monotonic clock
	// since clockBase, 0 while no lease is held, leaseForever for a
	// cluster of one.
	leaseEnd   time.Time
	leaseUntil atomic.Int64
	clockBase  time.Time
	leaseStall seam.LeaseStall // the host's, nil without one

	served chan struct{} // closed once the node first serves
	stop   chan struct{}
	wg     sync.WaitGroup
}

// barrier is what the coordinator of an epoch knows of its recovery.
type barrier struct {
	epoch    uint64
	statuses map[string]uint8 // member → phase completed
	sent     uint8            // phase last broadcast
}

// New returns a Manager; Start starts it.
func New(cfg Config, links Links, host Host) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{
		cfg: cfg, self: Member{Name: cfg.Name, BootID: cfg.BootID}, links: links, host: host,
		log:   log.With("recovery", cfg.Name),
		alive: map[string]uint64{cfg.Name: cfg.BootID}, acks: map[string]time.Time{},
		ackGiven: map[Member]time.Time{}, served: make(chan struct{}), stop: make(chan struct{}),
		clockBase: time.Now(),
	}
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	m.met = met
	if err := m.initChange(host); err != nil {
		met.group.Unregister()
		return nil, err
	}
	if s, ok := host.(seam.NoLockDelay); ok {
		m.noLockDelay = s.NoLockDelay(seam.Key{})
	}
	if s, ok := host.(seam.LeaseStall); ok {
		m.leaseStall = s
	}
	return m, nil
}

// Start starts the heartbeat and coordinator loops.
func (m *Manager) Start() {
	m.mu.Lock()
	m.noteQuorumLocked()
	m.mu.Unlock()
	m.wg.Add(2)
	go m.loop(m.cfg.HeartbeatInterval, m.heartbeat)
	go m.loop(m.cfg.CoordinatorInterval, m.coordinate)
}

func (m *Manager) loop(every time.Duration, f func()) {
	defer m.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			f()
		}
	}
}

// Close stops the Manager and waits for its goroutines.
func (m *Manager) Close() {
	m.mu.Lock()
	select {
	case <-m.stop:
		m.mu.Unlock()
		return
	default:
	}
	close(m.stop)
	if m.run != nil {
		m.run.cancel()
	}
	if m.leaseTimer != nil {
		m.leaseTimer.Stop()
	}
	m.mu.Unlock()
	m.wg.Wait()
	m.met.group.Unregister()
}

// stopped reports whether Close has begun.
func (m *Manager) stopped() bool {
	select {
	case <-m.stop:
		return true
	default:
		return false
	}
}

// Served returns a channel closed once the node is a member of a view whose
// recovery it completed and holds its quorum lease: it may take locks.
func (m *Manager) Served() <-chan struct{} { return m.served }

// Config returns the Manager's configuration.
func (m *Manager) Config() Config { return m.cfg }

// View returns the latest view committed here.
func (m *Manager) View() View {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.committed
}

// Serving reports whether the node may grant and hold locks now.
func (m *Manager) Serving() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.servingLocked()
}

func (m *Manager) servingLocked() bool {
	return m.leaseOK && m.LeaseHeld() && !m.evicted && m.committed.Epoch != 0 && m.resumed == m.committed.Epoch
}

// MemberAlive and MemberGone feed the Manager what membership sees. Only
// members of the configuration count, but every node is remembered, for a
// configuration that names it later; a new boot of a name replaces the old
// one.
func (m *Manager) MemberAlive(name string, boot uint64) {
	if name == m.self.Name {
		return
	}
	m.mu.Lock()
	if m.refusedLocked(name) {
		m.mu.Unlock()
		return
	}
	m.alive[name] = boot
	m.noteQuorumLocked()
	m.abortRoundLocked(name)
	m.mu.Unlock()
}

// MemberGone: see MemberAlive.
func (m *Manager) MemberGone(name string) {
	if name == m.self.Name {
		return
	}
	m.mu.Lock()
	delete(m.alive, name)
	m.abortRoundLocked(name)
	m.mu.Unlock()
}

func (m *Manager) noteQuorumLocked() {
	if m.quorumSince.IsZero() && m.change.conf.Quorate(m.upLocked) {
		m.quorumSince = time.Now()
	}
}

// RequestResync asks for a new epoch even if the members stay the same:
// call it when a connection to a peer broke, since lock messages on it may
// have been lost. The new view's recovery rebuilds every lock table from
// what holders know, which is always right. Requests are merged: one new
// epoch serves every request made before it.
func (m *Manager) RequestResync() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.committed.Epoch != 0 && m.resyncAfter < m.committed.Epoch {
		m.resyncAfter = m.committed.Epoch
		m.met.resyncs.Inc()
	}
}

// Handle takes the recovery protocol's messages; it reports whether the
// message was one of them. It never blocks for long.
func (m *Manager) Handle(in transport.Inbound) bool {
	from := Member{Name: in.From, BootID: in.BootID}
	switch msg := in.Msg.(type) {
	case *wire.Heartbeat:
		m.onHeartbeat(from, in.ReplyTo)
	case *wire.Propose:
		m.onPropose(from, in.ReplyTo, msg)
	case *wire.Commit:
		m.onCommit(msg)
	case *wire.RecoveryStatus:
		m.onStatus(from, msg)
	case *wire.RecoveryPhase:
		m.onPhase(msg)
	default:
		return false
	}
	return true
}

func (m *Manager) String() string { return fmt.Sprintf("recovery(%s)", m.self) }

// upLocked reports whether membership says name is up (this node is).
func (m *Manager) upLocked(name string) bool {
	_, ok := m.alive[name]
	return ok
}
