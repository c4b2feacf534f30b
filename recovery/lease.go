package recovery

import (
	"slices"
	"time"

	"github.com/seed-a6839e30/dlm/internal/seam"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// The quorum lease. Every HeartbeatInterval a node sends a Heartbeat to
// every configured peer membership says is up. A peer acknowledges it as a
// member (Member: true) only if the sender, with its boot, is in the
// peer's committed view; the sender's lease holds while at least Q−1 peers
// (Q counting itself) acknowledged, as a member, a heartbeat it sent less
// than Lease ago. Times are the sender's own monotonic clock, taken before
// sending, so the lease can only end early, never late.
//
// A node whose lease ends stops granting and reports its locks lost
// (Host.LeaseLost). Survivors that agree a view without it stop
// acknowledging it as a member and, before re-granting anything it held,
// wait LockDelay after the last acknowledgement each of them gave it.

func (m *Manager) heartbeat() {
	m.mu.Lock()
	epoch := m.committed.Epoch
	peers := make([]string, 0, len(m.alive))
	for name := range m.alive {
		if name != m.self.Name && m.change.conf.Has(name) {
			peers = append(peers, name)
		}
	}
	m.mu.Unlock()
	slices.Sort(peers)
	sent := time.Now()
	for _, p := range peers {
		err := m.links.Go(p, &wire.Heartbeat{Epoch: epoch}, func(rep wire.Message, err error) {
			m.onAck(p, sent, rep, err)
		})
		if err != nil {
			m.log.Debug("heartbeat not sent", "peer", p, "err", err)
		}
	}
	m.checkLease()
}

// onHeartbeat acknowledges a peer's heartbeat, as a member if it is one
// of the committed view.
func (m *Manager) onHeartbeat(from Member, to transport.ReplyTo) {
	m.mu.Lock()
	member := !m.evicted && m.committed.Has(from) && !m.refusedLocked(from.Name)
	if member {
		m.ackGiven[from] = time.Now()
	}
	ack := &wire.HeartbeatAck{Epoch: m.committed.Epoch, Member: member}
	m.mu.Unlock()
	if to.IsRequest() {
		_ = m.links.Reply(to, ack)
	}
}

// onAck records a peer's answer to a heartbeat sent at sent.
func (m *Manager) onAck(peer string, sent time.Time, rep wire.Message, err error) {
	ack, ok := rep.(*wire.HeartbeatAck)
	if err != nil || !ok {
		return
	}
	m.mu.Lock()
	m.highest = max(m.highest, ack.Epoch)
	if ack.Member && !m.refusedLocked(peer) {
		if sent.After(m.acks[peer]) {
			m.acks[peer] = sent
		}
	}
	evicted := !ack.Member && ack.Epoch > m.committed.Epoch && m.committed.Epoch != 0 &&
		// A newer view does not hold this node: whatever it holds or
		// masters has been, or will be, given to others.
		m.evictLocked("peer "+peer+" is in a newer view without this node")
	m.mu.Unlock()
	if evicted {
		m.host.LeaseLost(true)
	}
	m.checkLease()
}

// leaseEndLocked returns when the lease ends given the acks so far: the
// latest time t such that this node and the peers that acknowledged a
// heartbeat sent at t or later are a quorum of the configuration (both
// majorities while it is joint), plus Lease. A cluster of one needs none.
func (m *Manager) leaseEndLocked() (time.Time, bool) {
	return m.leaseEndUnderLocked(m.change.conf)
}

// leaseEndUnderLocked is leaseEndLocked under configuration c.
func (m *Manager) leaseEndUnderLocked(c Configuration) (time.Time, bool) {
	have := map[string]bool{m.self.Name: true}
	in := func(name string) bool { return have[name] }
	if c.Quorate(in) {
		return time.Time{}, true
	}
	type ack struct {
		peer string
		at   time.Time
	}
	acks := make([]ack, 0, len(m.acks))
	for p, t := range m.acks {
		if c.Has(p) {
			acks = append(acks, ack{p, t})
		}
	}
	slices.SortFunc(acks, func(a, b ack) int { return b.at.Compare(a.at) })
	for _, a := range acks {
		have[a.peer] = true
		if c.Quorate(in) {
			return a.at.Add(m.cfg.Lease), true
		}
	}
	return time.Time{}, false
}

// leaseShortUnderLocked reports whether adopting configuration c now would
// cost this node the lease it holds, or leave it less than half a Lease:
// a newer configuration can need acknowledgements from more peers than
// the one it replaces (growing 3 → 4 needs three of four, not two of
// three), and the acknowledgements in hand were gathered for the old one.
// Right after a view commits, a peer that had not committed it yet when
// a heartbeat came acknowledged it as a non-member's; a node that adopted
// the larger configuration then would drop its lease, and report every
// lock it holds lost, for want of one heartbeat round.
func (m *Manager) leaseShortUnderLocked(c Configuration, now time.Time) bool {
	if !m.leaseOK || m.evicted || c.Version <= m.change.conf.Version {
		return false
	}
	end, ok := m.leaseEndUnderLocked(c)
	return !ok || !end.IsZero() && end.Sub(now) < m.cfg.Lease/2
}

// checkLease updates the lease and tells the host when it is lost or
// regained. It schedules itself for the moment the lease would end; that
// timer (and the heartbeat that also calls it) may run late, after a
// process pause say, so what the node may do goes by the clock
// (LeaseHeld), and a lease that ran out before this check is reported lost
// even if acknowledgements that came meanwhile renewed it: the others may
// have counted on its end, and the locks held through the gap are fenced
// (Host.LeaseLost) before the node serves again.
func (m *Manager) checkLease() {
	if m.leaseStall != nil && m.leaseStall.LeaseStalled(seam.Key{}) {
		return
	}
	m.mu.Lock()
	end, any := m.leaseEndLocked()
	now := time.Now()
	ok := any && (end.IsZero() || now.Before(end)) && !m.evicted && m.refusal.isolated == ""
	was := m.leaseOK
	lapsed := was && !m.leaseEnd.IsZero() && !now.Before(m.leaseEnd)
	m.leaseOK = ok
	m.setLeaseLocked(ok, end)
	if ok && !end.IsZero() {
		if m.leaseTimer == nil {
			m.leaseTimer = time.AfterFunc(end.Sub(now), m.checkLease)
		} else {
			m.leaseTimer.Reset(end.Sub(now))
		}
	}
	m.met.quorum.Set(b2f(ok))
	served := m.noteServedLocked()
	m.mu.Unlock()
	if was && (!ok || lapsed) {
		m.log.Warn("quorum lease lost")
		m.host.LeaseLost(false)
	}
	if ok && (!was || lapsed) {
		m.host.LeaseRegained()
	}
	if served {
		close(m.served)
	}
}

// leaseForever is leaseUntil for a lease that never ends (a cluster of one).
const leaseForever = int64(^uint64(0) >> 1)

// setLeaseLocked records whether the lease is held and until when (zero:
// for ever) for LeaseHeld.
func (m *Manager) setLeaseLocked(ok bool, end time.Time) {
	switch {
	case !ok:
		m.leaseEnd = time.Time{}
		m.leaseUntil.Store(0)
	case end.IsZero():
		m.leaseEnd = time.Time{}
		m.leaseUntil.Store(leaseForever)
	default:
		m.leaseEnd = end
		m.leaseUntil.Store(max(int64(end.Sub(m.clockBase)), 1))
	}
}

// LeaseHeld reports whether this node holds its quorum lease now, on its
// own monotonic clock: false from the moment the lease ends, whether or not
// the Manager has noticed yet (its timer may run late). It takes no lock:
// the node asks it before every grant.
func (m *Manager) LeaseHeld() bool {
	u := m.leaseUntil.Load()
	return u == leaseForever || u > 0 && int64(time.Since(m.clockBase)) < u
}

// noteServedLocked reports, once, that the node serves for the first time.
func (m *Manager) noteServedLocked() bool {
	if m.servedOnce || !m.servingLocked() {
		return false
	}
	m.servedOnce = true
	return true
}

// evictLocked marks the node evicted and reports whether it was not
// already; the caller then tells the host, once unlocked, to drop its lock
// state (Host.LeaseLost(true)).
func (m *Manager) evictLocked(why string) bool {
	if m.evicted {
		return false
	}
	m.evicted = true
	m.leaseOK = false
	m.setLeaseLocked(false, time.Time{})
	if m.run != nil {
		m.run.cancel() // an evicted node completes no recovery until it is a member again
	}
	m.log.Warn("evicted: dropping all lock state", "why", why)
	m.met.evictions.Inc()
	return true
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
