package dlm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/recovery"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Recovery, the node's side (the recovery package decides when). A view
// change moves only the buckets whose master changes (mastery.go says
// which, the same on every member); every other resource keeps its table
// and keeps being served throughout:
//
//   - Prepare tells every member which tables this node holds and learns
//     theirs, so that everyone computes the same plan;
//   - Suspend installs the view and the plan: operations on the buckets
//     that move wait, everywhere, until Resume; this node drops the tables
//     of the buckets it gives up (keeping a snapshot of each resource:
//     queue order, value block) and, if it is a zombie, all of its lock
//     state;
//   - Report sends each of this node's locks on a moving bucket (held,
//     converting or waiting) to the bucket's new master, and each snapshot
//     to the resource's new master;
//   - Rebuild, once every member reported and waited out the lock-delay (a
//     barrier), purges from the tables this node keeps the locks of nodes
//     that are no longer members (granting what that frees), restores each
//     moved resource from its holders' reports, in the old master's queue
//     order where it is known, with the freshest value block and the token
//     floor above anything issued before, and grants what the rules allow;
//   - Resume lets the operations on the moved buckets go.
//
// The holders' reports, not the old tables, say which locks of a moved
// resource exist: a lock is what its holder believes it holds. A holder
// takes no answer about a reported lock from before the report (a grant
// still on its way from the old master): Lock.reportedAt. A master takes
// no request about a rebuilt bucket from before its rebuild (rebuiltAt),
// nor from a node before it purged that node's locks (purgedAt).

// recoveryState is what a node keeps between and during recoveries.
type recoveryState struct {
	// plan is the recovery under way, nil between recoveries: what every
	// lock operation checks (one atomic load).
	plan atomic.Pointer[plan]
	// replaying is set while held lock messages are handed on: arrivals
	// then queue behind them, so that no message overtakes an older one.
	replaying atomic.Bool
	// rebuiltAt is the epoch each bucket was last rebuilt here in: a lock
	// message of an earlier epoch about it is older than the reports it was
	// rebuilt from, which supersede it.
	rebuiltAt [numBuckets]atomic.Uint64
	// purgedAt is, per node, the epoch this node last purged its locks in
	// (copied on write): a lock message of an earlier epoch from that node
	// was sent before the purge.
	purgedAt atomic.Pointer[map[master.NodeID]uint64]

	mu   sync.Mutex
	mine holdings
	// invalid counts the times this node's tables were found unreliable (a
	// connection to a member lost messages, or too many views went by
	// without a rebuild); announced, the count the latest Prepare told the
	// others about. The next Prepare announces no tables, so that
	// everything this node masters is rebuilt from reports.
	invalid, announced uint64
	linkLost           map[string]uint64                   // peers whose link broke, and their boot then
	masteries          map[uint64]map[string]*wire.Mastery // received, by epoch and member
	arrived            chan struct{}                       // closed (and replaced) when a Mastery arrives
	handoff            map[string]*spaceSnapshot           // resources given up, for their new masters, until a Resume
	bufs               []*rebuildBuf                       // reports received, one buffer per epoch, oldest first
	bufFloor           uint64                              // reports of this epoch and older are stale: their buffers went
	held               []parked                            // lock messages held back (see admit)
	incoming           []parked                            // arrivals while held messages are replayed
	deferred           []deferredUnlock                    // unlocks that wait for the end of a recovery
	// beforeRebuild, if set (tests only, under mu), runs as Rebuild starts:
	// a test holds a recovery at its barrier with it.
	beforeRebuild func(epoch uint64)
	// afterMastery, if set (tests only, under mu), runs in Prepare once the
	// others acknowledged this node's Mastery, before it waits for theirs:
	// an error fails the Prepare, so that a test makes this node miss a
	// view the others go through. beforeSuspend runs as Suspend starts.
	afterMastery  func(ctx context.Context, epoch uint64) error
	beforeSuspend func(epoch uint64)
	// afterZombieDrop, if set (tests only, under mu), runs in Suspend once
	// a zombie dropped its lock state, before the view is installed.
	afterZombieDrop func(epoch uint64)
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
// reported, in one slice per report as it came (grouped by resource at
// rebuild: a hundred thousand locks cost a few hundred slices of one
// report each, neither a map entry each nor a growing slice copied as it
// doubles), and what old masters said of the resources they had
// something to say about.
type spaceReports struct {
	lastToken uint64
	locks     [][]master.LockState
	nlocks    int
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

// bufFor returns the buffer of epoch e, made if there is none. Reports
// for a view after the one being rebuilt get a buffer of their own: they
// come from members that installed that view first, and neither set may
// be lost (a rebuild without its view's reports would serve tables that
// lack the reported locks, if its barrier completes before this node
// learns of the next view).
func (rs *recoveryState) bufFor(e uint64) *rebuildBuf {
	if e <= rs.bufFloor {
		return nil
	}
	i, found := slices.BinarySearchFunc(rs.bufs, e, func(b *rebuildBuf, e uint64) int { return cmp.Compare(b.epoch, e) })
	if !found {
		rs.bufs = slices.Insert(rs.bufs, i, &rebuildBuf{epoch: e, spaces: map[string]*spaceReports{}})
	}
	return rs.bufs[i]
}

// takeBuf removes and returns the buffer of epoch e (an empty one if no
// report came or the node forgot them), and drops those of older epochs,
// whose views will not be rebuilt.
func (rs *recoveryState) takeBuf(e uint64) *rebuildBuf {
	buf := rs.bufFor(e)
	if buf == nil {
		buf = &rebuildBuf{epoch: e, spaces: map[string]*spaceReports{}}
	}
	rs.dropBufsLocked(e)
	return buf
}

// dropBufsLocked forgets the reports of epoch e and older, and refuses
// those that still come.
func (rs *recoveryState) dropBufsLocked(e uint64) {
	rs.bufFloor = max(rs.bufFloor, e)
	i, found := slices.BinarySearchFunc(rs.bufs, e, func(b *rebuildBuf, e uint64) int { return cmp.Compare(b.epoch, e) })
	if found {
		i++
	}
	rs.bufs = slices.Delete(rs.bufs, 0, i)
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

// --- Prepare: every member's Mastery.

func (h recoveryHost) Prepare(ctx context.Context, v recovery.View) error {
	n := h.n
	rs := &n.recov
	ref := n.makeView(v).ref()
	rs.mu.Lock()
	if rs.tablesUnreliableLocked(v) {
		rs.invalid++
	}
	rs.mine.settle(v.Epoch)
	none := rs.invalid != 0
	rs.announced = rs.invalid
	own := rs.mine.mastery(v.Epoch, none)
	rs.mine.prepared = ref
	rs.storeMasteryLocked(n.self.name, own)
	rs.mu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	for _, m := range v.Members {
		if m.Name == n.self.name {
			continue
		}
		g.Go(func() error { return n.callUntilAcked(gctx, routed{m.Name, own}) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	rs.mu.Lock()
	hook := rs.afterMastery
	rs.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, v.Epoch); err != nil {
			return err
		}
	}
	for {
		rs.mu.Lock()
		got, ch := rs.masteries[v.Epoch], rs.arrived
		missing := ""
		for _, m := range v.Members {
			if got[m.Name] == nil {
				missing = m.Name
				break
			}
		}
		rs.mu.Unlock()
		if missing == "" {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the lock state of %s: %w", missing, ctx.Err())
		}
	}
}

// maxMasteryEpochs bounds the epochs whose Masteries are kept: a peer
// ahead by more than that has views this node will never install anyway.
const maxMasteryEpochs = 8

// storeMasteryLocked files one member's Mastery (the caller's copy is
// kept) and wakes Prepare. Caller holds rs.mu.
func (rs *recoveryState) storeMasteryLocked(from string, m *wire.Mastery) {
	if rs.masteries == nil {
		rs.masteries = map[uint64]map[string]*wire.Mastery{}
	}
	if rs.masteries[m.Epoch] == nil {
		if len(rs.masteries) >= maxMasteryEpochs {
			delete(rs.masteries, slices.Min(slices.Collect(maps.Keys(rs.masteries))))
		}
		rs.masteries[m.Epoch] = map[string]*wire.Mastery{}
	}
	rs.masteries[m.Epoch][from] = m
	if rs.arrived != nil {
		close(rs.arrived)
	}
	rs.arrived = make(chan struct{})
}

// onMastery takes another member's Mastery.
func (n *Node) onMastery(in transport.Inbound, m *wire.Mastery) {
	c := &wire.Mastery{Epoch: m.Epoch, Tables: slices.Clone(m.Tables), Views: slices.Clone(m.Views), Aborted: slices.Clone(m.Aborted)}
	rs := &n.recov
	rs.mu.Lock()
	if n.epoch() < m.Epoch { // a Mastery of a view not suspended here yet
		rs.storeMasteryLocked(in.From, c)
	}
	rs.mu.Unlock()
	if in.ReplyTo.IsRequest() {
		_ = n.links.Reply(in.ReplyTo, &wire.Ack{Epoch: m.Epoch})
	}
}

// --- Suspend: install the view and the plan.

func (h recoveryHost) Suspend(v recovery.View) {
	n := h.n
	rs := &n.recov
	rs.mu.Lock()
	hook := rs.beforeSuspend
	rs.mu.Unlock()
	if hook != nil {
		hook(v.Epoch)
	}
	vw := n.makeView(v)
	rs.mu.Lock()
	all := rs.masteries[v.Epoch]
	for e := range rs.masteries {
		if e <= v.Epoch {
			delete(rs.masteries, e)
		}
	}
	p := makePlan(vw, n.self, all, &rs.mine)
	if rs.announced == rs.invalid {
		rs.invalid, rs.announced = 0, 0 // what was announced covers it
	}
	if rs.mine.suspended(vw, p) {
		// Too many views without a rebuild: the next view rebuilds every
		// table of this node.
		rs.invalid++
	}
	rs.bufFor(v.Epoch)
	zombieHook := rs.afterZombieDrop
	rs.mu.Unlock()
	if p.selfFresh {
		// Before a zombie drops its state: until then the old view still
		// routes here, and a request let in after its shard was emptied
		// would be granted by this node's empty table while the
		// resource's master in the new view grants it too.
		n.gate.unjoin()
	}
	if p.zombie {
		n.log.Warn("recovery: this node missed a view the others went through; dropping all lock state", "epoch", v.Epoch)
		n.dropLockState(fmt.Errorf("%w: the cluster went through a view without this node", ErrNoQuorum))
		rs.mu.Lock()
		rs.mine.suspended(vw, p) // dropLockState emptied it
		rs.mu.Unlock()
		if zombieHook != nil {
			zombieHook(v.Epoch)
		}
	}
	n.gate.epoch.Store(v.Epoch)
	n.view.Store(vw)
	rs.plan.Store(p)
	n.met.moving.Set(float64(p.gated.count()))
	if !p.drop.empty() {
		n.dropBuckets(p)
	}
	n.replayHeld()
}

// dropBuckets drops from the tables the resources of the buckets this node
// gives up, keeping a snapshot of each for its new master (a zombie sends
// none: its tables may be stale). Lock order: a shard's mutex before
// rs.mu, so rs.mu is never held while shards are swept.
func (n *Node) dropBuckets(p *plan) {
	rs := &n.recov
	for _, ls := range n.lockspaceList() {
		sp := &spaceSnapshot{}
		for _, sh := range ls.shards {
			sh.mu.Lock()
			var names []string
			for name := range sh.table.Resources() {
				if p.drop.has(bucketOf(resourceHash(ls.seed, name))) {
					names = append(names, name)
				}
			}
			if len(names) > 0 {
				sp.lastToken = max(sp.lastToken, sh.table.LastToken())
			}
			for _, name := range names {
				rsv, _ := sh.table.Resource(name)
				for _, l := range rsv.Locks {
					delete(sh.demoted, l.Lock)
				}
				if !p.zombie {
					sp.resources = append(sp.resources, rsv)
				}
				sh.table.Drop(name)
			}
			sh.mu.Unlock()
		}
		if len(sp.resources) > 0 {
			rs.mu.Lock()
			if rs.handoff == nil {
				rs.handoff = map[string]*spaceSnapshot{}
			}
			old := rs.handoff[ls.name]
			if old == nil {
				rs.handoff[ls.name] = sp
			} else {
				old.lastToken = max(old.lastToken, sp.lastToken)
				old.resources = append(old.resources, sp.resources...)
			}
			rs.mu.Unlock()
		}
	}
}

// dropLockState ends all of this node's lock state, as an evicted node
// does: its waiting requests fail, its held locks are lost, its tables are
// emptied (forgetLocked says what stays).
func (n *Node) dropLockState(why error) {
	for _, ls := range n.lockspaceList() {
		for _, sh := range ls.shards {
			sh.mu.Lock()
			ls.fenceShardLocked(sh, why, true)
			sh.mu.Unlock()
		}
	}
	rs := &n.recov
	rs.mu.Lock()
	rs.forgetLocked(n.epoch())
	rs.mu.Unlock()
}

// forgetLocked forgets this node's recovery state as it drops all of its
// lock state (a zombie, or an evicted node). Reports for a view after
// epoch, the last one installed here, stay: they are the others' locks on
// what this node masters in that view, sent (and acknowledged) once they
// installed it, which may be before this node does; its rebuild needs
// every one, or the locks they carry would be lost at their master while
// their holders go on believing in them. Caller holds rs.mu.
func (rs *recoveryState) forgetLocked(epoch uint64) {
	rs.dropBufsLocked(epoch)
	rs.mine, rs.handoff, rs.held, rs.incoming, rs.deferred = holdings{}, nil, nil, nil, nil
}

// resetShardLocked empties the shard's table (keeping its token counter's
// reach through the floor) and settles the locks no report will carry.
func (ls *Lockspace) resetShardLocked(sh *shard) {
	floor := max(sh.table.LastToken(), tokenFloor(time.Now()))
	sh.table = master.New(ls.cfg.tableConfig())
	sh.table.RaiseTokenFloor(floor)
	clear(sh.demoted)
	sh.releases = sh.releases[:0]
	sh.unsent = sh.unsent[:0]
}

// --- Report: this node's locks on the moving buckets, and its snapshots.

func (h recoveryHost) Report(ctx context.Context, v recovery.View) error {
	n := h.n
	p := n.recov.plan.Load()
	if p == nil || p.epoch != v.Epoch {
		return fmt.Errorf("report for epoch %d: no plan", v.Epoch)
	}
	vw := n.view.Load()
	out := map[reportKey]*reportChunk{}
	var msgs []routed
	permits := map[reportKey]*wire.PermitReport{}
	var moving []*Lock
	var ids []uint64
	for _, ls := range n.lockspaceList() {
		for _, sh := range ls.shards {
			sh.mu.Lock()
			for id, lk := range sh.locks {
				if p.gated.has(bucketOfLock(id)) { // from the id alone: most locks stay, unread
					moving = append(moving, lk)
					ids = append(ids, id)
				}
			}
			// The moving locks are reported rebuildBatch at a time, the
			// mutex let go between batches, so that requests on the
			// resources that stay are not held up for a whole shard's
			// reports. A lock gone meanwhile is not reported; one added
			// meanwhile is not either, as for a shard already passed.
			for i, lk := range moving {
				if i%rebuildBatch == 0 {
					if i > 0 {
						sh.mu.Unlock()
						yieldRecovery()
						sh.mu.Lock()
					}
					prefetchLocks(moving[i:min(len(moving), i+rebuildBatch)])
				}
				if sh.locks[ids[i]] != lk {
					continue
				}
				if rl, ok := lk.reportLocked(sh); ok {
					lk.reportedAt = v.Epoch
					k := reportKey{vw.masterOf(lk.hash).name, ls.name}
					if lk.semCount() > 0 {
						addPermitReport(permits, k, v.Epoch, lk.reportedPermit(rl))
						continue
					}
					c := out[k]
					if c == nil || c.full() {
						c = &reportChunk{r: &wire.LockReport{Epoch: v.Epoch, Lockspace: ls.name, Locks: make([]wire.ReportedLock, 0, reportLocks)}}
						out[k] = c
						msgs = append(msgs, routed{k.to, c.r})
					}
					c.add(rl)
				}
			}
			sh.mu.Unlock()
			clear(moving)
			moving, ids = moving[:0], ids[:0]
			yieldRecovery()
		}
	}
	for k, r := range permits {
		msgs = append(msgs, splitPermitReport(k.to, r)...)
	}
	msgs = append(msgs, n.masterReports(v, vw, p)...)
	return n.deliverReports(ctx, msgs)
}

// prefetchLocks reads, for each lock, what reporting it reads first (its
// state, its value's length, the first byte of its resource's name) and
// nothing else. Of a million locks hardly any are in the processor's
// caches; reporting one takes those misses one after another, while here
// the reads for different locks do not wait for each other and are
// fetched together. It only warms the caches.
func prefetchLocks(locks []*Lock) {
	var sink uint32
	for _, lk := range locks {
		sink += uint32(lk.state)
		if lk.value != nil {
			sink++
		}
		if len(lk.resource) > 0 {
			sink += uint32(lk.resource[0])
		}
	}
	prefetchSink.Store(sink) // so that the reads are not optimised away
}

var prefetchSink atomic.Uint32

// prefetchReport reads the first byte of each name in a report about to be
// encoded, as prefetchLocks does: built before the others were, its names
// have left the caches.
func prefetchReport(r *wire.LockReport) {
	var sink uint32
	for i := range r.Locks {
		if len(r.Locks[i].Resource) > 0 {
			sink += uint32(r.Locks[i].Resource[0])
		}
	}
	prefetchSink.Store(sink)
}

// prefetchNames reads the first byte of each reported lock's resource
// name, which its restore hashes to find the resource: together, as
// prefetchLocks does.
func prefetchNames(locks []hashedLock) {
	var sink uint32
	for _, k := range locks {
		if len(k.l.Resource) > 0 {
			sink += uint32(k.l.Resource[0])
		}
	}
	prefetchSink.Store(sink)
}

type reportKey struct{ to, lockspace string }

type routed struct {
	to  string
	msg wire.Message
}

// Reports are split so that each message stays well inside a frame: at
// most reportLocks entries and about reportBytes of body. Small enough
// that a report does not keep the lock traffic of unaffected resources,
// which shares the connection, waiting for long behind it.
const (
	reportLocks = 512
	reportBytes = 32 << 10
)

// reportChunk is one LockReport being filled: the holder builds its
// reports in message-sized pieces from the start, so that a hundred
// thousand reported locks cost pieces of one size, never a growing slice
// copied as it doubles.
type reportChunk struct {
	r    *wire.LockReport
	size int // about the body's bytes so far
}

func (c *reportChunk) full() bool { return len(c.r.Locks) >= reportLocks || c.size >= reportBytes }

func (c *reportChunk) add(rl wire.ReportedLock) {
	c.r.Locks = append(c.r.Locks, rl)
	c.size += len(rl.Resource) + len(rl.LVB) + 64
}

// splitMasterReport splits one master's resources into messages, and a
// resource with more locks than one entry may hold into several entries
// (the receiver joins them).
func splitMasterReport(to string, epoch uint64, lockspace string, lastToken uint64, res []wire.ReportedResource) []routed {
	var entries []wire.ReportedResource
	for _, r := range res {
		for first := true; first || len(r.Locks) > 0; first = false {
			e := r
			e.Locks = r.Locks[:min(len(r.Locks), reportLocks)]
			r.Locks = r.Locks[len(e.Locks):]
			entries = append(entries, e)
		}
	}
	var out []routed
	for first := true; first || len(entries) > 0; first = false {
		n, size, locks := 0, 0, 0
		for n < len(entries) && n < reportLocks && size < reportBytes && locks+len(entries[n].Locks) <= 8*reportLocks {
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
	// A conversion to CR or below given up on after it left for a master
	// may have been granted there, and others may have written the value
	// since, while the lock is reported in the mode it had: this holder's
	// copy, with its own write, no longer vouches for the value. (One
	// still in flight is reported converting: its new master judges it,
	// see restoreResource.)
	givenUpDown := lk.pendingConvert && lk.mode > modes.CR && lk.want <= modes.CR
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
		Resource: lk.resource, Lock: lk.id, Owner: uint64(lk.ownerID()),
		Granted: lk.mode, Requested: lk.mode, Token: lk.token, TTL: int64(lk.masterTTL()),
		Session: lk.masterSession(),
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
	if data, seq := lk.heldData(); lk.state != stWaiting && lk.mode > modes.CR && len(data) <= lk.ls.cfg.MaxLVB {
		rl.LVB, rl.LVBSeq, rl.LVBFlags = data, seq, wire.LVBPresent
		if lk.valueOK && !givenUpDown {
			rl.LVBFlags |= wire.LVBValid
		}
	}
	return rl, true
}

// masterReports turns the snapshots of the resources this node gave up
// (in this recovery or an aborted one) into reports for the new masters of
// those that move in p. Each carries the lockspace's highest token, so
// that the new master's tokens start above it.
func (n *Node) masterReports(v recovery.View, vw *view, p *plan) []routed {
	n.recov.mu.Lock()
	snap := maps.Clone(n.recov.handoff)
	n.recov.mu.Unlock()
	var out []routed
	for name, sp := range snap {
		ls := n.lockspace(name)
		byMaster := map[string][]wire.ReportedResource{}
		for _, r := range sp.resources {
			h := resourceHash(ls.seed, r.Name)
			if !p.heldBack(h) {
				continue // its master kept a table of it since: nothing to say
			}
			to := vw.masterOf(h).name
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
// acknowledgement; at most reportLanes are in flight to any one member, so
// that the lock traffic that shares the connection waits behind little.
func (n *Node) deliverReports(ctx context.Context, msgs []routed) error {
	g, ctx := errgroup.WithContext(ctx)
	byPeer := map[string][]routed{}
	for _, r := range msgs {
		if r.to == n.self.name {
			n.acceptReport(n.self.name, r.msg)
			continue
		}
		byPeer[r.to] = append(byPeer[r.to], r)
	}
	for _, rs := range byPeer {
		for lane := range min(reportLanes, len(rs)) {
			g.Go(func() error {
				for i := lane; i < len(rs); i += reportLanes {
					if r, ok := rs[i].msg.(*wire.LockReport); ok {
						prefetchReport(r) // its encoding copies every name
					}
					if err := n.callUntilAcked(ctx, rs[i]); err != nil {
						return err
					}
				}
				return nil
			})
		}
	}
	return g.Wait()
}

// reportLanes is how many reports go to one member at once.
const reportLanes = 4

// callUntilAcked sends one message until it is acknowledged. A member of
// the view may be briefly unreachable (its link is reconnecting after it
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
			return fmt.Errorf("%s to %s: %w", r.msg.Type(), r.to, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s to %s: %w", r.msg.Type(), r.to, err)
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
	case *wire.PermitReport:
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
		sp := buf.space(m.Lockspace)
		sp.locks = append(sp.locks, reportedStates(nodeID(from), m.Locks))
		sp.nlocks += len(m.Locks)
	case *wire.PermitReport:
		buf := rs.bufFor(m.Epoch)
		if buf == nil {
			return
		}
		sp, node := buf.space(m.Lockspace), nodeID(from)
		states := make([]master.LockState, 0, len(m.Permits))
		for _, p := range m.Permits {
			states = append(states, permitState(node, p))
		}
		sp.locks = append(sp.locks, states)
		sp.nlocks += len(states)
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

// reportedStates turns one report's locks into what the new master
// restores, copying what aliases the frame: the value blocks of a report
// share one allocation, and their bytes another, rather than two per lock.
func reportedStates(node master.NodeID, rls []wire.ReportedLock) []master.LockState {
	nlvb, nbytes := 0, 0
	for i := range rls {
		if rls[i].LVBFlags&wire.LVBPresent != 0 {
			nlvb++
			nbytes += len(rls[i].LVB)
		}
	}
	lvbs := make([]master.LVB, 0, nlvb)
	data := make([]byte, 0, nbytes)
	out := make([]master.LockState, len(rls))
	for i := range rls {
		rl := &rls[i]
		out[i] = master.LockState{
			Resource: rl.Resource, Lock: master.LockID{Node: node, ID: rl.Lock}, Owner: master.OwnerID(rl.Owner),
			Queue: master.Queue(rl.Queue), Granted: rl.Granted, Requested: rl.Requested, Token: rl.Token,
			TTL: ticks(time.Duration(rl.TTL)), Session: rl.Session,
		}
		if rl.LVBFlags&wire.LVBPresent != 0 {
			start := len(data)
			data = append(data, rl.LVB...)
			lvbs = append(lvbs, master.LVB{Data: data[start:len(data):len(data)], Seq: rl.LVBSeq, Valid: rl.LVBFlags&wire.LVBValid != 0})
			out[i].LVB = &lvbs[len(lvbs)-1]
		}
	}
	return out
}

// --- Rebuild: purge the nodes that left, restore what moved here.

func (h recoveryHost) Rebuild(v recovery.View) {
	n := h.n
	p := n.recov.plan.Load()
	if p == nil || p.epoch != v.Epoch {
		return
	}
	vw := n.view.Load()
	rs := &n.recov
	rs.mu.Lock()
	hook := rs.beforeRebuild
	rs.mu.Unlock()
	if hook != nil {
		hook(v.Epoch)
	}
	rs.mu.Lock()
	buf := rs.takeBuf(v.Epoch)
	base := rs.mine.base
	rs.mu.Unlock()
	purge := n.purgeSet(vw, base, p)
	floor := tokenFloor(time.Now())
	for _, sp := range buf.spaces {
		floor = max(floor, sp.lastToken)
	}
	if len(purge) > 0 {
		m := map[master.NodeID]uint64{}
		if old := rs.purgedAt.Load(); old != nil {
			maps.Copy(m, *old)
		}
		for id := range purge {
			m[id] = v.Epoch
		}
		rs.purgedAt.Store(&m)
	}
	// Shard by shard, each table is purged, restored and finished before
	// the next is touched: the locks and resources the purge frees are
	// recycled by the restore while they are still in the processor's
	// caches, and each restored resource is settled while it is (at a
	// million locks the rebuild is mostly waiting for memory). The tables
	// kept are served meanwhile: a shard's mutex is taken for batches of
	// rebuildBatch locks or resources at a time, so that a request on a
	// kept resource never waits for a whole shard's rebuild.
	for name := range buf.spaces {
		n.lockspace(name) // a lockspace this node never used, of which it masters some now
	}
	now := n.now()
	purged, restored := 0, 0
	for _, ls := range n.lockspaceList() {
		rb := ls.sortReports(buf.spaces[ls.name], vw, p)
		for _, sh := range ls.shards {
			purged += ls.purgeShard(sh, purge, floor)
			if rb != nil {
				restored += rb.restoreShard(sh, floor, now)
			}
			for more := true; more; {
				sh.mu.Lock()
				more = sh.table.FinishRecoveryUpTo(rebuildBatch)
				ls.deliver(sh)
				sh.mu.Unlock()
				yieldRecovery()
			}
		}
	}
	n.met.purged.Add(float64(purged))
	n.met.rebuilt.Add(float64(restored))
	for b := range numBuckets {
		if p.here.has(b) {
			rs.rebuiltAt[b].Store(v.Epoch)
		}
	}
	rs.mu.Lock()
	rs.mine.rebuilt(vw, n.self)
	rs.handoffMayBeStaleLocked()
	rs.mu.Unlock()
}

// handoffMayBeStaleLocked marks the values of the snapshots this node keeps
// for the new masters of what it gave up not valid. Once this node's
// rebuild is done, the barrier may let the others resume the view and its
// new masters serve, and write, those resources; should a newer view come
// before this node's own Resume (which drops the snapshots), a snapshot
// offered in that view no longer vouches for the value: without a
// survivor's copy, the value rebuilt from it must be not valid. Its queue
// order still helps. Caller holds rs.mu.
func (rs *recoveryState) handoffMayBeStaleLocked() {
	for _, sp := range rs.handoff {
		for i := range sp.resources {
			sp.resources[i].LVB.Valid = false
		}
	}
}

// rebuildBatch is how many locks or resources a rebuild handles under one
// hold of a shard's mutex.
const rebuildBatch = 256

// purgeSet returns the nodes whose locks the tables this node keeps must
// lose: every node that is not a member of v, a member whose boot is not
// the one it had in base (the view the tables were last rebuilt in: their
// locks are that boot's), and every member with no lock state of its own
// (p.fresh), which either never had locks here or dropped them.
func (n *Node) purgeSet(v, base *view, p *plan) map[master.NodeID]bool {
	out := map[master.NodeID]bool{}
	if base == nil {
		return out // the tables hold nothing
	}
	for _, m := range base.members {
		if m.name == n.self.name {
			continue
		}
		if !v.has(m.name, m.bootID) || p.fresh[m.name] {
			out[m.id] = true
		}
	}
	for _, m := range v.members {
		if m.name != n.self.name && p.fresh[m.name] {
			out[m.id] = true
		}
	}
	return out
}

// purgeShard removes from sh's table the locks of the nodes in purge,
// granting what that lets through, and returns how many it removed.
func (ls *Lockspace) purgeShard(sh *shard, purge map[master.NodeID]bool, floor uint64) int {
	sh.mu.Lock()
	sh.table.RaiseTokenFloor(floor)
	ids := slices.Collect(sh.table.Nodes())
	sh.mu.Unlock()
	purged := 0
	for _, id := range ids {
		for more := purge[id]; more; {
			var k int
			sh.mu.Lock()
			k, more = sh.table.PurgeNodeUpTo(id, rebuildBatch)
			ls.deliver(sh)
			sh.mu.Unlock()
			purged += k
			yieldRecovery()
		}
	}
	return purged
}

// spaceRebuild is one lockspace's reported locks, grouped by resource in
// shard order, as its shards' tables restore them.
type spaceRebuild struct {
	ls      *Lockspace
	sp      *spaceReports
	p       *plan
	members map[master.NodeID]bool
	// byShard holds each shard's reported locks, unsorted until the
	// shard's turn: one sort of every reported lock at once would keep a
	// processor for tens of milliseconds at a million locks, with nothing
	// to yield between.
	byShard [][]hashedLock
	rest    []hashedLock // the shard being restored: sorted, not restored yet
	group   []master.LockState
}

// sortReports groups the reported locks of one lockspace by shard, or
// returns nil if none was reported; restoreShard sorts a shard's locks
// by resource when it comes to it.
func (ls *Lockspace) sortReports(sp *spaceReports, v *view, p *plan) *spaceRebuild {
	if sp == nil {
		return nil
	}
	members := map[master.NodeID]bool{}
	for _, m := range v.members {
		if !p.fresh[m.name] || m.name == ls.node.self.name {
			members[m.id] = true
		}
	}
	counts := make([]int, len(ls.shards))
	hashes := make([]uint64, 0, sp.nlocks)
	for _, report := range sp.locks {
		for i := range report {
			h := resourceHash(ls.seed, report[i].Resource)
			hashes = append(hashes, h)
			counts[ls.shardIndex(h)]++
			if len(hashes)%(4*rebuildBatch) == 0 {
				yieldRecovery()
			}
		}
	}
	// One allocation for every shard's group.
	all := make([]hashedLock, 0, len(hashes))
	byShard := make([][]hashedLock, len(ls.shards))
	for i, n := range counts {
		byShard[i] = all[len(all) : len(all) : len(all)+n]
		all = all[:len(all)+n]
	}
	k := 0
	for _, report := range sp.locks {
		for i := range report {
			si := ls.shardIndex(hashes[k])
			byShard[si] = append(byShard[si], hashedLock{hashes[k], &report[i]})
			k++
		}
	}
	return &spaceRebuild{ls: ls, sp: sp, p: p, members: members, byShard: byShard}
}

// sortHashed orders a shard's reported locks by resource hash, the name
// only breaking ties (two names with one hash), then by node and id, so
// that a resource's locks are together and restored in the same order on
// every run.
func sortHashed(keyed []hashedLock) {
	slices.SortFunc(keyed, func(a, b hashedLock) int {
		if c := cmp.Compare(a.h, b.h); c != 0 {
			return c
		}
		if c := cmp.Compare(a.l.Resource, b.l.Resource); c != 0 {
			return c
		}
		if c := cmp.Compare(a.l.Lock.Node, b.l.Lock.Node); c != 0 {
			return c
		}
		return cmp.Compare(a.l.Lock.ID, b.l.Lock.ID)
	})
}

// restoreShard restores into sh's table the reported resources of sh, the
// next shard in hash order, and finishes them. It holds sh's mutex for
// about rebuildBatch locks at a time, so that requests on the resources
// the shard keeps get in between, and finishes each batch before it lets
// go: a resource's locks are all in one batch, and nothing restored later
// concerns it. It returns how many locks it restored.
func (rb *spaceRebuild) restoreShard(sh *shard, floor uint64, now master.Tick) (restored int) {
	ls := rb.ls
	rb.rest = rb.byShard[sh.idx]
	rb.byShard[sh.idx] = nil
	sortHashed(rb.rest)
	sh.mu.Lock()
	sh.table.RaiseTokenFloor(floor)
	sh.table.Tick(now) // a restored request's wait is timed from now on
	held := 0
	release := func() {
		for sh.table.FinishRecoveryUpTo(rebuildBatch) {
		}
		ls.deliver(sh)
		sh.mu.Unlock()
		held = 0
		yieldRecovery()
	}
	for len(rb.rest) > 0 && ls.shardOf(rb.rest[0].h) == sh {
		rest := rb.rest
		n := 1
		for n < len(rest) && rest[n].h == rest[0].h && rest[n].l.Resource == rest[0].l.Resource {
			n++
		}
		rb.rest = rest[n:]
		if !rb.p.rebuildsHere(rest[0].h) {
			continue
		}
		if held >= rebuildBatch {
			release()
			sh.mu.Lock()
		}
		if held == 0 {
			sh.table.ReserveRestore(resourcesIn(rest, sh, ls))
			prefetchNames(rest[:min(len(rest), rebuildBatch)])
		}
		rb.group = rb.group[:0]
		for _, k := range rest[:n] {
			rb.group = append(rb.group, *k.l)
		}
		restored += ls.restoreResource(sh, rb.group, rb.sp.masters[rest[0].l.Resource], rb.members)
		held += n
	}
	release()
	// Value blocks of moved resources that no survivor reported a lock on
	// are gone with the resource, as in VMS: a resource lives while it has
	// a lock.
	return restored
}

// resourcesIn counts the resources of shard sh at the start of keyed
// (sorted by hash, so a shard's locks are together), at most rebuildBatch
// of them: what a batch will restore into sh's table.
func resourcesIn(keyed []hashedLock, sh *shard, ls *Lockspace) int {
	n := 0
	for i := 0; i < len(keyed) && i < rebuildBatch && ls.shardOf(keyed[i].h) == sh; i++ {
		if i == 0 || keyed[i].h != keyed[i-1].h || keyed[i].l.Resource != keyed[i-1].l.Resource {
			n++
		}
	}
	return n
}

// yieldRecovery lets the other runnable goroutines run between batches of
// a recovery's work. Without it a rebuild keeps its processor until the
// scheduler preempts it (10–20 ms), and each goroutine a request on an
// unaffected resource passes through (its writer, the master's reader and
// handler, the way back) may wait that long for a processor: on a node
// with few processors a recovery then pauses the service it does not
// stop.
func yieldRecovery() { runtime.Gosched() }

// hashedLock is a reported lock with its resource's hash, for grouping.
type hashedLock struct {
	h uint64
	l *master.LockState
}

// restoreResource restores one resource from its holders' reports (all for
// the same resource, sorted by node and id) and its old master's snapshot,
// if any: the snapshot's queue order first, then the rest. A reported lock
// that cannot be restored (it conflicts with one restored before it, or
// breaks a limit) is lost: its holder is told so, never left believing.
// It returns how many it restored. Caller holds sh.mu, sh the resource's
// shard.
func (ls *Lockspace) restoreResource(sh *shard, locks []master.LockState, mi *masterInfo, members map[master.NodeID]bool) (restored int) {
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
	// The old master's snapshot, if any, vouches for its value unless a
	// PW/EX holder it lists is gone: that one may have been writing.
	var val master.LVB
	if mi != nil && mi.lvb != nil {
		val = *mi.lvb
		for _, w := range mi.writers {
			reported := slices.ContainsFunc(locks, func(l master.LockState) bool { return l.Lock == w })
			if !members[w.Node] || !reported {
				val.Valid = false
			}
		}
	}
	// A holder converting down to CR or below may have been granted that
	// by the old master, which may have let another writer in since: its
	// copy (its own write) vouches for the value only beside a snapshot
	// that does, which is newer if the conversion went through.
	current := mi != nil && mi.lvb != nil && val.Valid
	for _, l := range locks {
		if !members[l.Lock.Node] {
			continue // its node dropped its state since it reported
		}
		if !current && l.LVB != nil && l.LVB.Valid && l.Queue == master.QueueConverting && l.Granted > modes.CR && l.Requested <= modes.CR {
			v := *l.LVB
			v.Valid = false
			l.LVB = &v
		}
		err := sh.table.Restore(l)
		switch {
		case err == nil:
			restored++
		case errors.Is(err, master.ErrLockExists):
			// reported twice (a resent report): restored already
		default:
			ls.node.log.Error("recovery: a reported lock could not be restored; its holder is told it is lost", "resource", name, "lock", l.Lock, "err", err)
			ls.lostInRecovery(sh, l.Lock, err)
		}
	}
	if mi == nil || mi.lvb == nil {
		return restored
	}
	_ = sh.table.RestoreValue(name, val)
	return restored
}

// lostInRecovery tells the holder of a reported lock that could not be
// restored that it is lost. Caller holds sh.mu (a local lock of the same
// resource lives in the same shard).
func (ls *Lockspace) lostInRecovery(sh *shard, id master.LockID, why error) {
	n := ls.node
	n.met.lostInRecovery.Inc()
	err := fmt.Errorf("its new master could not restore it after a view change: %w", why)
	if id.Node == n.self.id {
		if lk := sh.locks[id.ID]; lk != nil {
			lk.released(sh, err)
		}
		return
	}
	to := n.view.Load().byID[id.Node]
	if to == nil {
		return
	}
	c := &wire.Completion{Epoch: n.epoch(), Lockspace: ls.name, Lock: id.ID, Status: wire.StatusExpired, Err: truncate(err.Error(), wire.MaxErr)}
	if err := n.links.Send(to.name, c); err != nil {
		n.log.Warn("recovery: could not tell a holder its lock is lost", "peer", to.name, "lock", id, "err", err)
	}
}

// --- Resume: the moved buckets are served again.

func (h recoveryHost) Resume(v recovery.View) {
	n := h.n
	rs := &n.recov
	p := rs.plan.Load()
	if p == nil || p.epoch != v.Epoch {
		return
	}
	rs.mu.Lock()
	rs.handoff = nil
	rs.mu.Unlock()
	rs.plan.Store(nil)
	n.met.moving.Set(0)
	close(p.resumed)
	n.gate.join()
	n.sendDeferredUnlocks()
	n.replayHeld()
	for _, ls := range n.lockspaceList() {
		for _, sh := range ls.shards {
			sh.mu.Lock()
			if len(sh.unsent) > 0 {
				sh.resendLocked()
			}
			sh.mu.Unlock()
		}
	}
}

// sendDeferredUnlocks sends the unlocks made on a bucket that was being
// rebuilt, or that found their master unreachable; those that still cannot
// go wait for the next tick.
func (n *Node) sendDeferredUnlocks() {
	rs := &n.recov
	rs.mu.Lock()
	todo := rs.deferred
	rs.deferred = nil
	rs.mu.Unlock()
	var failed []deferredUnlock
	p := rs.plan.Load()
	for _, d := range todo {
		if p.heldBack(d.hash) || !d.send(n) {
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
	n.gate.setQuorum(false)
	if evicted {
		n.gate.unjoin()
	}
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
		rs.forgetLocked(n.epoch())
		rs.mu.Unlock()
	}
}

// fenceShardLocked ends what a node without quorum may not do: its waiting
// requests fail, its held locks are lost, and the requests queued on the
// tables it masters fail. An evicted node also forgets everything.
func (ls *Lockspace) fenceShardLocked(sh *shard, why error, evicted bool) {
	for _, lk := range sh.locks {
		ls.fenceLockLocked(sh, lk, why)
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

// fenceLockLocked ends what a node without quorum may not do with lk: a
// waiting request fails (a grant that still comes is given back), a
// conversion fails, a held lock is lost. Caller holds sh.mu.
func (ls *Lockspace) fenceLockLocked(_ *shard, lk *Lock, why error) {
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
}

// errLeaseEnded is why a grant that came after this node's lease ended,
// before the Manager noticed, is refused.
var errLeaseEnded = fmt.Errorf("%w: this node's quorum lease ended", ErrNoQuorum)

func (h recoveryHost) LeaseRegained() { h.n.gate.setQuorum(true) }

// linkLost records that lock messages between this node and peer may have
// been lost (both ways), and asks for a new view. If the peer (this boot of
// it) is a member of that view, this node's tables are unreliable: the view
// rebuilds every table this node masters from its holders' reports (the
// peer does the same with its own). If the peer died, the view without it
// moves its share alone.
func (n *Node) linkLost(peer string) {
	var boot uint64
	if m := n.view.Load().byName[peer]; m != nil {
		boot = m.bootID
	}
	rs := &n.recov
	rs.mu.Lock()
	if rs.linkLost == nil {
		rs.linkLost = map[string]uint64{}
	}
	rs.linkLost[peer] = boot
	rs.mu.Unlock()
	n.rec.RequestResync()
}

// tablesUnreliableLocked reports whether a lost link to a member of v (in
// the boot the link had) makes this node's tables unreliable, and forgets
// the links that v settles: those to its members, and those to nodes that
// are gone. Caller holds rs.mu.
func (rs *recoveryState) tablesUnreliableLocked(v recovery.View) bool {
	bad := false
	for peer, boot := range rs.linkLost {
		if v.Has(recovery.Member{Name: peer, BootID: boot}) {
			bad = true
		}
		delete(rs.linkLost, peer)
	}
	return bad
}

// --- Held lock messages.

// maxHeld bounds the lock messages held back during a recovery; past it a
// message is dropped (and logged), and its sender's request waits until
// its context ends.
const maxHeld = 1 << 18

// hold keeps a lock message for later (see admit). It copies what aliases
// the frame. Caller holds rs.mu.
func (rs *recoveryState) holdLocked(n *Node, list *[]parked, in transport.Inbound) {
	in.Msg = cloneMessage(in.Msg)
	if in.Msg == nil {
		return
	}
	if len(rs.held)+len(rs.incoming) >= maxHeld {
		n.log.Error("recovery: too many lock messages held back; one dropped", "from", in.From, "type", in.Msg.Type().String())
		return
	}
	*list = append(*list, parked{in})
}

// replayHeld hands the held lock messages on again (at Suspend, when their
// view is installed, and at Resume, when their bucket is rebuilt), in the
// order they came; those that must still wait are held again, in order.
// Messages that arrive meanwhile queue behind the replay.
func (n *Node) replayHeld() {
	rs := &n.recov
	rs.mu.Lock()
	todo := rs.held
	rs.held = nil
	rs.replaying.Store(true)
	rs.mu.Unlock()
	for {
		for _, p := range todo {
			n.handleRequest(p.in, true)
		}
		rs.mu.Lock()
		todo = rs.incoming
		rs.incoming = nil
		if len(todo) == 0 {
			rs.replaying.Store(false)
			rs.mu.Unlock()
			return
		}
		rs.mu.Unlock()
	}
}

func cloneMessage(m wire.Message) wire.Message {
	switch m := m.(type) {
	case *wire.LockRequest:
		c := *m
		return &c
	case *wire.SemaphoreRequest:
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
