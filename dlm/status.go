package dlm

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/recovery"
)

// NodeState says what a node is doing, as Status reports it.
type NodeState string

// Node states, from the least to the most able to serve.
const (
	// StateClosed: Close or Halt was called.
	StateClosed NodeState = "closed"
	// StateStarting: the node has not yet completed the recovery of a
	// view: it is joining the cluster.
	StateStarting NodeState = "starting"
	// StateNoQuorum: the node lost its quorum lease (it cannot reach a
	// majority of the configured members, or the cluster agreed a view
	// without it). Lock calls fail with ErrNoQuorum.
	StateNoQuorum NodeState = "no_quorum"
	// StateRecovering: the node takes part in a view's recovery with no
	// lock state of its own (it was left out of a view, or found it missed
	// one, and rejoins with nothing): lock calls wait for the recovery to
	// end. During the recovery of a view in which it keeps its lock state a
	// node stays StateServing: calls on the resources that change master
	// wait for the recovery, the others go on (dlm_recovery_moving_buckets
	// says how many buckets move).
	StateRecovering NodeState = "recovering"
	// StateServing: the node grants and holds locks.
	StateServing NodeState = "serving"
)

// Status is what a node says about itself and about the cluster as it
// sees it, for operators: dlmnode's /v1/status serves it as JSON.
// Durations are in nanoseconds in JSON.
type Status struct {
	Name      string    `json:"name"`
	ClusterID string    `json:"cluster_id"`
	BootID    uint64    `json:"boot_id"`
	Started   time.Time `json:"started"`
	State     NodeState `json:"state"`
	// Epoch is the epoch of the view this node is in (0 before the first)
	// and Coordinator the node that coordinates it: the lowest-named
	// member of the view that is up (its proposer, until that one fails or
	// is removed from the cluster).
	Epoch       uint64 `json:"epoch"`
	Coordinator string `json:"coordinator,omitempty"`
	// Quorum is how many members of Membership.Members a view needs (while
	// a change is half done, a majority of Membership.Old too); HasQuorum says
	// whether this node holds its quorum lease.
	Quorum    int  `json:"quorum"`
	HasQuorum bool `json:"has_quorum"`
	// Members lists every member of the configuration (both sets while a
	// change is half done), by name.
	Members []MemberStatus `json:"members"`
	// Membership is the member set in force and its version (see
	// Node.AddMember).
	Membership MembershipConfig `json:"membership"`
	// Lockspaces are this node's lockspaces, by name.
	Lockspaces []LockspaceStatus `json:"lockspaces"`
	// Recoveries are the latest recoveries completed here, newest first
	// (at most HistoryLen).
	Recoveries []RecoveryRecord `json:"recoveries"`
	// Deadlocks are the latest deadlocks broken on this node's tables,
	// newest first (at most HistoryLen).
	Deadlocks []DeadlockRecord `json:"deadlocks"`
}

// HistoryLen is how many recoveries and deadlocks Status remembers.
const HistoryLen = 16

// MemberStatus is one configured member as this node sees it.
type MemberStatus struct {
	Name string `json:"name"`
	Self bool   `json:"self,omitempty"`
	// Live says membership (the failure detector) sees the member up;
	// InView that it is a member of this node's current view.
	Live   bool `json:"live"`
	InView bool `json:"in_view"`
	// BootID, GossipAddr, LinkAddr and Tags are what the member gossips
	// about itself; empty while it is not live.
	BootID     uint64            `json:"boot_id,omitempty"`
	GossipAddr string            `json:"gossip_addr,omitempty"`
	LinkAddr   string            `json:"link_addr,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
}

// LockspaceStatus counts one lockspace's locks on this node.
type LockspaceStatus struct {
	Name string `json:"name"`
	// Resources and Locks are what this node masters; of those locks,
	// Granted hold a mode (Converting of them also wait to convert) and
	// Waiting wait for a first grant.
	Resources  int `json:"resources"`
	Locks      int `json:"locks"`
	Granted    int `json:"granted"`
	Converting int `json:"converting"`
	Waiting    int `json:"waiting"`
	// Held and Requests are this node's own locks, whoever masters them:
	// locks holding a mode, and requests or conversions in flight.
	Held     int `json:"held"`
	Requests int `json:"requests"`
	// MostWaiters are the mastered resources with the most queued
	// requests and conversions, most first (at most TopWaiters).
	MostWaiters []ResourceWaiters `json:"most_waiters,omitempty"`
}

// TopWaiters is how many contended resources a LockspaceStatus lists.
const TopWaiters = 5

// ResourceWaiters is a contended resource and how many requests and
// conversions are queued on it.
type ResourceWaiters struct {
	Resource string `json:"resource"`
	Queued   int    `json:"queued"`
}

// RecoveryRecord is one recovery completed on this node: the view it
// moved to and how long each phase took here.
type RecoveryRecord struct {
	Epoch   uint64    `json:"epoch"`
	Started time.Time `json:"started"`
	// Removed and Added are the members the view dropped and took in (a
	// restarted node is both).
	Removed []string `json:"removed,omitempty"`
	Added   []string `json:"added,omitempty"`
	// Report: suspend and send every report; LockDelay: wait out removed
	// members' leases; Barrier1: wait for every member's reports; Rebuild:
	// restore the tables; Barrier2: wait for every member's rebuild;
	// Total: from the commit to locking re-enabled.
	Report    time.Duration `json:"report_ns"`
	LockDelay time.Duration `json:"lock_delay_ns"`
	Barrier1  time.Duration `json:"barrier1_ns"`
	Rebuild   time.Duration `json:"rebuild_ns"`
	Barrier2  time.Duration `json:"barrier2_ns"`
	Total     time.Duration `json:"total_ns"`
}

// DeadlockKind says how a deadlock was found.
type DeadlockKind string

const (
	// DeadlockConversion: two or more conversions on one resource each
	// waited for the other (found at once by the resource's master).
	DeadlockConversion DeadlockKind = "conversion"
	// DeadlockCycle: a cycle of owners waiting for each other across
	// resources and nodes (found by the detector; see Config.DeadlockWait).
	DeadlockCycle DeadlockKind = "cycle"
)

// DeadlockRecord is one deadlock broken on this node's tables: the request
// failed (or, with CONVDEADLK, the lock demoted) to break it.
type DeadlockRecord struct {
	At        time.Time    `json:"at"`
	Kind      DeadlockKind `json:"kind"`
	Lockspace string       `json:"lockspace"`
	Resource  string       `json:"resource"`
	// Lock and Node name the victim: its lock id and the node it belongs
	// to.
	Lock uint64 `json:"lock"`
	Node string `json:"node"`
	// Detail describes the cycle, or says the lock was demoted.
	Detail string `json:"detail,omitempty"`
}

// history keeps the latest recoveries and deadlocks for Status.
type history struct {
	mu         sync.Mutex
	recoveries []RecoveryRecord // oldest first
	deadlocks  []DeadlockRecord // oldest first
}

// recovered records a completed recovery (recovery.Config.OnRecovered).
func (h *history) recovered(st recovery.Stats) {
	names := func(ms []recovery.Member) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Name)
		}
		return out
	}
	r := RecoveryRecord{
		Epoch: st.Epoch, Started: st.Started, Removed: names(st.Removed), Added: names(st.Added),
		Report: st.Report, LockDelay: st.LockDelay, Barrier1: st.Barrier1, Rebuild: st.Rebuild, Barrier2: st.Barrier2, Total: st.Total,
	}
	h.mu.Lock()
	h.recoveries = appendBounded(h.recoveries, r)
	h.mu.Unlock()
}

func (h *history) deadlock(d DeadlockRecord) {
	h.mu.Lock()
	h.deadlocks = appendBounded(h.deadlocks, d)
	h.mu.Unlock()
}

// noteDeadlock records a deadlock broken on one of this node's tables: the
// request of lock id on resource failed (or its lock was demoted).
func (n *Node) noteDeadlock(kind DeadlockKind, lockspace, resource string, id master.LockID, detail string) {
	n.history.deadlock(DeadlockRecord{
		At: time.Now(), Kind: kind, Lockspace: lockspace, Resource: resource,
		Lock: id.ID, Node: n.view.Load().nodeName(id.Node), Detail: detail,
	})
}

func appendBounded[T any](s []T, v T) []T {
	if len(s) == HistoryLen {
		copy(s, s[1:])
		s = s[:len(s)-1]
	}
	return append(s, v)
}

func (h *history) snapshot() ([]RecoveryRecord, []DeadlockRecord) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, d := slices.Clone(h.recoveries), slices.Clone(h.deadlocks)
	slices.Reverse(r)
	slices.Reverse(d)
	return r, d
}

// Status reports the node's state, its view of the members, the counts of
// each lockspace's locks and the latest recoveries and deadlocks. It costs
// a pass over this node's own locks and over the queued requests of the
// tables it masters (not over every mastered lock), a shard at a time.
func (n *Node) Status() Status {
	vw := n.view.Load()
	st := Status{
		Name: n.cfg.Name, ClusterID: n.cfg.ClusterID, BootID: n.bootID, Started: n.start,
		Epoch: vw.epoch, Membership: n.Membership(),
	}
	st.Quorum = len(st.Membership.Members)/2 + 1
	if vw.epoch != 0 {
		st.Coordinator = n.rec.Coordinator()
	}
	st.State, st.HasQuorum = n.state()
	st.Members = n.memberStatus(vw)
	for _, ls := range n.lockspaceList() {
		st.Lockspaces = append(st.Lockspaces, ls.status())
	}
	st.Recoveries, st.Deadlocks = n.history.snapshot()
	return st
}

// State says what the node is doing, as Status does, at the cost of a
// mutex: what a readiness probe asks.
func (n *Node) State() NodeState {
	s, _ := n.state()
	return s
}

// state returns the node's state and whether it holds its quorum lease.
func (n *Node) state() (NodeState, bool) {
	g := &n.gate
	g.mu.Lock()
	closed, noQuorum, recovering := g.closed, g.noQuorum, !g.joined
	g.mu.Unlock()
	served := false
	if n.rec != nil {
		select {
		case <-n.rec.Served():
			served = true
		default:
		}
	}
	quorum := !noQuorum && !closed
	switch {
	case closed:
		return StateClosed, quorum
	case !served:
		return StateStarting, quorum
	case noQuorum:
		return StateNoQuorum, quorum
	case recovering:
		return StateRecovering, quorum
	}
	return StateServing, quorum
}

func (n *Node) memberStatus(vw *view) []MemberStatus {
	n.mu.Lock()
	alive := maps.Clone(n.alive)
	n.mu.Unlock()
	names := n.rec.Configuration().All()
	out := make([]MemberStatus, 0, len(names))
	for _, name := range names {
		m := MemberStatus{Name: name, InView: vw.byName[name] != nil && vw.epoch != 0}
		switch a, ok := alive[name]; {
		case name == n.cfg.Name:
			m.Self, m.Live, m.BootID, m.LinkAddr, m.Tags = true, !n.closed.Load(), n.bootID, n.self.linkAddr, maps.Clone(n.cfg.Tags)
			if n.ms != nil {
				m.GossipAddr = n.ms.Local().GossipAddr
			}
		case ok:
			m.Live, m.BootID, m.GossipAddr, m.LinkAddr, m.Tags = true, a.BootID, a.GossipAddr, a.LinkAddr, maps.Clone(a.Tags)
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b MemberStatus) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// status counts the lockspace's locks, a shard at a time.
func (ls *Lockspace) status() LockspaceStatus {
	st := LockspaceStatus{Name: ls.name}
	queued := map[string]int{}
	for _, sh := range ls.shards {
		sh.mu.Lock()
		res, locks := sh.table.Len()
		st.Resources += res
		st.Locks += locks
		for l := range sh.table.QueuedLocks() {
			if l.Queue == master.QueueWaiting {
				st.Waiting++
			} else {
				st.Converting++
			}
			queued[l.Resource]++
		}
		for _, lk := range sh.locks {
			switch lk.state {
			case stGranted:
				st.Held++
			case stConverting:
				st.Held++
				st.Requests++
			case stWaiting:
				st.Requests++
			}
		}
		sh.mu.Unlock()
	}
	st.Granted = st.Locks - st.Waiting
	for res, q := range queued {
		st.MostWaiters = append(st.MostWaiters, ResourceWaiters{Resource: res, Queued: q})
	}
	slices.SortFunc(st.MostWaiters, func(a, b ResourceWaiters) int {
		if c := cmp.Compare(b.Queued, a.Queued); c != 0 {
			return c
		}
		return cmp.Compare(a.Resource, b.Resource)
	})
	if len(st.MostWaiters) > TopWaiters {
		st.MostWaiters = st.MostWaiters[:TopWaiters]
	}
	return st
}

// noteConversionDeadlock records a conversion that deadlocked when it was
// made: it failed with err, or (demoted) its lock went to NL instead.
// Caller holds sh.mu. Finding the resource costs a walk of the node's
// locks in the shard, paid only when a deadlock happens.
func (ls *Lockspace) noteConversionDeadlock(sh *shard, id master.LockID, demoted bool, err error) {
	resource := ""
	for l := range sh.table.LocksOf(id.Node) {
		if l.Lock == id {
			resource = l.Resource
			break
		}
	}
	detail := "lock demoted to NL (CONVDEADLK)"
	if !demoted && err != nil {
		detail = err.Error()
	}
	ls.node.noteDeadlock(DeadlockConversion, ls.name, resource, id, detail)
}
