package dlm

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Deadlock detection across resources and nodes; the package documentation
// ("Deadlocks") describes the protocol and why it reports no false
// deadlock. Every node reports (report, collect), the detector of the view
// searches, confirms and fails (accept, detect, confirm, finish), and every
// master answers (confirmEdges, onDeadlockFail). The graph search is in
// waitgraph.go.

// errCycle is wrapped, with master.ErrDeadlock, by the error a request
// failed to break a cycle ends with; it tells the kind for the metrics.
var errCycle = errors.New("cycle of waiting owners")

const (
	// maxCyclesPerRound bounds the cycles one round confirms and breaks;
	// more wait for the next round.
	maxCyclesPerRound = 64
	// deadlockReportBytes caps a report by size as well as by
	// wire.MaxEdges, so that it stays well inside a frame whatever the
	// names; edgeBytes is what an edge costs beyond its names.
	deadlockReportBytes = 256 << 10
	edgeBytes           = 96
	// describeBytes caps the description of a cycle in the victim's error.
	describeBytes = 200
)

// wireMaxName is the longest resource name the links carry (dlm leaves
// the wire limit at its default).
var wireMaxName = wire.DefaultLimits().MaxName

// deadlocks is a node's part in deadlock detection.
type deadlocks struct {
	n        *Node
	interval time.Duration // between reports, and between searches

	// The reporter's state, used by the tick goroutine only.
	nextReport time.Time
	seq        uint64
	reported   bool // the last report carried edges

	mu sync.Mutex
	// The detector's state, kept while this node is the detector of epoch:
	// the latest report of each member, whether one came since the last
	// search, and the round in progress (nil if none).
	epoch      uint64
	reports    map[string]*edgeReport
	changed    bool
	nextSearch time.Time
	round      *round
	stats      deadlockStats
}

type edgeReport struct {
	seq   uint64
	at    time.Time
	edges []wire.WaitEdge
}

// deadlockStats counts what the detector did, for tests and logs.
type deadlockStats struct {
	rounds      int // searches that found a cycle and asked to confirm it
	cycles      int // cycles found
	unconfirmed int // cycles with an edge that did not hold at confirmation
	victims     int // requests the detector asked to fail
}

// A round confirms the cycles of one search and fails their victims.
type round struct {
	epoch    uint64
	cycles   []cycle
	asks     map[string]*ask // the edges to confirm, by master
	pending  int             // asks not answered yet
	deadline time.Time
	done     bool // every ask answered: the victims are being failed
}

type ask struct {
	edges []wire.WaitEdge
	held  []bool
	index map[wire.WaitEdge]int
}

// victim is a request a round decided to fail.
type victim struct {
	master string // the master of its resource
	edge   wire.WaitEdge
	cycle  string // description, for the error and the log
}

func newDeadlocks(n *Node) *deadlocks {
	return &deadlocks{n: n, interval: max(n.cfg.TickInterval, n.cfg.DeadlockWait/4)}
}

// tick runs on the node's tick goroutine.
func (d *deadlocks) tick() {
	if d.n.cfg.DeadlockWait <= 0 {
		return
	}
	now := time.Now()
	if !now.Before(d.nextReport) {
		d.nextReport = now.Add(d.interval)
		d.report()
	}
	d.detect(now)
}

// detector returns the detector of view vw: its lowest-named member.
func detectorOf(vw *view) string { return vw.members[0].name }

// report sends the detector the edges of the requests that have waited
// DeadlockWait on this node's tables; an empty report once they are gone.
func (d *deadlocks) report() {
	n := d.n
	vw := n.view.Load()
	if !n.settled() || n.epoch() != vw.epoch {
		return
	}
	edges, ok := d.collect(vw.epoch)
	if !ok || (len(edges) == 0 && !d.reported) {
		return
	}
	d.reported = len(edges) > 0
	d.seq++
	m := &wire.DeadlockReport{Epoch: vw.epoch, Seq: d.seq, Edges: edges}
	if to := detectorOf(vw); to == n.self.name {
		d.accept(to, m)
	} else if err := n.links.Send(to, m); err != nil {
		n.log.Debug("deadlock report not sent", "detector", to, "err", err)
	}
}

// collect returns the edges of the requests queued DeadlockWait ago or
// earlier on this node's tables, oldest first, at most wire.MaxEdges and
// deadlockReportBytes of them; false if the epoch changed meanwhile.
func (d *deadlocks) collect(epoch uint64) ([]wire.WaitEdge, bool) {
	n := d.n
	now, wait := n.now(), ticks(n.cfg.DeadlockWait)
	if now < wait {
		return nil, true
	}
	type aged struct {
		since master.Tick
		e     wire.WaitEdge
	}
	var all []aged
	for _, ls := range n.lockspaceList() {
		for _, sh := range ls.shards {
			sh.mu.Lock()
			if !n.settled() || n.epoch() != epoch { // the table may be another view's
				sh.mu.Unlock()
				return nil, false
			}
			k := 0
			for e := range sh.table.WaitEdgesQueuedBy(now - wait) {
				if len(e.Resource) > wireMaxName {
					continue // could not be sent; no remote request on it could either
				}
				if k++; k > wire.MaxEdges {
					break
				}
				all = append(all, aged{e.Since, wireEdge(ls.name, e)})
			}
			sh.mu.Unlock()
		}
	}
	slices.SortStableFunc(all, func(a, b aged) int { return cmp.Compare(a.since, b.since) })
	edges := make([]wire.WaitEdge, 0, min(len(all), wire.MaxEdges))
	size := 0
	for _, a := range all {
		if size += len(a.e.Lockspace) + len(a.e.Resource) + edgeBytes; len(edges) == wire.MaxEdges || size > deadlockReportBytes {
			n.log.Debug("deadlock report holds the oldest waits only", "edges", len(all), "reported", len(edges))
			break
		}
		edges = append(edges, a.e)
	}
	return edges, true
}

func wireEdge(lockspace string, e master.WaitEdge) wire.WaitEdge {
	kind := uint8(wire.BlockHolder)
	if e.Kind == master.BlockAhead {
		kind = wire.BlockAhead
	}
	return wire.WaitEdge{
		Lockspace: lockspace, Resource: e.Resource, Mode: e.Mode,
		WaiterNode: uint32(e.Waiter.Lock.Node), WaiterLock: e.Waiter.Lock.ID, WaiterOwner: uint64(e.Waiter.Owner), WaiterGen: e.WaiterGen,
		Kind:        kind,
		BlockerNode: uint32(e.Blocker.Lock.Node), BlockerLock: e.Blocker.Lock.ID, BlockerOwner: uint64(e.Blocker.Owner), Stamp: e.Stamp,
	}
}

func masterEdge(e wire.WaitEdge) master.WaitEdge {
	kind := master.BlockHolder
	if e.Kind == wire.BlockAhead {
		kind = master.BlockAhead
	}
	return master.WaitEdge{
		Resource:  e.Resource,
		Waiter:    master.Party{Owner: master.OwnerID(e.WaiterOwner), Lock: master.LockID{Node: master.NodeID(e.WaiterNode), ID: e.WaiterLock}},
		Blocker:   master.Party{Owner: master.OwnerID(e.BlockerOwner), Lock: master.LockID{Node: master.NodeID(e.BlockerNode), ID: e.BlockerLock}},
		Mode:      e.Mode,
		WaiterGen: e.WaiterGen, Kind: kind, Stamp: e.Stamp,
	}
}

// accept files a report from member from (this node's own included), if
// this node is the detector of the report's epoch. A report replaces the
// sender's earlier ones.
func (d *deadlocks) accept(from string, m *wire.DeadlockReport) {
	vw := d.n.view.Load()
	if vw.epoch != m.Epoch || detectorOf(vw) != d.n.self.name || vw.byName[from] == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.syncEpochLocked(m.Epoch)
	if r := d.reports[from]; r != nil && m.Seq <= r.seq {
		return
	}
	d.reports[from] = &edgeReport{seq: m.Seq, at: time.Now(), edges: slices.Clone(m.Edges)}
	d.changed = true
}

// syncEpochLocked drops the reports and the round of another epoch.
func (d *deadlocks) syncEpochLocked(epoch uint64) {
	if d.epoch != epoch || d.reports == nil {
		d.epoch, d.reports, d.round, d.changed = epoch, map[string]*edgeReport{}, nil, false
	}
}

// detect runs the detector's part of a tick: if this node is the detector
// and no round is in progress, search the latest reports for cycles and
// start a round to confirm them.
func (d *deadlocks) detect(now time.Time) {
	n := d.n
	vw := n.view.Load()
	d.mu.Lock()
	if detectorOf(vw) != n.self.name || !n.settled() || n.epoch() != vw.epoch {
		d.reports, d.round = nil, nil
		d.mu.Unlock()
		return
	}
	d.syncEpochLocked(vw.epoch)
	if r := d.round; r != nil {
		if !r.done && now.After(r.deadline) {
			n.log.Debug("deadlock: confirmation round timed out; no victim", "epoch", r.epoch)
			d.round = nil
		}
		d.mu.Unlock()
		return
	}
	if h := n.knobs.deadlockBeforeSearch; h != nil {
		h(d)
	}
	if !d.changed || now.Before(d.nextSearch) {
		d.mu.Unlock()
		return
	}
	d.changed, d.nextSearch = false, now.Add(d.interval)
	var g []graphEdge
	for from, r := range d.reports {
		if now.Sub(r.at) > 3*d.interval { // its sender stopped reporting
			delete(d.reports, from)
			continue
		}
		for _, e := range r.edges {
			g = append(g, graphEdge{master: from, e: e})
		}
	}
	cycles := findCycles(g, maxCyclesPerRound)
	if len(cycles) == 0 {
		d.mu.Unlock()
		return
	}
	r := newRound(vw.epoch, cycles, now.Add(max(time.Second, 4*d.interval)))
	d.round = r
	d.stats.rounds++
	d.stats.cycles += len(cycles)
	d.mu.Unlock()
	for _, c := range cycles {
		n.log.Debug("deadlock: cycle found; confirming it", "epoch", r.epoch, "cycle", c.describe(1024))
	}
	if h := n.knobs.deadlockBeforeConfirm; h != nil {
		h()
	}
	d.confirm(r)
}

func newRound(epoch uint64, cycles []cycle, deadline time.Time) *round {
	r := &round{epoch: epoch, cycles: cycles, asks: map[string]*ask{}, deadline: deadline}
	for _, c := range cycles {
		for _, g := range c.edges {
			a := r.asks[g.master]
			if a == nil {
				a = &ask{index: map[wire.WaitEdge]int{}}
				r.asks[g.master] = a
			}
			if _, ok := a.index[g.e]; !ok {
				a.index[g.e] = len(a.edges)
				a.edges = append(a.edges, g.e)
			}
		}
	}
	r.pending = len(r.asks)
	return r
}

// confirm asks the master of every edge of the round whether it still
// holds: this node's own tables at once, the others by request.
func (d *deadlocks) confirm(r *round) {
	n := d.n
	masters := make([]string, 0, len(r.asks))
	for to := range r.asks {
		masters = append(masters, to)
	}
	slices.Sort(masters)
	for _, to := range masters {
		a := r.asks[to]
		if to == n.self.name {
			d.confirmed(r, to, n.confirmEdges(r.epoch, a.edges))
			continue
		}
		err := n.links.Go(to, &wire.DeadlockConfirm{Epoch: r.epoch, Edges: a.edges}, func(reply wire.Message, err error) {
			var held []bool
			if m, ok := reply.(*wire.DeadlockConfirmed); ok && err == nil && m.Epoch == r.epoch && len(m.Held) == len(a.edges) {
				held = slices.Clone(m.Held)
			}
			d.confirmed(r, to, held)
		})
		if err != nil {
			d.confirmed(r, to, nil) // as if nothing held
		}
	}
}

// confirmed records a master's answer (nil: none of its edges holds) and,
// with the last answer, fails the victims of the confirmed cycles.
func (d *deadlocks) confirmed(r *round, from string, held []bool) {
	d.mu.Lock()
	if d.round != r || r.done {
		d.mu.Unlock()
		return
	}
	if held != nil {
		r.asks[from].held = held
	}
	if r.pending--; r.pending > 0 {
		d.mu.Unlock()
		return
	}
	r.done = true
	victims := d.decideLocked(r)
	d.mu.Unlock()
	d.finish(r, victims)
}

// decideLocked picks the victim of every cycle of the round whose edges
// all held.
func (d *deadlocks) decideLocked(r *round) []victim {
	var out []victim
	for _, c := range r.cycles {
		ok := true
		for _, g := range c.edges {
			a := r.asks[g.master]
			ok = ok && a.held != nil && a.held[a.index[g.e]]
		}
		desc := c.describe(describeBytes)
		if !ok {
			d.stats.unconfirmed++
			d.n.log.Debug("deadlock: cycle not confirmed (an edge broke since it was reported); nothing failed", "epoch", r.epoch, "cycle", desc)
			continue
		}
		v := c.edges[c.victim]
		d.stats.victims++
		d.n.log.Info("deadlock: cycle confirmed; failing one request of it", "epoch", r.epoch, "cycle", desc,
			"victim", master.LockID{Node: master.NodeID(v.e.WaiterNode), ID: v.e.WaiterLock}, "resource", v.e.Resource, "master", v.master)
		out = append(out, victim{master: v.master, edge: v.e, cycle: desc})
	}
	return out
}

// finish asks the masters of the victims to fail them, then ends the
// round. The next round starts only after: its confirmations travel behind
// these failures on the same connections, so no later round can confirm an
// edge of a victim already failed.
func (d *deadlocks) finish(r *round, victims []victim) {
	n := d.n
	if h := n.knobs.deadlockBeforeFail; h != nil && len(victims) > 0 {
		h(victims)
	}
	for _, v := range victims {
		m := &wire.DeadlockFail{
			Epoch: r.epoch, Lockspace: v.edge.Lockspace, Resource: v.edge.Resource,
			Node: v.edge.WaiterNode, Lock: v.edge.WaiterLock, Gen: v.edge.WaiterGen, Detail: v.cycle,
		}
		if v.master == n.self.name {
			n.onDeadlockFail(n.self.name, m)
		} else if err := n.links.Send(v.master, m); err != nil {
			n.log.Debug("deadlock: victim's master unreachable; the next round will find the cycle again", "master", v.master, "err", err)
		}
	}
	d.mu.Lock()
	if d.round == r {
		d.round = nil
	}
	d.mu.Unlock()
}

// snapshot returns what the detector has done so far.
func (d *deadlocks) snapshot() deadlockStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// --- master side

// onDeadlockConfirm answers the detector's question about edges this node
// reported.
func (n *Node) onDeadlockConfirm(in transport.Inbound, m *wire.DeadlockConfirm) {
	held := n.confirmEdges(m.Epoch, m.Edges)
	if in.ReplyTo.IsRequest() {
		_ = n.links.Reply(in.ReplyTo, &wire.DeadlockConfirmed{Epoch: m.Epoch, Held: held})
	}
}

// confirmEdges says, for each edge, whether it has held without a break
// since it was observed in epoch (master.Table.EdgeHolds). Outside that
// epoch, or while not serving, no edge holds: the tables may have been
// rebuilt. The gate is read under the shard's mutex, which Suspend takes
// after closing it, so the table read is the epoch's.
func (n *Node) confirmEdges(epoch uint64, edges []wire.WaitEdge) []bool {
	held := make([]bool, len(edges))
	for i, e := range edges {
		ls := n.existingLockspace(e.Lockspace)
		if ls == nil {
			continue
		}
		sh := ls.shardOf(resourceHash(ls.seed, e.Resource))
		sh.mu.Lock()
		held[i] = n.settled() && n.epoch() == epoch && sh.table.EdgeHolds(masterEdge(e))
		sh.mu.Unlock()
	}
	return held
}

// onDeadlockFail fails the request the detector chose to break a cycle, if
// it is still the queued request the detector confirmed: a request since
// granted, cancelled or queued again is left alone, so a second detection
// of the same cycle fails nothing more.
func (n *Node) onDeadlockFail(from string, m *wire.DeadlockFail) {
	vw := n.view.Load()
	if vw.epoch != m.Epoch || detectorOf(vw) != from {
		n.log.Debug("deadlock: fail request not from this epoch's detector; ignored", "from", from, "epoch", m.Epoch)
		return
	}
	ls := n.existingLockspace(m.Lockspace)
	if ls == nil {
		return
	}
	id := master.LockID{Node: master.NodeID(m.Node), ID: m.Lock}
	sh := ls.shardOf(resourceHash(ls.seed, m.Resource))
	sh.mu.Lock()
	err := ErrUnavailable
	if n.settled() && n.epoch() == m.Epoch {
		err = sh.table.FailRequest(id, m.Gen, fmt.Errorf("%w: %w: %s", master.ErrDeadlock, errCycle, m.Detail))
		ls.deliver(sh)
	}
	sh.mu.Unlock()
	if err != nil {
		n.log.Debug("deadlock: the victim no longer waits; nothing failed", "lock", id, "resource", m.Resource, "err", err)
		return
	}
	n.log.Info("deadlock: failed a request to break a cycle", "lockspace", m.Lockspace, "resource", m.Resource, "lock", id, "cycle", m.Detail)
	n.noteDeadlock(DeadlockCycle, m.Lockspace, m.Resource, id, m.Detail)
}

// countDeadlock counts a request failed by a deadlock, by kind, and
// records a conversion deadlock (onDeadlockFail records cycles, with their
// description).
func (n *Node) countDeadlock(ls *Lockspace, e *master.Effect) {
	if errors.Is(e.Err, errCycle) {
		n.met.deadlocks[deadlockCycle].Inc()
		return
	}
	n.met.deadlocks[deadlockConversion].Inc()
	n.noteDeadlock(DeadlockConversion, ls.name, e.Resource, e.Lock, e.Err.Error())
}
