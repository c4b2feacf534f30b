package dlm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/seed-a6839e30/dlm/internal/seam"
	"github.com/seed-a6839e30/dlm/recovery"
)

// MembershipConfig is the cluster's member set as this node runs it. Each
// change raises Version by two: first to a joint configuration (Old is the
// set before; a quorum is then a majority of Members and one of Old), then
// to Members alone. Version 0 is Config.Members.
type MembershipConfig struct {
	Version uint64   `json:"version"`
	Members []string `json:"members"`
	Old     []string `json:"old,omitempty"`
}

// Joint reports whether a change is half done.
func (c MembershipConfig) Joint() bool { return len(c.Old) > 0 }

// Errors of the membership changes.
var (
	// ErrNotCoordinator: changes are made on the view's coordinator; the
	// error is a *NotCoordinatorError, which names it.
	ErrNotCoordinator = errors.New("dlm: not the coordinator")
	// ErrChangeInProgress: another membership change is under way.
	ErrChangeInProgress = errors.New("dlm: a membership change is in progress")
	// ErrBadChange: the change asked for is not one the cluster can make
	// (a member added twice, one removed that is not there, a new set with
	// fewer than a majority up).
	ErrBadChange = errors.New("dlm: bad membership change")
	// ErrBadMemberName: the name given for a new member is not one a
	// member can have (empty, too long). It is an ErrBadChange too.
	ErrBadMemberName = fmt.Errorf("%w: bad member name", ErrBadChange)
)

// NotCoordinatorError is returned by the membership changes on a node that
// does not coordinate; Coordinator is the node that does ("" if unknown).
type NotCoordinatorError struct{ Coordinator string }

func (e *NotCoordinatorError) Error() string {
	if e.Coordinator == "" {
		return "dlm: not the coordinator (none is known yet)"
	}
	return fmt.Sprintf("dlm: not the coordinator; ask %s", e.Coordinator)
}

// Is makes errors.Is(err, ErrNotCoordinator) true.
func (e *NotCoordinatorError) Is(target error) bool { return target == ErrNotCoordinator }

// Membership returns the member set this node runs with.
func (n *Node) Membership() MembershipConfig { return fromRecoveryConfig(n.rec.Configuration()) }

// AddMember adds a node to the cluster and returns the new configuration
// once the cluster runs it. Call it on the coordinator (Status().Coordinator),
// then start the new node (with any member list naming it, and the seeds of
// the cluster): it learns the configuration when it is taken into a view.
// It adds a member to a quorum's worth of nodes that must be up: adding to
// a cluster of 2k+1 needs k+1 of the old members up, as any view does.
func (n *Node) AddMember(ctx context.Context, name string) (MembershipConfig, error) {
	if err := checkMemberName(name); err != nil {
		return MembershipConfig{}, err
	}
	cur := n.rec.Configuration()
	if cur.Has(name) && !cur.Joint() {
		return MembershipConfig{}, fmt.Errorf("%w: %s is a member already", ErrBadChange, name)
	}
	return n.changeMembers(ctx, append(slices.Clone(cur.Members), name))
}

// RemoveMember removes a node from the cluster (decommissioning it, or one
// that died for good). The node's locks are released as when it fails: it
// is left out of the next view, and what it held is re-granted after the
// lock-delay. A removed node that still runs serves no more views (its
// state is StateNoQuorum): Close it. The coordinator may remove itself;
// the call returns once the others run the new set.
func (n *Node) RemoveMember(ctx context.Context, name string) (MembershipConfig, error) {
	cur := n.rec.Configuration()
	if !slices.Contains(cur.Members, name) {
		return MembershipConfig{}, fmt.Errorf("%w: %s is not a member", ErrBadChange, name)
	}
	return n.changeMembers(ctx, slices.DeleteFunc(slices.Clone(cur.Members), func(m string) bool { return m == name }))
}

// ReplaceMember puts node neu in old's place in one change: the way to
// replace a dead host, keeping the cluster's size (and so its tolerance of
// failures) throughout.
func (n *Node) ReplaceMember(ctx context.Context, old, neu string) (MembershipConfig, error) {
	if err := checkMemberName(neu); err != nil {
		return MembershipConfig{}, err
	}
	cur := n.rec.Configuration()
	switch {
	case !slices.Contains(cur.Members, old):
		return MembershipConfig{}, fmt.Errorf("%w: %s is not a member", ErrBadChange, old)
	case slices.Contains(cur.Members, neu):
		return MembershipConfig{}, fmt.Errorf("%w: %s is a member already", ErrBadChange, neu)
	}
	next := slices.DeleteFunc(slices.Clone(cur.Members), func(m string) bool { return m == old })
	return n.changeMembers(ctx, append(next, neu))
}

func checkMemberName(name string) error {
	c := Config{Name: name, Members: []string{name}}
	var bad []string
	c.validateMembers(func(f string, a ...any) { bad = append(bad, fmt.Sprintf(f, a...)) })
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrBadMemberName, bad[0])
	}
	return nil
}

func (n *Node) changeMembers(ctx context.Context, members []string) (MembershipConfig, error) {
	if n.closed.Load() {
		return MembershipConfig{}, ErrClosed
	}
	for _, m := range members {
		for _, o := range members {
			if m != o && nodeID(m) == nodeID(o) {
				return MembershipConfig{}, fmt.Errorf("%w: members %q and %q hash to the same node id; rename one", ErrBadChange, m, o)
			}
		}
	}
	c, err := n.rec.ChangeMembers(ctx, members)
	var nc *recovery.NotCoordinatorError
	switch {
	case errors.As(err, &nc):
		return MembershipConfig{}, &NotCoordinatorError{Coordinator: nc.Coordinator}
	case errors.Is(err, recovery.ErrChangeInProgress):
		return MembershipConfig{}, fmt.Errorf("%w: %v", ErrChangeInProgress, err)
	case errors.Is(err, recovery.ErrBadChange):
		return MembershipConfig{}, fmt.Errorf("%w: %v", ErrBadChange, err)
	case err != nil:
		return MembershipConfig{}, fmt.Errorf("dlm: membership change: %w", err)
	}
	return fromRecoveryConfig(c), nil
}

func fromRecoveryConfig(c recovery.Configuration) MembershipConfig {
	return MembershipConfig{Version: c.Version, Members: slices.Clone(c.Members), Old: slices.Clone(c.Old)}
}

// onConfiguration: recovery adopted a configuration (stored already). The
// node advertises it and judges its peers against it. It runs on
// recovery's goroutines and must not block.
func (n *Node) onConfiguration(c recovery.Configuration) {
	a := &n.agree
	a.mu.Lock()
	a.mine.version, a.mine.members = c.Version, configHash(c)
	a.mu.Unlock()
	n.log.Info("cluster configuration changed", "config", c.String())
	n.reagree()
	select {
	case a.retag <- struct{}{}:
	default: // one is pending: it will gossip the latest
	}
}

// retagLoop gossips the node's fingerprint again whenever its
// configuration changes.
func (n *Node) retagLoop() {
	a := &n.agree
	for {
		select {
		case <-n.closing:
			return
		case <-a.retag:
		}
		a.mu.Lock()
		ms, tags := a.ms, n.cfg.advertisedTags(a.mine)
		a.mu.Unlock()
		if ms == nil {
			continue
		}
		if err := ms.SetTags(tags, 5*n.cfg.ProbeInterval); err != nil {
			n.log.Warn("new configuration not advertised yet", "err", err)
		}
	}
}

// configHash is the fingerprint's hash of a configuration's member sets.
func configHash(c recovery.Configuration) uint64 {
	h := membersHash(c.Members)
	if c.Joint() {
		h ^= membersHash(append([]string{"\x00old"}, c.Old...)) * 0x9e3779b97f4a7c15
	}
	return h
}

// prepareDataDir makes Config.DataDir if it does not exist.
func (c *Config) prepareDataDir() error {
	if c.DataDir == "" {
		return nil
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return fmt.Errorf("dlm: DataDir: %w", err)
	}
	return nil
}

// NoJointConsensus is recovery's seam for the joint step of membership
// changes (seam.NoJointConsensus), which the control experiment switches
// off.
func (h recoveryHost) NoJointConsensus(seam.Key) bool { return h.n.knobs.noJointConsensus }
