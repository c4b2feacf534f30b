package dlm

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/internal/promreg"
	"github.com/seed-a6839e30/dlm/recovery"
	"github.com/seed-a6839e30/dlm/transport/membership"
)

// Agreement on the cluster configuration. Every node gossips, in its
// membership tags, a fingerprint of the configuration it runs with: the
// member set with its version, and a hash of the settings every node must
// share (the lease timing, on which the lock-delay's arithmetic rests, and
// the lockspaces' limits). A peer whose fingerprint conflicts with this
// node's (other settings, or another member set at the same version) is
// refused: recovery keeps it out of every view and quorum. Configurations
// of different versions do not conflict: the older one is a node that has
// not learned a change yet, and learns it when it is next taken into a
// view.
//
// Refusal alone cannot stop a node whose own list makes it a quorum by
// itself from serving alone: if several configurations conflict, the one
// fewer nodes advertise is the odd one out, and a node that finds itself
// on that side isolates itself (takes no part in views, holds no lease)
// until it is restarted with the cluster's configuration. On a tie both
// sides stop until one side grows. See docs/design/membership-changes.md.

// Tag keys of the fingerprint; Config.Tags may not use the "dlm." prefix.
const (
	tagPrefix   = "dlm."
	configTag   = "dlm.conf" // "<version>-<hash of the member set>"
	settingsTag = "dlm.set"  // hash of the settings that must match
)

// fingerprint is what a node advertises of its configuration.
type fingerprint struct {
	version  uint64
	members  uint64 // hash of the sorted member names
	settings uint64
}

func (f fingerprint) String() string {
	return fmt.Sprintf("members %016x version %d, settings %016x", f.members, f.version, f.settings)
}

// conflicts reports why two fingerprints cannot be in one cluster, "" if
// they can.
func (f fingerprint) conflicts(o fingerprint) string {
	switch {
	case f.settings != o.settings:
		return "its lease timing or lockspace limits differ"
	case f.version == o.version && f.members != o.members:
		return "its member list differs at the same configuration version"
	}
	return ""
}

func (f fingerprint) tags() map[string]string {
	return map[string]string{
		configTag:   strconv.FormatUint(f.version, 10) + "-" + strconv.FormatUint(f.members, 16),
		settingsTag: strconv.FormatUint(f.settings, 16),
	}
}

func parseFingerprint(tags map[string]string) (fingerprint, bool) {
	var f fingerprint
	v, h, ok := strings.Cut(tags[configTag], "-")
	if !ok {
		return f, false
	}
	var err1, err2, err3 error
	f.version, err1 = strconv.ParseUint(v, 10, 64)
	f.members, err2 = strconv.ParseUint(h, 16, 64)
	f.settings, err3 = strconv.ParseUint(tags[settingsTag], 16, 64)
	return f, err1 == nil && err2 == nil && err3 == nil
}

// membersHash hashes a member set, whatever the order it is listed in.
func membersHash(names []string) uint64 {
	names = slices.Clone(names)
	slices.Sort(names)
	d := xxhash.New()
	var b [8]byte
	for _, name := range names {
		binary.LittleEndian.PutUint64(b[:], uint64(len(name)))
		_, _ = d.Write(b[:])
		_, _ = d.WriteString(name)
	}
	return d.Sum64()
}

// settingsHash hashes the settings every node must share.
func (c *Config) settingsHash() uint64 {
	var sb strings.Builder
	fmt.Fprintf(&sb, "lease=%d drift=%g default=%+v", c.Lease, c.ClockDrift, c.DefaultLockspace)
	for _, name := range slices.Sorted(maps.Keys(c.Lockspaces)) {
		fmt.Fprintf(&sb, " %q=%+v", name, c.Lockspaces[name])
	}
	return xxhash.Sum64String(sb.String())
}

// advertisedTags are the tags the node gossips: Config.Tags and the
// fingerprint.
func (c *Config) advertisedTags(f fingerprint) map[string]string {
	out := maps.Clone(c.Tags)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, f.tags())
	return out
}

// validateTags checks that Config.Tags leave room for the fingerprint.
func (c *Config) validateTags(bad func(string, ...any)) {
	for k := range c.Tags {
		if strings.HasPrefix(k, tagPrefix) {
			bad("Tags: key %q: the %q prefix is dlm's own", k, tagPrefix)
			return
		}
	}
	worst := fingerprint{version: ^uint64(0), members: ^uint64(0), settings: ^uint64(0)}
	if err := membership.ValidateTags(c.advertisedTags(worst)); err != nil {
		bad("Tags: with dlm's own tags: %v", err)
	}
}

// agreement is the node's side: what each peer advertises and which are
// refused.
type agreement struct {
	mu       sync.Mutex
	mine     fingerprint
	peers    map[string]fingerprint // live peers that advertise one
	refused  map[string]string      // peer → why
	isolated string                 // why this node is the odd one out
	sticky   bool                   // outnumbered, not a tie: until restarted
	ms       *membership.Membership // set once membership started
	retag    chan struct{}          // the fingerprint changed: gossip it

	refusedGauge  prometheus.Gauge
	isolatedGauge prometheus.Gauge
	mismatches    prometheus.Counter
	group         *promreg.Group
}

func (n *Node) initAgreement() error {
	a := &n.agree
	a.mine = fingerprint{version: 0, members: configHash(recovery.NewConfiguration(0, n.cfg.Members)), settings: n.cfg.settingsHash()}
	a.peers, a.refused = map[string]fingerprint{}, map[string]string{}
	a.retag = make(chan struct{}, 1)
	a.refusedGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "dlm_config_refused_peers",
		Help: "Peers refused from views and quorums because their cluster configuration differs from this node's."})
	a.isolatedGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "dlm_config_isolated",
		Help: "1 while this node is the odd one out: its configuration differs from the one more nodes run; it does not serve."})
	a.mismatches = prometheus.NewCounter(prometheus.CounterOpts{Name: "dlm_config_mismatches_total",
		Help: "Times a peer was found advertising a cluster configuration that conflicts with this node's."})
	var err error
	a.group, err = promreg.Register(n.cfg.Registerer, a.refusedGauge, a.isolatedGauge, a.mismatches)
	return err
}

// agreeOn takes a membership event before anything else sees it, and
// reports whether the peer may count (its configuration agrees).
func (n *Node) agreeOn(ev membership.Event) bool {
	if n.knobs.noAgreement {
		return true
	}
	a := &n.agree
	name := ev.Member.Name
	a.mu.Lock()
	if ev.Kind == membership.Leave {
		delete(a.peers, name)
	} else {
		f, ok := parseFingerprint(ev.Member.Tags)
		if !ok {
			// A node that advertises none cannot be shown to agree.
			f = fingerprint{settings: ^a.mine.settings}
		}
		a.peers[name] = f
	}
	a.mu.Unlock()
	n.reagree()
	a.mu.Lock()
	_, refused := a.refused[name]
	a.mu.Unlock()
	return !refused
}

// reagree judges every live peer's fingerprint against this node's and
// tells recovery who is refused, whether this node is isolated, and the
// newest configuration version advertised.
func (n *Node) reagree() {
	if n.knobs.noAgreement {
		return
	}
	a := &n.agree
	type change struct {
		name, why string
		refuse    bool
	}
	var changes []change
	var newest uint64
	a.mu.Lock()
	for peer, f := range a.peers {
		why := a.mine.conflicts(f)
		old, was := a.refused[peer]
		switch {
		case why != "" && !was:
			a.refused[peer] = why
			a.mismatches.Inc()
			changes = append(changes, change{peer, why + " (" + f.String() + ")", true})
		case why == "" && was:
			delete(a.refused, peer)
			changes = append(changes, change{name: peer, why: old})
		}
		if why == "" {
			newest = max(newest, f.version)
		}
	}
	for peer := range a.refused {
		if _, live := a.peers[peer]; !live {
			delete(a.refused, peer) // gone: judged again when it comes back
		}
	}
	if a.sticky && newest > a.mine.version {
		// The cluster has moved on to a newer configuration: this node's
		// own no longer counts, and it is taken in (learning the new one)
		// or not by the cluster's coordinator.
		a.sticky = false
	}
	isolated, wasIsolated := a.oddOneOutLocked(), a.isolated
	a.isolated = isolated
	a.refusedGauge.Set(float64(len(a.refused)))
	a.isolatedGauge.Set(b2f(isolated != ""))
	mine := a.mine
	a.mu.Unlock()

	n.rec.NoteAdvertised(newest)
	for _, c := range changes {
		if c.refuse {
			n.log.Error("peer refused: its cluster configuration differs from this node's; it is kept out of views and quorums",
				"peer", c.name, "why", c.why, "ours", mine.String())
			n.rec.RefusePeer(c.name)
		} else {
			n.log.Info("peer accepted: its cluster configuration now agrees", "peer", c.name)
			n.rec.AcceptPeer(c.name)
		}
	}
	if isolated != wasIsolated {
		if isolated != "" {
			n.log.Error("this node's cluster configuration is the odd one out; it does not serve", "why", isolated, "ours", mine.String())
		}
		n.rec.Isolate(isolated)
	}
}

// oddOneOutLocked: this node is isolated if the nodes advertising one
// conflicting configuration outnumber those that agree with it (itself
// included), or tie with them. Being outnumbered sticks until restart; a
// tie lasts while it does.
func (a *agreement) oddOneOutLocked() string {
	if a.sticky {
		return a.isolated
	}
	agree := 1
	others := map[fingerprint]int{}
	for peer, f := range a.peers {
		if _, refused := a.refused[peer]; refused {
			others[f]++
		} else {
			agree++
		}
	}
	for f, count := range others {
		switch {
		case count > agree:
			a.sticky = true
			return fmt.Sprintf("%d peers run another configuration (%v), %d run this one; restart this node with the cluster's configuration", count, f, agree)
		case count == agree:
			return fmt.Sprintf("as many peers run another configuration (%v) as run this one (%d): waiting until one side is larger", f, agree)
		}
	}
	return ""
}

// ConfigRefused returns the peers this node refuses for their cluster
// configuration, with why, and why this node itself is isolated ("" if it
// is not).
func (n *Node) ConfigRefused() (peers map[string]string, isolated string) {
	a := &n.agree
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.refused), a.isolated
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
