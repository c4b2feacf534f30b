package membership

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/internal/promreg"
)

// Membership is this node's view of the cluster, kept by memberlist.
type Membership struct {
	cfg   Config
	log   *slog.Logger
	met   *metrics
	ml    *memberlist.Memberlist
	d     *delegate
	q     *queue
	live  *liveSet
	local Member

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Start creates the memberlist, joins the seeds (a seed that cannot be
// reached is not an error: the rejoin loop keeps trying) and starts
// delivering events to cfg.OnEvent.
func Start(cfg Config) (*Membership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.BootID == 0 {
		cfg.BootID = randomBootID()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("node", cfg.Name)
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	meta := Meta{Version: cfg.ProtocolVersion, BootID: cfg.BootID, ClusterID: cfg.ClusterID, LinkAddr: cfg.LinkAddr, Tags: maps.Clone(cfg.Tags)}
	m := &Membership{cfg: cfg, log: log, met: met, q: newQueue(), live: newLiveSet(), stop: make(chan struct{})}
	d := &delegate{meta: meta.Encode(), clusterID: cfg.ClusterID, self: cfg.Name, q: m.q, log: log, met: met, live: m.live}
	m.d = d
	m.ml, err = memberlist.Create(cfg.memberlistConfig(d))
	if err != nil {
		met.group.Unregister()
		return nil, fmt.Errorf("membership: %w", err)
	}
	ln := m.ml.LocalNode()
	m.local = Member{Name: cfg.Name, GossipAddr: net.JoinHostPort(ln.Addr.String(), strconv.Itoa(int(ln.Port))), Meta: meta}
	m.wg.Add(1)
	go m.deliver()
	// Every seed, even one a peer's push/pull already reported alive: a
	// node that restarted on the same address gossips its first
	// incarnation, which a member that still holds the last boot as dead
	// or suspect at that incarnation or later ignores. Only a push/pull
	// with such a member shows this node its stale record, which it then
	// refutes with a higher incarnation; a member skipped here would not
	// see it back until its next rejoin or push/pull, seconds later.
	m.join(m.otherSeeds(false))
	if every := cfg.rejoinInterval(); every > 0 {
		m.wg.Add(1)
		go m.rejoinLoop(every)
	}
	return m, nil
}

func randomBootID() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if v := binary.LittleEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}

// Local returns this node as peers see it.
func (m *Membership) Local() Member { return m.local }

// Members returns the live members other than this node (alive or
// suspected: memberlist has not declared them dead), with their decoded
// meta. The list is kept from memberlist's event callbacks rather than read
// from memberlist.Members, whose nodes memberlist keeps changing in place
// after it returns them (reading their fields races with its packet handler).
func (m *Membership) Members() []Member { return m.live.members() }

// Close leaves the cluster (peers see a Leave at once instead of waiting for
// the failure detector), shuts memberlist down and stops the event and
// rejoin goroutines, and unregisters its metrics. Events still queued are
// not delivered.
func (m *Membership) Close() error { return m.close(true) }

// Halt shuts memberlist down without a leave, as a crash would: peers find
// out through their failure detector. For fault injection.
func (m *Membership) Halt() error { return m.close(false) }

func (m *Membership) close(leave bool) error {
	var err error
	m.closeOnce.Do(func() {
		close(m.stop)
		if leave {
			if lerr := m.ml.Leave(m.cfg.LeaveTimeout); lerr != nil {
				m.log.Debug("leave broadcast incomplete", "err", lerr)
			}
		}
		err = m.ml.Shutdown()
		m.wg.Wait()
		m.met.group.Unregister()
	})
	return err
}

// deliver is the one goroutine that turns queued memberlist callbacks into
// Events and hands them to OnEvent.
func (m *Membership) deliver() {
	defer m.wg.Done()
	t := tracker{boots: map[string]uint64{}}
	for {
		select {
		case <-m.q.signal:
		case <-m.stop:
			return
		}
		for _, r := range m.q.take() {
			meta, err := DecodeMeta(r.meta)
			if err != nil {
				m.log.Warn("event for a node with bad metadata", "node", r.name, "err", err)
				continue
			}
			ev := t.translate(r, meta)
			m.met.events.WithLabelValues(ev.Kind.String()).Inc()
			m.met.members.Set(float64(len(t.boots)))
			m.log.Debug("membership event", "event", ev.String())
			m.cfg.OnEvent(ev)
		}
	}
}

// rejoinLoop re-joins, every interval, the seeds that are not alive
// members: memberlist forgets dead nodes after GossipToTheDeadTime and never
// contacts them again, so without this a long partition never heals (T6).
func (m *Membership) rejoinLoop(every time.Duration) {
	defer m.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			m.joinSeeds()
		case <-m.stop:
			return
		}
	}
}

func (m *Membership) joinSeeds() { m.join(m.otherSeeds(true)) }

func (m *Membership) join(seeds []string) {
	if len(seeds) == 0 {
		return
	}
	n, err := m.ml.Join(seeds)
	m.met.rejoins.Inc()
	if err != nil {
		m.log.Debug("join seeds", "seeds", seeds, "reached", n, "err", err)
	}
}

// otherSeeds returns the seeds other than this node and, if skipAlive,
// other than the alive members, matched by name ("name/addr") or by
// address.
func (m *Membership) otherSeeds(skipAlive bool) []string {
	alive := map[string]bool{m.cfg.Name: true, m.local.GossipAddr: true}
	if skipAlive {
		for _, mem := range m.Members() {
			alive[mem.Name], alive[mem.GossipAddr] = true, true
		}
	}
	var out []string
	for _, s := range m.cfg.Seeds {
		name, addr, hasName := strings.Cut(s, "/")
		if !hasName {
			addr = s
		}
		if (hasName && alive[name]) || alive[addr] {
			continue
		}
		out = append(out, s)
	}
	return out
}

// metrics of a Membership.
type metrics struct {
	events  *prometheus.CounterVec
	refused *prometheus.CounterVec
	members prometheus.Gauge
	rejoins prometheus.Counter

	group *promreg.Group // unregistered when the Membership closes
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns = "dlm_membership"
	m := &metrics{
		events:  prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "events_total", Help: "Membership events delivered, by kind."}, []string{"kind"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "nodes_refused_total", Help: "Nodes refused admission, by reason."}, []string{"reason"}),
		members: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "members", Help: "Alive members other than this node, as reported by events."}),
		rejoins: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "seed_joins_total", Help: "Attempts to join the seeds: all of them at start, later those that were not alive members."}),
	}
	var err error
	if m.group, err = promreg.Register(reg, m.events, m.refused, m.members, m.rejoins); err != nil {
		return nil, fmt.Errorf("membership: metrics: %w", err)
	}
	return m, nil
}
