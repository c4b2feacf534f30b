package dlm

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-a6839e30/dlm/internal/seam"
	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/recovery"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/membership"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Node is one member of a dlm cluster: it masters its share of the
// resources and takes locks on behalf of the program that embeds it. All
// methods are safe for concurrent use.
type Node struct {
	cfg    Config
	self   *member
	bootID uint64
	log    *slog.Logger
	met    *metrics
	start  time.Time

	view  atomic.Pointer[view]
	links *transport.Links
	ms    *membership.Membership
	rec   *recovery.Manager

	mu sync.Mutex
	// lockspaces is copied on write (under mu) and read without a lock:
	// every lock message looks its lockspace up, lockspaces are rarely
	// added and never removed.
	lockspaces atomic.Pointer[map[string]*Lockspace]
	alive      map[string]membership.Member // what membership says is up

	// gate says whether the node serves lock traffic; see gate.go.
	gate gate
	// recov holds what recovery collects between views; see recovery.go.
	recov recoveryState
	// agree is what the peers advertise of their configuration; see
	// agreement.go.
	agree agreement

	closed  atomic.Bool
	halted  atomic.Bool // Halt: leave no goodbye
	closing chan struct{}
	wg      sync.WaitGroup

	nextLockID  atomic.Uint64
	nextOwnerID atomic.Uint32
	nlocks      atomic.Int64 // locks held or waited for by this node

	callbacks *dispatcher
	deadlocks *deadlocks // detection across resources and nodes; see deadlock.go
	history   history    // recent recoveries and deadlocks, for Status; see status.go
	sessions  sessions   // see session.go

	knobs testKnobs // test-only seams; see knobs.go
}

// Start starts a node and joins the cluster: it listens for lock traffic,
// joins gossip through cfg.Seeds, and returns once it is a member of a view
// agreed by a quorum of cfg.Members and holds its quorum lease (it may take
// locks), or ctx ends. It does not wait for every member: the cluster's
// first view waits about a second for the members not up yet, and those
// that come later join in a later view.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	return start(ctx, cfg, testKnobs{noLockDelay: seam.LockDelayOff(ctx)})
}

// start is Start with the test-only seams.
func start(ctx context.Context, cfg Config, knobs testKnobs) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.prepareDataDir(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg: cfg, knobs: knobs, bootID: randomUint64(), start: time.Now(),
		alive:   map[string]membership.Member{},
		closing: make(chan struct{}), callbacks: newDispatcher(),
	}
	n.log = cfg.Logger
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	n.log = n.log.With("node", cfg.Name)
	n.warnExposures()
	// Lock ids increase for the life of the process; starting at a random
	// point keeps a restarted node from reusing its previous ids.
	n.nextLockID.Store(randomUint64() >> 24) // 40 bits: 2^44 ids fit above (see newLockID)
	met, err := newMetrics(n)
	if err != nil {
		return nil, fmt.Errorf("dlm: metrics: %w", err)
	}
	n.met = met
	if err := n.initAgreement(); err != nil {
		n.met.group.Unregister()
		return nil, fmt.Errorf("dlm: metrics: %w", err)
	}
	n.deadlocks = newDeadlocks(n)
	if err := n.startLinks(); err != nil {
		n.met.group.Unregister()
		n.agree.group.Unregister()
		return nil, err
	}
	linkAddr := n.links.Addr().String()
	if cfg.LinkAdvertiseAddr != "" {
		linkAddr = cfg.LinkAdvertiseAddr
	}
	n.self = newMember(cfg.Name, linkAddr, n.bootID)
	n.view.Store(newView(0, nil, n.self))
	n.gate.init()
	if err := n.startRecovery(); err != nil {
		_ = n.links.Close()
		n.met.group.Unregister()
		n.agree.group.Unregister()
		return nil, err
	}
	if err := n.startMembership(); err != nil {
		n.rec.Close()
		_ = n.links.Close()
		n.met.group.Unregister()
		n.agree.group.Unregister()
		return nil, err
	}
	n.wg.Add(3)
	go func() { defer n.wg.Done(); n.callbacks.run(n.closing) }()
	go func() { defer n.wg.Done(); n.retagLoop() }()
	go func() { defer n.wg.Done(); n.tickLoop() }()
	n.rec.Start()
	select {
	case <-n.rec.Served():
	case <-ctx.Done():
		n.shutdown()
		return nil, fmt.Errorf("dlm: waiting to join a view of the cluster (members up: %v): %w", n.aliveNames(), ctx.Err())
	}
	n.log.Info("dlm node started", "view", n.rec.View().String(), "link", n.self.linkAddr)
	return n, nil
}

func (n *Node) startRecovery() error {
	rc := recovery.DefaultConfig()
	rc.Name, rc.BootID, rc.Members = n.cfg.Name, n.bootID, n.cfg.Members
	rc.StateDir, rc.OnConfiguration = n.cfg.DataDir, n.onConfiguration
	rc.Lease, rc.HeartbeatInterval, rc.ClockDrift = n.cfg.Lease, n.cfg.HeartbeatInterval, n.cfg.ClockDrift
	rc.Logger, rc.Registerer = n.log, n.cfg.Registerer
	rc.OnRecovered = n.history.recovered
	rec, err := recovery.New(rc, n.links, recoveryHost{n})
	if err != nil {
		return fmt.Errorf("dlm: recovery: %w", err)
	}
	n.rec = rec
	c := rec.Configuration()
	n.agree.mu.Lock()
	n.agree.mine.version, n.agree.mine.members = c.Version, configHash(c)
	n.agree.mu.Unlock()
	return nil
}

func (n *Node) aliveNames() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	names := make([]string, 0, len(n.alive))
	for name := range n.alive {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func (n *Node) startLinks() error {
	streams := n.cfg.Streams
	if streams == nil {
		tcp, err := transport.ListenTCP(transport.TCPConfig{Addr: n.cfg.LinkAddr, TLS: n.cfg.TLS})
		if err != nil {
			return fmt.Errorf("dlm: listen for lock traffic: %w", err)
		}
		streams = tcp
	}
	lc := transport.DefaultConfig()
	lc.Name, lc.ClusterID, lc.BootID = n.cfg.Name, n.cfg.ClusterID, n.bootID
	lc.StreamLayer, lc.Handler = streams, n.handle
	lc.OnLinkDown, lc.OnSessionLost = n.onLinkDown, n.onSessionLost
	lc.Logger, lc.Registerer = n.log, n.cfg.Registerer
	lc.Limits.MaxLVB = max(lc.Limits.MaxLVB, n.maxLVB())
	links, err := transport.New(lc)
	if err != nil {
		_ = streams.Close()
		return fmt.Errorf("dlm: links: %w", err)
	}
	n.links = links
	return nil
}

// onLinkDown: a connection to a peer broke. Nothing sent on it is lost
// while the link's session lives (the next connection resends it): only a
// log. It runs on the transport's goroutine and must not block.
func (n *Node) onLinkDown(peer string, err error) {
	n.log.Debug("link to a peer went down; its session resends what it lost", "peer", peer, "err", err)
}

// onSessionLost: lock messages between this node and peer were lost for
// good (the link's session ended). If the peer stays a member, the next
// view rebuilds every table of both (linkLost); if it left or restarted,
// the view without its old boot settles it.
func (n *Node) onSessionLost(peer string, err error) {
	if n.rec == nil || n.closed.Load() {
		return
	}
	if m := n.view.Load().byName[peer]; m == nil {
		return // not a member: nothing to resync with
	}
	n.log.Warn("lock messages to or from a peer were lost; asking for a resync", "peer", peer, "err", err)
	n.linkLost(peer)
}

// maxLVB is the largest value block any configured lockspace allows.
func (n *Node) maxLVB() int {
	m := n.cfg.DefaultLockspace.MaxLVB
	for _, ls := range n.cfg.Lockspaces {
		m = max(m, ls.MaxLVB)
	}
	return m
}

func (n *Node) startMembership() error {
	mc := membership.DefaultConfig()
	mc.Name, mc.ClusterID, mc.BootID = n.cfg.Name, n.cfg.ClusterID, n.bootID
	mc.ProtocolVersion = wire.LinkVersion
	mc.LinkAddr = n.self.linkAddr
	mc.Seeds = n.cfg.Seeds
	mc.SecretKey = n.cfg.GossipKey
	n.agree.mu.Lock()
	mc.Tags = n.cfg.advertisedTags(n.agree.mine)
	n.agree.mu.Unlock()
	if a := n.cfg.GossipAdvertiseAddr; a != "" {
		host, port, err := splitHostPort(a)
		if err != nil {
			return fmt.Errorf("%w: GossipAdvertiseAddr: %v", ErrInvalidConfig, err)
		}
		mc.AdvertiseAddr, mc.AdvertisePort = host, port
	}
	mc.ProbeInterval, mc.ProbeTimeout = n.cfg.ProbeInterval, n.cfg.ProbeTimeout
	mc.OnEvent = n.onMemberEvent
	mc.Logger, mc.Registerer = n.log, n.cfg.Registerer
	if n.cfg.GossipTransport != nil {
		mc.Transport = n.cfg.GossipTransport
	} else {
		host, port, err := splitHostPort(n.cfg.GossipAddr)
		if err != nil {
			return fmt.Errorf("%w: GossipAddr: %v", ErrInvalidConfig, err)
		}
		mc.BindAddr, mc.BindPort = host, port
	}
	ms, err := membership.Start(mc)
	if err != nil {
		return fmt.Errorf("dlm: membership: %w", err)
	}
	n.ms = ms
	n.agree.mu.Lock()
	n.agree.ms = ms
	n.agree.mu.Unlock()
	return nil
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	return host, port, err
}

// GossipAddr returns the address other nodes give as a seed to join through
// this one.
func (n *Node) GossipAddr() string { return n.ms.Local().GossipAddr }

// Name returns the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// Members returns the names of the members of the current view.
func (n *Node) Members() []string {
	v := n.view.Load()
	names := make([]string, len(v.members))
	for i, m := range v.members {
		names[i] = m.name
	}
	return names
}

// onMemberEvent runs on membership's delivery goroutine. It records who is
// up and where their links are, and tells recovery (which only proposes
// views from it; it never trusts a leave as proof of death). It never
// blocks.
func (n *Node) onMemberEvent(ev membership.Event) {
	name := ev.Member.Name
	if name == n.self.name {
		return
	}
	if !n.agreeOn(ev) {
		n.mu.Lock()
		delete(n.alive, name)
		n.mu.Unlock()
		return // refused: recovery keeps it out
	}
	n.mu.Lock()
	if ev.Kind == membership.Leave {
		delete(n.alive, name)
	} else {
		n.alive[name] = ev.Member
	}
	n.mu.Unlock()
	if ev.Kind == membership.Leave {
		n.rec.MemberGone(name)
		return
	}
	if err := n.links.SetPeer(name, ev.Member.LinkAddr); err != nil {
		n.log.Warn("peer address refused", "peer", name, "err", err)
	}
	// A peer that membership sees (back) up answers a dial now: the link
	// to a peer that restarted on the same address need not wait out the
	// backoff its redials reached while the peer was down, which the next
	// view waits for (its proposal and recovery go over that link).
	n.links.Redial(name)
	n.rec.MemberAlive(name, ev.Member.BootID)
}

// Lockspace opens a lockspace (creating it on first use) with the limits
// the configuration gives it.
func (n *Node) Lockspace(name string) (*Lockspace, error) {
	if err := checkLockspaceName(name); err != nil {
		return nil, err
	}
	if n.closed.Load() {
		return nil, ErrClosed
	}
	return n.lockspace(name), nil
}

// lockspace returns the named lockspace, creating it. Masters create a
// lockspace when the first request for it arrives.
func (n *Node) lockspace(name string) *Lockspace {
	if ls := n.existingLockspace(name); ls != nil {
		return ls
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if ls := n.existingLockspace(name); ls != nil {
		return ls
	}
	ls := newLockspace(n, name, n.cfg.lockspace(name))
	all := map[string]*Lockspace{name: ls}
	if old := n.lockspaces.Load(); old != nil {
		maps.Copy(all, *old)
	}
	n.lockspaces.Store(&all)
	return ls
}

// existingLockspace returns the lockspace of that name, nil if this node
// has none.
func (n *Node) existingLockspace(name string) *Lockspace {
	if all := n.lockspaces.Load(); all != nil {
		return (*all)[name]
	}
	return nil
}

func (n *Node) lockspaceList() []*Lockspace {
	all := n.lockspaces.Load()
	if all == nil {
		return nil
	}
	out := make([]*Lockspace, 0, len(*all))
	for _, ls := range *all {
		out = append(out, ls)
	}
	slices.SortFunc(out, func(a, b *Lockspace) int {
		if a.name < b.name {
			return -1
		}
		return 1
	})
	return out
}

// now is the node's clock in table ticks: microseconds since Start, on the
// monotonic clock.
func (n *Node) now() master.Tick { return master.Tick(time.Since(n.start) / time.Microsecond) }

// ticks converts a duration to table ticks, rounding up so that a deadline
// is never earlier than asked.
func ticks(d time.Duration) master.Tick {
	if d <= 0 {
		return 0
	}
	return master.Tick((d + time.Microsecond - 1) / time.Microsecond)
}

func (n *Node) tickLoop() {
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-n.closing:
			return
		case <-t.C:
			for _, ls := range n.lockspaceList() {
				ls.tick()
			}
			if n.serving() {
				n.sendDeferredUnlocks()
			}
			n.deadlocks.tick()
		}
	}
}

// Close releases every lock this node holds or waits for, leaves the
// cluster and stops every goroutine the node started. Locks the caller
// still holds report ErrClosed, and their Lost channels close. One
// goroutine of memberlist's may outlive Close briefly: its prober, if a
// probe was in flight, ends when that probe's wait does (at most the probe
// interval times memberlist's awareness multiplier, 1.6 s with the default
// timing); it only waits, and touches nothing of the node.
func (n *Node) Close() error {
	if n.closed.Swap(true) {
		return nil
	}
	for _, ls := range n.lockspaceList() {
		ls.releaseAll()
	}
	// The releases of remote locks are queued messages: let them leave
	// before the connections close, or their masters would keep the locks.
	ctx, cancel := context.WithTimeout(context.Background(), closeFlushTimeout)
	if err := n.links.Flush(ctx); err != nil {
		n.log.Warn("close: some lock releases may not have reached their masters", "err", err)
	}
	cancel()
	n.shutdown()
	return nil
}

// closeFlushTimeout bounds how long Close waits for its last messages.
const closeFlushTimeout = 2 * time.Second

// Halt stops the node at once, as if its process had died: it releases no
// lock and tells nobody; the cluster finds out through its failure
// detector, and re-grants the node's locks after the lock-delay. Locks this
// node holds report ErrClosed. For demos and fault-injection tests; Close
// is the way to leave.
func (n *Node) Halt() {
	if n.closed.Swap(true) {
		return
	}
	n.halted.Store(true)
	for _, ls := range n.lockspaceList() {
		for _, sh := range ls.shards {
			sh.mu.Lock()
			for _, lk := range sh.locks {
				if lk.state == stWaiting || lk.state == stConverting {
					lk.opErr = ErrClosed
					lk.signalDone()
				}
				lk.loseLocked(ErrClosed)
			}
			sh.mu.Unlock()
		}
	}
	n.shutdown()
}

// shutdown stops the node's machinery; locks must already be settled.
func (n *Node) shutdown() {
	n.closed.Store(true)
	n.gate.close()
	n.sessions.stopAll()
	var errs []error
	if n.rec != nil {
		n.rec.Close()
	}
	if n.ms != nil && n.halted.Load() {
		errs = append(errs, n.ms.Halt())
	} else if n.ms != nil {
		errs = append(errs, n.ms.Close())
	}
	// Links flush what is queued (the unlocks above) before closing.
	errs = append(errs, n.links.Close())
	close(n.closing)
	n.wg.Wait()
	n.met.group.Unregister()
	n.agree.group.Unregister()
	if err := errors.Join(errs...); err != nil {
		n.log.Warn("close", "err", err)
	}
}

func randomUint64() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return binary.LittleEndian.Uint64(b[:]) | 1
}
