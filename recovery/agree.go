package recovery

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// View agreement. memberlist's events only propose: the coordinator (the
// lowest-named configured member that membership says is up) proposes
// (epoch, members) whenever the members it sees differ from the committed
// view. A node promises at most one proposal per epoch, and only for an
// epoch above every epoch it promised or committed; a proposal commits when
// every member of the new view promised it, and they are a quorum of the
// configured cluster. Two proposals for one epoch cannot both commit: each
// needs a quorum of promises, quorums intersect, and the node in both
// promised only one. A node that learns of views agreed without it (a
// proposal whose previous epoch is newer than its own, and which it did not
// promise) drops its lock state before promising: it is a zombie. A node
// that has committed no view since it started has no lock state to drop.

// coordinate runs on the coordinator loop: propose a view when the members
// differ from the committed view, and drive the current recovery's barrier.
func (m *Manager) coordinate() {
	m.askResync()
	m.mu.Lock()
	if m.refusal.isolated != "" || !m.isCoordinatorLocked() || m.proposing || time.Now().Before(m.retryAfter) {
		m.mu.Unlock()
		return
	}
	next := m.nextConfigLocked()
	desired := m.desiredLocked(next)
	switch {
	case m.change.newest > m.change.conf.Version:
		m.mu.Unlock() // a peer runs a newer configuration: learn it first
		return
	case !next.Quorate(membersHas(desired)):
		m.mu.Unlock()
		return
	case m.committed.Epoch == 0 && len(desired) < len(next.All()) && time.Since(m.quorumSince) < m.cfg.Settle:
		m.mu.Unlock() // first view: give the rest a moment to come up
		return
	case sameMembers(desired, m.committed.Members) && next.Equal(m.committed.Config) && !m.evicted && m.committed.Epoch > m.forceAfter:
		m.mu.Unlock()
		m.driveBarrier()
		return
	}
	if next.Version > m.change.conf.Version && m.renewBeforeAdoptingLocked(next) != "" {
		m.mu.Unlock()
		m.heartbeat() // the next tick proposes once they are acknowledged
		return
	}
	epoch := max(m.committed.Epoch, m.promised, m.highest) + 1
	prev := m.committed.Epoch
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.ProposeTimeout)
	r := &round{members: desired, cancel: cancel}
	m.proposing, m.round = true, r
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		defer cancel()
		m.propose(ctx, r, epoch, prev, desired, next)
	}()
}

// round is a proposal round under way.
type round struct {
	members []Member
	cancel  context.CancelFunc
	// aborted: membership showed that a member of the round is down, or
	// runs another boot, so the round cannot commit; it was ended without
	// waiting for ProposeTimeout, and the next one needs no back-off.
	aborted bool
}

// abortRoundLocked ends the proposal round under way if membership's news
// of name (it went, or came back with another boot) leaves the round
// without a member that can promise: a promise is asked of a member's boot,
// so the round would wait for ProposeTimeout for nothing. The view the
// round proposed is not committed; the next round, proposed at the next
// coordinator tick, names the members as membership now sees them. News of
// a member the round does not name leaves it alone: it commits what it
// has, and the next view adds the newcomer.
func (m *Manager) abortRoundLocked(name string) {
	r := m.round
	if r == nil || r.aborted {
		return
	}
	boot, up := m.alive[name]
	for _, mem := range r.members {
		if mem.Name == name && (!up || mem.BootID != boot) {
			r.aborted = true
			r.cancel()
			m.log.Debug("proposal abandoned: membership changed", "member", name, "up", up)
			return
		}
	}
}

// phaseResync, in a RecoveryStatus, asks the coordinator for a new epoch.
const phaseResync = wire.MaxPhase

// askResync passes a pending resync request to the view's coordinator (or
// takes it, if this node coordinates), until a newer view commits.
func (m *Manager) askResync() {
	m.mu.Lock()
	if m.resyncAfter == 0 || m.committed.Epoch > m.resyncAfter {
		m.resyncAfter = 0
		m.mu.Unlock()
		return
	}
	v := m.committed
	m.mu.Unlock()
	m.sendStatus(v.Coordinator, &wire.RecoveryStatus{Epoch: v.Epoch, Phase: phaseResync})
}

// isCoordinatorLocked: this node is the lowest-named member of the
// committed view that it sees up, in the boot of the view (before the first view: of every node it
// sees up). A node that is out of the view, or was evicted, never
// coordinates: its membership may be stale from a partition, and a view it
// proposed could leave healthy nodes out. The view's coordinator adds it.
func (m *Manager) isCoordinatorLocked() bool {
	if m.evicted || (m.committed.Epoch != 0 && !m.committed.Has(m.self)) {
		return false
	}
	for name, boot := range m.alive {
		// A lower-named node defers this one only if it runs the boot of the
		// view: a restarted node has no view and would be refused.
		if name < m.self.Name && m.change.conf.Has(name) && (m.committed.Epoch == 0 || m.committed.Has(Member{name, boot})) {
			return false
		}
	}
	return true
}

// desiredLocked is the view the coordinator wants: every member of the
// configuration c that membership says is up, with the boot it runs.
func (m *Manager) desiredLocked(c Configuration) []Member {
	out := make([]Member, 0, len(m.alive))
	for name, boot := range m.alive {
		if c.Has(name) {
			out = append(out, Member{Name: name, BootID: boot})
		}
	}
	return sortMembers(out)
}

// membersHas is a set test over a sorted member list.
func membersHas(ms []Member) func(string) bool {
	return func(name string) bool {
		_, ok := slices.BinarySearchFunc(ms, name, func(a Member, n string) int { return compareNames(a.Name, n) })
		return ok
	}
}

// propose runs one proposal round and commits it if every member promises.
// ctx ends the round (ProposeTimeout, or abortRoundLocked); the round also
// ends as soon as one member refused or could not be asked, since it needs
// every member.
func (m *Manager) propose(ctx context.Context, r *round, epoch, prev uint64, members []Member, conf Configuration) {
	// The view's coordinator runs its recovery's barrier, so it must be a
	// member: a coordinator proposing the view that completes its own
	// removal names the member that coordinates after it.
	coordinator := m.self.Name
	if !slices.Contains(members, m.self) && len(members) > 0 {
		coordinator = slices.MinFunc(members, func(a, b Member) int { return strings.Compare(a.Name, b.Name) }).Name
	}
	p := &wire.Propose{Epoch: epoch, Coordinator: coordinator, PrevEpoch: prev, Members: toWire(members), Config: conf.toWire()}
	m.log.Debug("proposing", "epoch", epoch, "members", members, "config", conf.String())
	var newer []wire.ViewConfig
	var mu sync.Mutex
	ok, seen := true, uint64(0)
	var refused refusedBy // the first member that did not promise, and why
	var wg sync.WaitGroup
	for _, mem := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr, err := m.promiseFrom(ctx, mem, p)
			mu.Lock()
			defer mu.Unlock()
			if pr == nil || !pr.OK {
				if ok && ctx.Err() == nil {
					refused.member = mem
					if refused.why = "no answer: " + fmt.Sprint(err); pr != nil {
						refused.why = pr.Reason
					}
				}
				ok = false
				r.cancel() // the round cannot commit: do not wait for the others
			}
			if pr != nil {
				seen = max(seen, pr.Promised, pr.Committed)
				if pr.Config.Version > conf.Version {
					newer = append(newer, pr.Config)
				}
			}
		}()
	}
	wg.Wait()
	for _, c := range newer {
		m.learnFromPromise(c)
	}
	m.mu.Lock()
	m.proposing, m.round = false, nil
	m.highest = max(m.highest, seen)
	if !ok {
		// Back off a random while so that two nodes that both think they
		// coordinate do not outbid each other for ever. A round abandoned
		// on membership's news was outbid by no one: the next tick
		// proposes what membership now sees.
		if !r.aborted {
			m.retryAfter = time.Now().Add(time.Duration(rand.Int64N(int64(4*m.cfg.CoordinatorInterval))) + m.cfg.CoordinatorInterval)
			m.noteFailedRoundLocked(epoch, refused)
		}
		m.mu.Unlock()
		m.met.proposals.WithLabelValues("failed").Inc()
		return
	}
	m.mu.Unlock()
	m.met.proposals.WithLabelValues("committed").Inc()
	c := &wire.Commit{Epoch: epoch, Coordinator: coordinator, Members: toWire(members), Config: conf.toWire()}
	for _, mem := range members {
		if mem.Name == m.self.Name {
			continue
		}
		_ = m.links.Send(mem.Name, c)
	}
	m.onCommit(c)
}

// promiseFrom asks one member for its promise (itself directly).
func (m *Manager) promiseFrom(ctx context.Context, mem Member, p *wire.Propose) (*wire.Promise, error) {
	if mem.Name == m.self.Name {
		return m.promise(m.self, p), nil
	}
	rep, err := m.links.Call(ctx, mem.Name, p)
	if errors.Is(err, transport.ErrConnLost) && ctx.Err() == nil {
		// The connection broke under the request: typically the member
		// restarted, and the proposal (naming its new boot) was queued for
		// the old one. Asking again reaches the new boot. A promise given
		// to the first request refuses the second (the epoch is promised
		// already): the round fails, as it would have.
		rep, err = m.links.Call(ctx, mem.Name, p)
	}
	if err != nil {
		m.log.Debug("no promise", "member", mem, "err", err)
		return nil, err
	}
	pr, _ := rep.(*wire.Promise)
	if pr == nil {
		return nil, fmt.Errorf("%s answered a proposal with %T", mem.Name, rep)
	}
	return pr, nil
}

func (m *Manager) onPropose(from Member, to transport.ReplyTo, p *wire.Propose) {
	pr := m.promise(from, p)
	if to.IsRequest() {
		_ = m.links.Reply(to, pr)
	}
}

// promise decides on a proposal. A node that finds it missed views drops
// its lock state before promising.
//
// A node refuses a proposer that is behind its committed view unless the
// proposer is a member of that view (which only lost the commit). A
// node that was partitioned away still holds the old view, in which it may
// be the coordinator, and its memberlist may still report dead the nodes it
// could not reach; without this rule, the first node to hear it after the
// heal would agree a view that evicts healthy members. Refused, it learns
// from heartbeat acks that it was left out, stops coordinating, and the
// coordinator of the current view adds it back.
func (m *Manager) promise(from Member, p *wire.Propose) *wire.Promise {
	pc, hasConfig := configFromWire(p.Config)
	m.mu.Lock()
	if !hasConfig && m.change.conf.Version == 0 {
		// A proposer that sends no configuration (an older release) means
		// the configured one, version 0: taken as such while this node
		// runs that version.
		pc, hasConfig = m.change.conf, true
	}
	v := View{Epoch: p.Epoch, Coordinator: p.Coordinator, Members: fromWire(p.Members), Config: pc}
	m.highest = max(m.highest, p.Epoch)
	reason := ""
	dropped, drops := m.droppedLiveMemberLocked(v)
	switch {
	case m.refusal.isolated != "":
		reason = "this node is isolated: " + m.refusal.isolated
	case m.refusedLocked(from.Name):
		reason = "the proposer's cluster configuration differs from this node's"
	case p.Epoch <= max(m.promised, m.committed.Epoch):
		reason = "epoch not above what this node promised or committed"
	case !v.Has(m.self):
		reason = "this node (this boot) is not a member of the proposal"
	case p.PrevEpoch < m.committed.Epoch && !m.evicted && !m.committed.Has(from):
		reason = "the proposer is behind and not a member of this node's view"
	case drops:
		reason = "the proposal drops " + dropped.String() + ", a member this node sees up"
	default:
		reason = m.checkProposalConfigLocked(pc, hasConfig, v.Members)
	}
	// A node that missed views is dropped and holds no lease to keep.
	missed := p.PrevEpoch > m.committed.Epoch && !(m.pending != nil && m.pending.Epoch == p.PrevEpoch && m.pending.Has(m.self))
	renew := false
	if reason == "" && !missed && from != m.self {
		// The coordinator waited before proposing (coordinate): were it
		// to refuse itself here, the members would run c and it would not.
		reason = m.renewBeforeAdoptingLocked(pc)
		renew = reason != ""
	}
	adopted := false
	if reason == "" {
		// Stored before the promise leaves: a promise counts towards the
		// new configuration's quorum only once it would survive a crash.
		var err error
		if adopted, err = m.adoptLocked(pc); err != nil {
			reason = err.Error()
			m.log.Error("membership configuration not stored; promise refused", "err", err)
		}
	}
	evicted := false
	if reason == "" {
		switch {
		case missed && m.committed.Epoch == 0:
			// A node that has committed no view in this boot holds no lock
			// state that the views it missed could have made stale: it is
			// joining, not a zombie, and has nothing to drop (the heartbeat
			// path spares it alike). Like an evicted node it coordinates
			// nothing until it is a member.
			m.evicted = true
		case missed:
			evicted = m.evictLocked("views were agreed without this node")
		}
		m.promised, m.pending = p.Epoch, &v
	}
	if len(reason) > wire.MaxErr {
		reason = reason[:wire.MaxErr]
	}
	pr := &wire.Promise{Epoch: p.Epoch, OK: reason == "", Promised: m.promised, Committed: m.committed.Epoch, Reason: reason, Config: m.change.conf.toWire()}
	conf := m.change.conf
	m.mu.Unlock()
	if adopted {
		m.configChanged(conf)
	}
	if evicted {
		m.host.LeaseLost(true)
	}
	if renew {
		m.heartbeat()
	}
	return pr
}

// droppedLiveMemberLocked returns a member of this node's committed view
// that v leaves out while membership here says it is up, in the same boot,
// if there is one.
// After a partition heals, memberlist on the nodes that were cut off may
// report dead, for a while, nodes that are up; once such a node
// coordinates again, its proposals would evict them. Refusing waits for
// membership to agree instead: when a node really fails, every survivor's
// memberlist marks it dead within a gossip round or two of the first (the
// dead message is broadcast), and the coordinator's retry carries the view.
//
// A proposal that names another boot of the member is not dropping it: a
// new boot of the name runs (it must promise for the view to commit), so
// the old one ended, and this node's membership has only not heard of the
// restart yet. Its refutation of the old boot's state may not reach every
// node (memberlist's incarnations are per boot), and waiting for a
// push/pull to bring it would hold every view back meanwhile.
func (m *Manager) droppedLiveMemberLocked(v View) (Member, bool) {
	named := membersHas(v.Members)
	for _, mem := range m.committed.Members {
		// A member the proposal's configuration no longer names is
		// dropped on purpose (a membership change), up or not.
		if mem != m.self && !v.Has(mem) && m.alive[mem.Name] == mem.BootID && v.Config.Has(mem.Name) && !named(mem.Name) {
			return mem, true
		}
	}
	return Member{}, false
}

// onCommit installs a committed view and starts its recovery.
func (m *Manager) onCommit(c *wire.Commit) {
	cc, hasConfig := configFromWire(c.Config)
	m.mu.Lock()
	if !hasConfig && m.change.conf.Version == 0 {
		cc = m.change.conf // as in promise
	}
	v := View{Epoch: c.Epoch, Coordinator: c.Coordinator, Members: fromWire(c.Members), Config: cc}
	// A Commit may arrive (on a transport goroutine, which wg does not
	// count) while the Manager closes. Close closes stop under mu and then
	// waits for wg: a recovery goroutine is counted only under mu with stop
	// open, so no Add comes after that Wait began.
	if c.Epoch <= m.committed.Epoch || m.stopped() {
		m.mu.Unlock()
		return
	}
	m.highest = max(m.highest, c.Epoch)
	m.promised = max(m.promised, c.Epoch)
	adopted, err := m.adoptLocked(cc)
	if err != nil {
		m.log.Error("membership configuration of a committed view not stored", "err", err)
	}
	if adopted {
		defer m.configChanged(cc)
	}
	if m.pending != nil && m.pending.Epoch <= c.Epoch {
		m.pending = nil
	}
	if !v.Has(m.self) {
		evicted := m.evictLocked("committed view without this node")
		m.mu.Unlock()
		if evicted {
			m.host.LeaseLost(true)
		}
		return
	}
	// Members removed since the last view recovered here, not only since
	// the last committed one: a view that aborts a recovery before its
	// lock-delay ran out must wait it out in turn.
	prev := m.recoveredView
	m.committed, m.evicted = v, false
	m.agreedLocked(v.Epoch)
	if m.run != nil {
		m.run.cancel() // a newer view aborts the recovery under way
	}
	m.barrier = barrier{epoch: v.Epoch, statuses: map[string]uint8{}}
	r := m.startRunLocked(prev, v)
	// One run at a time: the host's calls of two views never overlap. The
	// aborted run ends at its next step (or after the one it is in).
	wait, done := m.runDone, make(chan struct{})
	m.runDone = done
	m.met.epoch.Set(float64(v.Epoch))
	m.wg.Add(1) // under mu, after the check of stop above: see there
	m.mu.Unlock()
	m.log.Info("view committed", "view", v.String(), "removed", Removed(prev, v))
	go func() {
		defer m.wg.Done()
		defer close(done)
		// A heartbeat now rather than at the next tick: peers that
		// committed the view acknowledge this node as a member at once, so
		// a node that lost its lease with the quorum (or has never held
		// one) holds it again as soon as a quorum committed. On the
		// coordinator this follows the Commits on the same links, which
		// every member handles first.
		m.heartbeat()
		if wait != nil {
			<-wait
		}
		m.recover(r)
	}()
}
