package dlm

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/recovery"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Recovery, the node's side (the recovery package decides when). Every
// view change rebuilds every lock table from scratch, the way the Linux
// DLM rebuilds a lockspace without a directory:
//
//   - Suspend closes the gate, takes a snapshot of the tables this node
//     masters (value blocks, queue order, the highest token issued) and
//     empties them;
//   - Report sends each of this node's locks (held, converting or waiting)
//     to the resource's master in the new view, and each snapshot to the
//     resource's new master;
//   - Rebuild, once every member reported (a barrier), restores each
//     resource from its holders' reports, in the old master's queue order
//     where it is known, with the freshest value block, the token floor
//     above anything issued before, and grants what the rules allow;
//   - Resume opens the gate.
//
// The holders' reports, not the old tables, say which locks exist: a lock
// is what its holder believes it holds. Completions of the old epoch are
// dropped from Suspend on, so a grant still on its way cannot make a
// holder believe more than it reported. Rebuilding everything, not only
// the resources that moved, makes an aborted recovery harmless (the next
// one starts over from the holders) and means an unlock or a request lost
// in the change costs nothing: a holder reports only what it still holds.

// recoveryState is what a node keeps between and during recoveries.
type recoveryState struct {
	mu       sync.Mutex
	live     bool                      // the tables hold a completed view's state
	snapshot map[string]*spaceSnapshot // what this node mastered when last live
	buf      *rebuildBuf               // reports received for one epoch
	parked   []parked                  // lock messages of the new epoch, for after Resume
	deferred []deferredUnlock          // unlocks made while suspended
}

type spaceSnapshot struct {
	lastToken uint64
	resources []master.ResourceState
}

// rebuildBuf collects the reports of one epoch.
type rebuildBuf struct {
	epoch  uint64
	spaces map[string]*spaceReports
}

// spaceReports are the reports of one lockspace: every lock the holders
// reported, in one flat slice (sorted by resource at rebuild: a hundred
// thousand locks cost one growing slice, not a map entry each), and what
// old masters said of the resources they had something to say about.
type spaceReports struct {
	lastToken uint64
	locks     []master.LockState
	masters   map[string]*masterInfo
}

// masterInfo is an old master's snapshot of one resource.
type masterInfo struct {
	order   []master.LockID // queue order
	lvb     *master.LVB     // value block
	writers []master.LockID // PW/EX holders
}

func (b *rebuildBuf) space(name string) *spaceReports {
	sp := b.spaces[name]
	if sp == nil {
		sp = &spaceReports{masters: map[string]*masterInfo{}}
		b.spaces[name] = sp
	}
	return sp
}

// bufFor returns the buffer of epoch e, replacing one of an older epoch;
// nil if e is older than the buffer's (a stale report).
func (rs *recoveryState) bufFor(e uint64) *rebuildBuf {
	if rs.buf == nil || rs.buf.epoch < e {
		rs.buf = &rebuildBuf{epoch: e, spaces: map[string]*spaceReports{}}
	}
	if rs.buf.epoch != e {
		return nil
	}
	return rs.buf
}

type parked struct {
	in transport.Inbound
}

type deferredUnlock struct {
	ls    *Lockspace
	hash  uint64
	msg   wire.UnlockRequest
	local master.Release
}

// recoveryHost implements recovery.Host for a node.
type recoveryHost struct{ n *Node }

// makeView turns an agreed view into the routing view, with link
// addresses from membership.
func (n *Node) makeView(v recovery.View) *view {
	ms := make([]*member, 0, len(v.Members))
	n.mu.Lock()
	for _, m := range v.Members {
		if m.Name == n.self.name {
			ms = append(ms, n.self)
			continue
		}
		ms = append(ms, newMember(m.Name, n.alive[m.Name].LinkAddr, m.BootID))
	}
	n.mu.Unlock()
	return newView(v.Epoch, ms, n.self)
}

// tokenFloor is the time part of a fencing token: milliseconds since
// 2000-01-01 in the top 44 bits (until the year 2557), a counter below.
// Every table starts its tokens above the floor of the moment it was made,
// so a master that takes over, or a cluster restarted from nothing, issues
// tokens above anything issued before, provided clocks agree to better
// than the time that separates the two (a recovery waits at least the
// lock-delay, over a second).
func tokenFloor(t time.Time) uint64 {
	ms := t.UnixMilli() - time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	if ms < 0 {
		return 0
	}
	return uint64(ms) << 20
}

func (h recoveryHost) Suspend(v recovery.View) {
	n := h.n
	g := &n.gate
	g.mu.Lock()
	if !g.recovering {
		g.recovering = true
		g.resumed = make(chan struct{})
	}
	g.epoch.Store(v.Epoch)
	g.accept.Store(v.Epoch)
	g.updateLocked()
	g.mu.Unlock()
	n.view.Store(n.makeView(v))

	// Lock order: a shard's mutex before rs.mu (an unlock under a shard
	// mutex files a deferred release), so rs.mu is never held while shards
	// are swept.
	rs := &n.recov
	rs.mu.Lock()
	snap := rs.live
	rs.live = false
	rs.bufFor(v.Epoch)
	rs.mu.Unlock()
	var snapshot map[string]*spaceSnapshot
	if snap {
		snapshot = map[string]*spaceSnapshot{}
	}
	for _, ls := range n.lockspaceList() {
		sp := &spaceSnapshot{}
		for _, sh := range ls.shards {
			sh.mu.Lock()
			if snap {
				sp.lastToken = max(sp.lastToken, sh.table.LastToken())
				sp.resources = sh.table.AppendResources(sp.resources)
			}
			ls.resetShardLocked(sh)
			sh.mu.Unlock()
		}
		if snap {
			snapshot[ls.name] = sp
		}
	}
	if snap {
		rs.mu.Lock()
		rs.snapshot = snapshot
		rs.mu.Unlock()
	}
}

// resetShardLocked empties the shard's table (keeping its token counter's
// reach through the floor) and settles the locks no report will carry.
func (ls *Lockspace) resetShardLocked(sh *shard) {
	floor := max(sh.table.LastToken(), tokenFloor(time.Now()))
	sh.table = master.New(ls.cfg.tableConfig())
	sh.table.RaiseTokenFloor(floor)
	clear(sh.demoted)
	sh.releases = sh.releases[:0]
	sh.unsent = sh.unsent[:0] // the reports carry them to the new masters
}

func (h recoveryHost) Report(ctx context.Context, v recovery.View) error {
	n := h.n
	vw := n.view.Load()
	out := map[reportKey]*wire.LockReport{}
	for _, ls := range n.lockspaceList() {
		for _, sh := range ls.shards {
			sh.mu.Lock()
			for _, lk := range sh.locks {
				if rl, ok := lk.reportLocked(sh); ok {
					k := reportKey{vw.masterOf(lk.hash).name, ls.name}
					if out[k] == nil {
						out[k] = &wire.LockReport{Epoch: v.Epoch, Lockspace: ls.name}
					}
					out[k].Locks = append(out[k].Locks, rl)
				}
			}
			sh.mu.Unlock()
		}
	}
	masters := n.masterReports(v, vw)
	var msgs []routed
	for k, r := range out {
		msgs = append(msgs, splitLockReport(k.to, r)...)
	}
	msgs = append(msgs, masters...)
	return n.deliverReports(ctx, msgs)
}

type reportKey struct{ to, lockspace string }

type routed struct {
	to  string
	msg wire.Message
}

// Reports are split so that each message stays well inside a frame: at
// most maxReport entries (the wire limit) and about reportBytes of body.
const (
	maxReport   = 4096
	reportBytes = 256 << 10
)

func splitLockReport(to string, r *wire.LockReport) []routed {
	var out []routed
	for len(r.Locks) > 0 {
		n, size := 0, 0
		for n < len(r.Locks) && n < maxReport && size < reportBytes {
			size += len(r.Locks[n].Resource) + len(r.Locks[n].LVB) + 64
			n++
		}
		out = append(out, routed{to, &wire.LockReport{Epoch: r.Epoch, Lockspace: r.Lockspace, Locks: r.Locks[:n]}})
		r.Locks = r.Locks[n:]
	}
	return out
}

// splitMasterReport splits one master's resources into messages, and a
// resource with more locks than one entry may hold into several entries
// (the receiver joins them).
func splitMasterReport(to string, epoch uint64, lockspace string, lastToken uint64, res []wire.ReportedResource) []routed {
	var entries []wire.ReportedResource
	for _, r := range res {
		for first := true; first || len(r.Locks) > 0; first = false {
			e := r
			e.Locks = r.Locks[:min(len(r.Locks), maxReport)]
			r.Locks = r.Locks[len(e.Locks):]
			entries = append(entries, e)
		}
	}
	var out []routed
	for first := true; first || len(entries) > 0; first = false {
		n, size, locks := 0, 0, 0
		for n < len(entries) && n < maxReport && size < reportBytes && locks+len(entries[n].Locks) <= 8*maxReport {
			size += len(entries[n].Resource) + len(entries[n].LVB) + 64 + 24*len(entries[n].Locks)
			locks += len(entries[n].Locks)
			n++
		}
		out = append(out, routed{to, &wire.MasterReport{Epoch: epoch, Lockspace: lockspace, LastToken: lastToken, Resources: entries[:n]}})
		entries = entries[n:]
	}
	return out
}

// reportLocked describes one of this node's locks for its new master, or
// says it is not to be reported: given up (forgotten now), or a try-lock
// still in flight (failed now: recovery cannot grant it "at once").
// Caller holds sh.mu.
func (lk *Lock) reportLocked(sh *shard) (wire.ReportedLock, bool) {
	switch {
	case lk.state == stAbandoned:
		lk.forgetLocked(sh)
		return wire.ReportedLock{}, false
	case lk.noQueue && lk.state == stWaiting:
		lk.opErr = ErrNotQueued
		lk.forgetLocked(sh)
		lk.signalDone()
		return wire.ReportedLock{}, false
	case lk.noQueue && lk.state == stConverting:
		lk.state, lk.opErr = stGranted, ErrNotQueued
		lk.signalDone()
	case lk.pendingConvert:
		lk.pendingConvert = false // the conversion given up on is dropped
	}
	lk.unsent = nil
	rl := wire.ReportedLock{
		Resource: lk.resource, Lock: lk.id, Owner: uint64(lk.ownerID),
		Granted: lk.mode, Requested: lk.mode, Token: lk.token, TTL: int64(lk.masterTTL()),
	}
	switch lk.state {
	case stWaiting:
		rl.Queue, rl.Granted, rl.Requested = wire.QueueWaiting, modes.NL, lk.want
	case stConverting:
		rl.Queue, rl.Requested = wire.QueueConverting, lk.want
	case stGranted:
		rl.Queue = wire.QueueGranted
	default:
		return wire.ReportedLock{}, false
	}
	if lk.state != stWaiting && lk.mode > modes.CR && len(lk.value) <= lk.ls.cfg.MaxLVB {
		rl.LVB, rl.LVBSeq, rl.LVBFlags = lk.value, lk.valueSeq, wire.LVBPresent
		if lk.valueOK {
			rl.LVBFlags |= wire.LVBValid
		}
	}
	return rl, true
}

// masterReports turns the snapshot into reports for the new masters. Every
// member gets each lockspace's highest token, even with no resource, so
// that no table of the new view starts below it.
func (n *Node) masterReports(v recovery.View, vw *view) []routed {
	n.recov.mu.Lock()
	snap := n.recov.snapshot
	n.recov.mu.Unlock()
	var out []routed
	for name, sp := range snap {
		ls := n.lockspace(name)
		byMaster := map[string][]wire.ReportedResource{}
		for _, m := range vw.members {
			byMaster[m.name] = nil
		}
		for _, r := range sp.resources {
			to := vw.masterOf(resourceHash(ls.seed, r.Name)).name
			byMaster[to] = append(byMaster[to], reportedResource(r))
		}
		for to, res := range byMaster {
			out = append(out, splitMasterReport(to, v.Epoch, name, sp.lastToken, res)...)
		}
	}
	return out
}

func reportedResource(r master.ResourceState) wire.ReportedResource {
	rr := wire.ReportedResource{Resource: r.Name, LVB: r.LVB.Data, LVBSeq: r.LVB.Seq, LVBFlags: wire.LVBPresent}
	if r.LVB.Valid {
		rr.LVBFlags |= wire.LVBValid
	}
	for _, l := range r.Locks {
		rr.Locks = append(rr.Locks, wire.QueuedLock{Node: uint32(l.Lock.Node), Lock: l.Lock.ID, Queue: uint8(l.Queue), Granted: l.Granted})
	}
	return rr
}

// deliverReports sends reports (to itself directly) and waits for every
// acknowledgement.
func (n *Node) deliverReports(ctx context.Context, msgs []routed) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, r := range msgs {
		if r.to == n.self.name {
			n.acceptReport(n.self.name, r.msg)
			continue
		}
		g.Go(func() error { return n.callUntilAcked(ctx, r) })
	}
	return g.Wait()
}

// callUntilAcked sends one report until it is acknowledged. A member of the
// view may be briefly unreachable (its link is reconnecting after it
// restarted): keep trying; if it is really gone, membership changes, a newer
// view ends ctx, and this recovery with it.
func (n *Node) callUntilAcked(ctx context.Context, r routed) error {
	wait := 10 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := n.links.Call(cctx, r.to, r.msg)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("report to %s: %w", r.to, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("report to %s: %w", r.to, err)
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// onReport takes a LockReport or MasterReport from another node.
func (n *Node) onReport(in transport.Inbound) {
	n.acceptReport(in.From, in.Msg)
	var epoch uint64
	switch m := in.Msg.(type) {
	case *wire.LockReport:
		epoch = m.Epoch
	case *wire.MasterReport:
		epoch = m.Epoch
	}
	if in.ReplyTo.IsRequest() {
		_ = n.links.Reply(in.ReplyTo, &wire.Ack{Epoch: epoch})
	}
}

// acceptReport files a report into the rebuild buffer of its epoch,
// copying what aliases the frame.
func (n *Node) acceptReport(from string, msg wire.Message) {
	rs := &n.recov
	rs.mu.Lock()
	defer rs.mu.Unlock()
	switch m := msg.(type) {
	case *wire.LockReport:
		buf := rs.bufFor(m.Epoch)
		if buf == nil {
			return
		}
		sp, node := buf.space(m.Lockspace), nodeID(from)
		for _, rl := range m.Locks {
			sp.locks = append(sp.locks, reportedState(node, rl))
		}
	case *wire.MasterReport:
		buf := rs.bufFor(m.Epoch)
		if buf == nil {
			return
		}
		sp := buf.space(m.Lockspace)
		sp.lastToken = max(sp.lastToken, m.LastToken)
		for _, rr := range m.Resources {
			r := sp.masters[rr.Resource] // a big resource comes in several entries
			if r == nil {
				r = &masterInfo{}
				sp.masters[rr.Resource] = r
			}
			r.lvb = &master.LVB{Data: slices.Clone(rr.LVB), Seq: rr.LVBSeq, Valid: rr.LVBFlags&wire.LVBValid != 0}
			for _, q := range rr.Locks {
				id := master.LockID{Node: master.NodeID(q.Node), ID: q.Lock}
				r.order = append(r.order, id)
				if q.Queue != wire.QueueWaiting && modeWrites(q.Granted) {
					r.writers = append(r.writers, id)
				}
			}
		}
	}
}

func reportedState(node master.NodeID, rl wire.ReportedLock) master.LockState {
	ls := master.LockState{
		Resource: rl.Resource, Lock: master.LockID{Node: node, ID: rl.Lock}, Owner: master.OwnerID(rl.Owner),
		Queue: master.Queue(rl.Queue), Granted: rl.Granted, Requested: rl.Requested, Token: rl.Token,
		TTL: ticks(time.Duration(rl.TTL)),
	}
	if rl.LVBFlags&wire.LVBPresent != 0 {
		ls.LVB = &master.LVB{Data: slices.Clone(rl.LVB), Seq: rl.LVBSeq, Valid: rl.LVBFlags&wire.LVBValid != 0}
	}
	return ls
}

func (h recoveryHost) Rebuild(v recovery.View) {
	n := h.n
	rs := &n.recov
	rs.mu.Lock()
	buf := rs.bufFor(v.Epoch)
	rs.buf = nil
	rs.mu.Unlock()
	floor := tokenFloor(time.Now())
	for name, sp := range buf.spaces {
		n.lockspace(name).rebuild(sp, max(floor, sp.lastToken), v)
	}
	for _, ls := range n.lockspaceList() {
		for _, sh := range ls.shards {
			sh.mu.Lock()
			sh.table.RaiseTokenFloor(floor)
			sh.table.FinishRecovery()
			ls.deliver(sh)
			sh.mu.Unlock()
		}
	}
	rs.mu.Lock()
	rs.live = true
	rs.mu.Unlock()
}

// rebuild restores the reported resources of one lockspace into its tables.
func (ls *Lockspace) rebuild(sp *spaceReports, floor uint64, v recovery.View) {
	now := ls.node.now()
	for _, sh := range ls.shards {
		sh.mu.Lock()
		sh.table.RaiseTokenFloor(floor)
		sh.table.Tick(now) // a restored request's wait is timed from now on
		sh.mu.Unlock()
	}
	members := map[master.NodeID]bool{}
	for _, m := range v.Members {
		members[nodeID(m.Name)] = true
	}
	slices.SortFunc(sp.locks, func(a, b master.LockState) int {
		if c := cmp.Compare(a.Resource, b.Resource); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Lock.Node, b.Lock.Node); c != 0 {
			return c
		}
		return cmp.Compare(a.Lock.ID, b.Lock.ID)
	})
	purged := 0
	for _, mi := range sp.masters {
		for _, id := range mi.order {
			if !members[id.Node] {
				purged++
			}
		}
	}
	ls.node.met.purged.Add(float64(purged))
	for locks := sp.locks; len(locks) > 0; {
		n := 1
		for n < len(locks) && locks[n].Resource == locks[0].Resource {
			n++
		}
		ls.restoreResource(locks[:n], sp.masters[locks[0].Resource], members)
		locks = locks[n:]
	}
}

// restoreResource restores one resource from its holders' reports (all for
// the same resource, sorted by node and id) and its old master's snapshot,
// if any: the snapshot's queue order first, then the rest.
func (ls *Lockspace) restoreResource(locks []master.LockState, mi *masterInfo, members map[master.NodeID]bool) {
	name := locks[0].Resource
	if mi != nil && len(mi.order) > 1 && len(locks) > 1 {
		pos := make(map[master.LockID]int, len(mi.order))
		for i, id := range mi.order {
			pos[id] = i
		}
		slices.SortStableFunc(locks, func(a, b master.LockState) int {
			pa, oka := pos[a.Lock]
			pb, okb := pos[b.Lock]
			switch {
			case oka && okb:
				return cmp.Compare(pa, pb)
			case oka:
				return -1
			case okb:
				return 1
			}
			return 0
		})
	}
	sh := ls.shardOf(resourceHash(ls.seed, name))
	sh.mu.Lock()
	defer sh.mu.Unlock()
	restored := 0
	for _, l := range locks {
		if err := sh.table.Restore(l); err != nil {
			ls.node.log.Error("recovery: a reported lock could not be restored", "resource", name, "lock", l.Lock, "err", err)
			continue
		}
		restored++
	}
	ls.node.met.rebuilt.Add(float64(restored))
	if mi == nil || mi.lvb == nil {
		return
	}
	val := *mi.lvb
	for _, w := range mi.writers {
		reported := slices.ContainsFunc(locks, func(l master.LockState) bool { return l.Lock == w })
		if !members[w.Node] || !reported {
			val.Valid = false // a PW/EX holder is gone: it may have been writing
		}
	}
	_ = sh.table.RestoreValue(name, val)
}

func (h recoveryHost) Resume(v recovery.View) {
	n := h.n
	g := &n.gate
	g.mu.Lock()
	if g.recovering {
		g.recovering = false
		close(g.resumed)
	}
	g.updateLocked()
	g.mu.Unlock()
	rs := &n.recov
	rs.mu.Lock()
	parked := rs.parked
	rs.parked = nil
	rs.mu.Unlock()
	n.sendDeferredUnlocks()
	for _, p := range parked {
		n.handle(p.in)
	}
}

// sendDeferredUnlocks sends the unlocks made during a recovery, or that
// found their master unreachable; those that still cannot go wait for the
// next tick.
func (n *Node) sendDeferredUnlocks() {
	rs := &n.recov
	rs.mu.Lock()
	todo := rs.deferred
	rs.deferred = nil
	rs.mu.Unlock()
	var failed []deferredUnlock
	for _, d := range todo {
		if !d.send(n) {
			failed = append(failed, d)
		}
	}
	if len(failed) > 0 {
		rs.mu.Lock()
		rs.deferred = append(failed, rs.deferred...)
		rs.mu.Unlock()
	}
}

func (h recoveryHost) LeaseLost(evicted bool) {
	n := h.n
	g := &n.gate
	g.mu.Lock()
	g.noQuorum = true
	g.updateLocked()
	g.mu.Unlock()
	why := fmt.Errorf("%w: this node lost contact with a majority of the cluster", ErrNoQuorum)
	if evicted {
		why = fmt.Errorf("%w: the cluster agreed a view without this node", ErrNoQuorum)
	}
	for _, ls := range n.lockspaceList() {
		for _, sh := range ls.shards {
			sh.mu.Lock()
			ls.fenceShardLocked(sh, why, evicted)
			sh.mu.Unlock()
		}
	}
	if evicted {
		rs := &n.recov
		rs.mu.Lock()
		rs.live, rs.snapshot, rs.buf, rs.parked, rs.deferred = false, nil, nil, nil, nil
		rs.mu.Unlock()
	}
}

// fenceShardLocked ends what a node without quorum may not do: its waiting
// requests fail, its held locks are lost, and the requests queued on the
// tables it masters fail. An evicted node also forgets everything.
func (ls *Lockspace) fenceShardLocked(sh *shard, why error, evicted bool) {
	for _, lk := range sh.locks {
		switch lk.state {
		case stWaiting:
			lk.opErr = why
			lk.state = stAbandoned // a grant that still comes is given back
			lk.signalDone()
		case stConverting:
			lk.opErr = why
			lk.state, lk.pendingConvert = stGranted, true
			lk.signalDone()
		}
		if lk.state == stGranted {
			lk.loseLocked(why)
		}
		if evicted {
			lk.forgetLocked(sh)
		}
	}
	if evicted {
		ls.resetShardLocked(sh)
		return
	}
	for _, id := range sh.table.Queued() {
		_ = sh.table.Fail(id, why)
	}
	ls.deliver(sh)
}

func (h recoveryHost) LeaseRegained() {
	g := &h.n.gate
	g.mu.Lock()
	g.noQuorum = false
	g.updateLocked()
	g.mu.Unlock()
}

// park keeps a lock message of the epoch being recovered (or a newer one)
// for after Resume. It copies what aliases the frame.
func (n *Node) park(in transport.Inbound) {
	in.Msg = cloneMessage(in.Msg)
	if in.Msg == nil {
		return
	}
	rs := &n.recov
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.parked) < maxParked {
		rs.parked = append(rs.parked, parked{in})
	}
}

// maxParked bounds the messages kept during a recovery; past it a request
// is dropped, and its sender's report (or its next view's) carries it.
const maxParked = 1 << 16

func cloneMessage(m wire.Message) wire.Message {
	switch m := m.(type) {
	case *wire.LockRequest:
		c := *m
		return &c
	case *wire.ConvertRequest:
		c := *m
		c.LVB = slices.Clone(m.LVB)
		return &c
	case *wire.UnlockRequest:
		c := *m
		c.LVB = slices.Clone(m.LVB)
		return &c
	case *wire.CancelRequest:
		c := *m
		return &c
	case *wire.Renew:
		c := *m
		c.Locks = slices.Clone(m.Locks)
		return &c
	}
	return nil
}

// send releases the lock at its master now, and reports whether it could.
func (d deferredUnlock) send(n *Node) bool {
	vw := n.view.Load()
	m := vw.masterOf(d.hash)
	if m.name == n.self.name {
		sh := d.ls.shardOf(d.hash)
		sh.mu.Lock()
		_ = d.ls.tableRelease(sh, d.local)
		sh.mu.Unlock()
		return true
	}
	msg := d.msg
	msg.Epoch = n.epoch()
	return n.links.Post(m.name, &msg) == nil
}
