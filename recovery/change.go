package recovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/seed-a6839e30/dlm/internal/seam"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Online membership changes by joint consensus. The coordinator moves the
// cluster from configuration C (version v) to a new member set N in two
// agreed steps:
//
//	v+1: joint (N, old C): a view needs a majority of C and one of N
//	v+2: N alone
//
// Each step is a view proposed under the new configuration: a member
// stores the configuration (Config.StateDir) before it promises, and
// refuses proposals under an older version or under another configuration
// of the same version. The coordinator proposes step v+2 only once the
// view of step v+1 has completed its recovery here, and a new change only
// once the previous one is complete. Every quorum of one step overlaps
// every quorum of the steps next to it, and a node that stored a step
// refuses the step before, so no two views of non-overlapping
// configurations are ever served at once. A coordinator that crashes
// between the steps leaves the joint configuration stored on a majority of
// both sets; whichever node coordinates next finds it (in its own store or
// in the promises it is refused with) and completes the change. The
// argument in full is in docs/design/membership-changes.md.

// Errors of ChangeMembers.
var (
	// ErrNotCoordinator: changes are made by the coordinator of the
	// current view; the error names it.
	ErrNotCoordinator = errors.New("recovery: not the coordinator")
	// ErrChangeInProgress: another change is under way.
	ErrChangeInProgress = errors.New("recovery: a membership change is in progress")
	// ErrBadChange: the new member set is not one the cluster can move to.
	ErrBadChange = errors.New("recovery: bad membership change")
)

// NotCoordinatorError is the ErrNotCoordinator error: it names the node
// that coordinates ("" if none is known).
type NotCoordinatorError struct{ Coordinator string }

func (e *NotCoordinatorError) Error() string {
	if e.Coordinator == "" {
		return "recovery: not the coordinator (none is known yet)"
	}
	return fmt.Sprintf("recovery: not the coordinator; %s is", e.Coordinator)
}

func (e *NotCoordinatorError) Is(target error) bool { return target == ErrNotCoordinator }

// change is the Manager's state of membership changes.
type change struct {
	conf   Configuration // the configuration this node runs with
	target []string      // a change asked for here, until done
	newest uint64        // highest configuration version a peer advertises
	// renew: the configuration this node waits to adopt (promise or
	// propose under) until its lease holds under it too, and until when
	// it waits (renewBeforeAdoptingLocked).
	renew struct {
		version uint64
		until   time.Time
	}
	// noJoint: the control experiment's seam: move straight from the old
	// set to the new one. Unsafe.
	noJoint bool
}

// Configuration returns the configuration this node runs with.
func (m *Manager) Configuration() Configuration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.change.conf
}

// NoteAdvertised tells the Manager the configuration version a peer
// advertises: a node that sees a newer version than its own proposes
// nothing until it has learned it (it does when it is next taken into a
// view), so that a node restarted without its state cannot form a view
// under the configuration it was started with.
func (m *Manager) NoteAdvertised(version uint64) {
	m.mu.Lock()
	m.change.newest = max(m.change.newest, version)
	m.mu.Unlock()
}

// ChangeMembers moves the cluster to the member set members, through the
// joint configuration of the old and new sets, and returns the new
// configuration once a view under it has recovered here. It must be called
// on the coordinator (else a *NotCoordinatorError, naming it). If ctx ends
// before the joint step was agreed the change is dropped; after that the
// cluster completes it even if this node fails.
func (m *Manager) ChangeMembers(ctx context.Context, members []string) (Configuration, error) {
	target := sortNames(members)
	if err := (Configuration{Members: target}).validate(); err != nil {
		return Configuration{}, fmt.Errorf("%w: %v", ErrBadChange, err)
	}
	m.mu.Lock()
	c := m.change.conf
	switch {
	case !m.isCoordinatorLocked() || m.committed.Epoch == 0:
		coord := m.coordinatorLocked()
		m.mu.Unlock()
		return Configuration{}, &NotCoordinatorError{Coordinator: coord}
	case c.Joint() || (m.change.target != nil && !slices.Equal(m.change.target, target)):
		m.mu.Unlock()
		return Configuration{}, fmt.Errorf("%w: the cluster is moving to %v", ErrChangeInProgress, c)
	case !c.Joint() && slices.Equal(c.Members, target):
		m.mu.Unlock()
		return c, nil
	}
	up := func(name string) bool { _, ok := m.alive[name]; return ok }
	if !(Configuration{Members: target}).Quorate(up) {
		m.mu.Unlock()
		return Configuration{}, fmt.Errorf("%w: fewer than a majority of %v are up; the change could not complete", ErrBadChange, target)
	}
	m.change.target = target
	start := c.Version
	m.mu.Unlock()
	m.log.Info("membership change asked", "from", c.String(), "to", target)

	t := time.NewTicker(m.cfg.CoordinatorInterval)
	defer t.Stop()
	for {
		m.mu.Lock()
		c := m.change.conf
		done := !c.Joint() && c.Version > start && m.committed.Config.Equal(c) && m.resumed == m.committed.Epoch
		// A node that removed itself serves no view of the new set: it
		// adopted that set from the view's commit (it promises no view
		// without itself), so a quorum agreed it.
		done = done || (!c.Joint() && c.Version > start && !c.Has(m.self.Name))
		if done || c.Version > start+2 {
			m.change.target = nil
			m.mu.Unlock()
			if !slices.Equal(c.Members, target) {
				return c, fmt.Errorf("%w: the cluster moved to %v", ErrChangeInProgress, c)
			}
			return c, nil
		}
		if c.Version == start && !m.isCoordinatorLocked() {
			m.change.target = nil
			coord := m.coordinatorLocked()
			m.mu.Unlock()
			return Configuration{}, &NotCoordinatorError{Coordinator: coord}
		}
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			m.mu.Lock()
			if m.change.conf.Version == start {
				m.change.target = nil
			}
			m.mu.Unlock()
			return Configuration{}, ctx.Err()
		case <-m.stop:
			return Configuration{}, errors.New("recovery: closed")
		case <-t.C:
		}
	}
}

// nextConfigLocked is the configuration the coordinator proposes under:
// its own, or the next step of a change once the view of its own has
// recovered.
func (m *Manager) nextConfigLocked() Configuration {
	c := m.change.conf
	if m.committed.Epoch == 0 || !m.committed.Config.Equal(c) || m.resumed != m.committed.Epoch {
		return c
	}
	if c.Joint() {
		return Configuration{Version: c.Version + 1, Members: c.Members}
	}
	if t := m.change.target; t != nil && !slices.Equal(t, c.Members) {
		if m.change.noJoint {
			return Configuration{Version: c.Version + 2, Members: t}
		}
		return Configuration{Version: c.Version + 1, Members: t, Old: c.Members}
	}
	return c
}

// adoptLocked makes c this node's configuration if it is newer, storing it
// first. It reports whether it changed; the caller tells the host after
// unlocking (m.configChanged).
func (m *Manager) adoptLocked(c Configuration) (bool, error) {
	if c.Version <= m.change.conf.Version {
		return false, nil
	}
	if dir := m.cfg.StateDir; dir != "" {
		if err := saveState(dir, c); err != nil {
			return false, fmt.Errorf("recovery: storing the membership configuration: %w", err)
		}
	}
	m.change.conf = c
	m.met.configVersion.Set(float64(c.Version))
	return true, nil
}

// configChanged tells the host and the log of a configuration adopted.
func (m *Manager) configChanged(c Configuration) {
	m.log.Info("membership configuration adopted", "config", c.String())
	if f := m.cfg.OnConfiguration; f != nil {
		f(c)
	}
}

// checkProposalConfigLocked says why this node cannot promise a view of
// members under c, "" if it can.
func (m *Manager) checkProposalConfigLocked(c Configuration, ok bool, members []Member) string {
	mine := m.change.conf
	switch {
	case !ok:
		return "the proposal carries no configuration"
	case c.Version < mine.Version:
		return fmt.Sprintf("the proposal's configuration (v%d) is older than this node's (v%d)", c.Version, mine.Version)
	case c.Version == mine.Version && !c.Equal(mine):
		return fmt.Sprintf("the proposal's configuration %v differs from this node's %v", c, mine)
	case c.validate() != nil:
		return "the proposal's configuration is malformed"
	}
	for _, mem := range members {
		if !c.Has(mem.Name) {
			return "the proposal has a member its configuration does not name"
		}
	}
	in := func(name string) bool {
		_, ok := slices.BinarySearchFunc(members, name, func(a Member, n string) int { return compareNames(a.Name, n) })
		return ok
	}
	if !c.Quorate(in) {
		return "the proposal's members are not a quorum of its configuration"
	}
	return ""
}

// renewBeforeAdoptingLocked says why this node does not adopt
// configuration c yet ("" if it does): a member does not promise a view
// under c, the coordinator does not propose one. A node holding its lease
// waits while adopting c would cost it the lease (leaseShortUnderLocked)
// and the peers of its committed view that are up, acknowledging the
// heartbeats it sends now, would renew it under c: the coordinator asks
// again after its back-off, by when they have. A peer that is not in
// that view (a new member already up) acknowledges it as a member only
// once a view under c commits, so when c's quorum needs such a peer
// waiting cannot help, and the node adopts c at once, without the lease:
// its locks are fenced as for any lease lost. It waits for one Lease at
// most per configuration, should the acknowledgements not come.
func (m *Manager) renewBeforeAdoptingLocked(c Configuration) string {
	now := time.Now()
	if !m.leaseShortUnderLocked(c, now) {
		return ""
	}
	could := func(name string) bool {
		if name == m.self.Name {
			return true
		}
		boot, up := m.alive[name]
		return up && m.committed.Has(Member{Name: name, BootID: boot}) && !m.refusedLocked(name)
	}
	if !c.Quorate(could) {
		return ""
	}
	w := &m.change.renew
	if w.version != c.Version {
		w.version, w.until = c.Version, now.Add(m.cfg.Lease)
	}
	if !now.Before(w.until) {
		m.log.Warn("adopting a configuration under which this node's lease does not hold", "config", c.String())
		return ""
	}
	return fmt.Sprintf("this node's lease does not hold under v%d yet: renewing it first", c.Version)
}

func compareNames(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// learnFromPromise: a member that refused because it runs a newer
// configuration tells which; the coordinator adopts it and proposes under
// it next time.
func (m *Manager) learnFromPromise(w wire.ViewConfig) {
	c, ok := configFromWire(w)
	if !ok || c.validate() != nil {
		return
	}
	m.mu.Lock()
	changed, err := m.adoptLocked(c)
	m.mu.Unlock()
	if err != nil {
		m.log.Error("membership configuration not stored", "err", err)
	}
	if changed {
		m.configChanged(c)
	}
}

func (m *Manager) initChange(host Host) error {
	m.change.conf = NewConfiguration(0, m.cfg.Members)
	if s, ok := host.(seam.NoJointConsensus); ok {
		m.change.noJoint = s.NoJointConsensus(seam.Key{})
	}
	if m.cfg.StateDir == "" {
		return nil
	}
	c, ok, err := loadState(m.cfg.StateDir)
	if err != nil {
		return err
	}
	if ok {
		m.change.conf = c
		if !c.Has(m.cfg.Name) {
			m.log.Warn("this node is not a member of its stored configuration; it will not join a view", "config", c.String())
		}
	}
	m.met.configVersion.Set(float64(m.change.conf.Version))
	return nil
}

// Coordinator names the node that coordinates as this node sees it ("" before
// the first view): the lowest-named member of the committed view that is up,
// which is the view's proposer until it fails or is removed.
func (m *Manager) Coordinator() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.committed.Epoch == 0 {
		return ""
	}
	return m.coordinatorLocked()
}

// coordinatorLocked names the node that coordinates as this node sees it:
// the lowest-named member of the committed view that membership says is up
// (the view's proposer may have handed over since).
func (m *Manager) coordinatorLocked() string {
	for _, mem := range m.committed.Members { // sorted by name
		if mem == m.self || m.alive[mem.Name] == mem.BootID {
			return mem.Name
		}
	}
	return m.committed.Coordinator
}
