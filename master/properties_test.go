package master

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/seed-a6839e30/dlm/modes"
	"pgregory.net/rapid"
)

// tableMachine drives a Table with random requests, conversions, releases,
// cancels, ticks, purges and remasters, and checks the invariants of the
// lock rules after every step.
type tableMachine struct {
	t      *Table
	nextID map[NodeID]uint64
	// queuedAt orders queued requests: a lock's sequence number when its
	// request or conversion was queued.
	queuedAt map[LockID]uint64
	seq      uint64
	// pending holds the locks whose request or conversion is queued and
	// still owes exactly one terminal effect.
	pending map[LockID]bool
	// maxToken is the highest token seen per resource; lvbSeq the highest
	// value sequence seen per live resource.
	maxToken map[string]uint64
	lvbSeq   map[string]uint64
	// grantedNow collects the queued locks granted by the current step.
	grantedNow []grantedLock
	// queueOf says which queue a pending lock waits on; stepStart is seq
	// before the current step.
	queueOf   map[LockID]Queue
	stepStart uint64
	newTokens []resToken // tokens issued by the current step
	unordered bool       // the current step is a recovery: no order to check
	// observed are wait-for edges seen by Observe, each with the instance
	// (queuedAt) of its waiter's request and whether it has stopped
	// holding at some step since.
	observed []observedEdge
	// edgesOnly keeps the machine to what makes and breaks wait-for edges:
	// no timeouts, TTLs, purges or remastering, and owners that hold
	// several locks, so that edges live long enough to be confirmed.
	edgesOnly bool
}

type observedEdge struct {
	e      WaitEdge
	inst   uint64
	broken bool
}

var (
	propResources = []string{"a", "b", "c"}
	propNodes     = []NodeID{1, 2, 3, 4}
)

func newTableMachine() *tableMachine {
	cfg := DefaultConfig()
	cfg.MaxLVB = 8
	cfg.MaxWaitersPerResource = 6
	return &tableMachine{
		t: New(cfg), nextID: map[NodeID]uint64{}, queuedAt: map[LockID]uint64{},
		pending: map[LockID]bool{}, queueOf: map[LockID]Queue{}, maxToken: map[string]uint64{}, lvbSeq: map[string]uint64{},
	}
}

func (m *tableMachine) locks() []LockState {
	var all []LockState
	for _, name := range propResources {
		if rs, ok := m.t.Resource(name); ok {
			all = append(all, rs.Locks...)
		}
	}
	return all
}

func (m *tableMachine) pick(rt *rapid.T, filter func(LockState) bool) (LockState, bool) {
	var c []LockState
	for _, ls := range m.locks() {
		if filter(ls) {
			c = append(c, ls)
		}
	}
	if len(c) == 0 {
		return LockState{}, false
	}
	return rapid.SampledFrom(c).Draw(rt, "lock"), true
}

func drawMode(rt *rapid.T, label string) modes.Mode {
	return modes.Mode(rapid.IntRange(0, modes.Count-1).Draw(rt, label))
}

func (m *tableMachine) Request(rt *rapid.T) {
	node := rapid.SampledFrom(propNodes).Draw(rt, "node")
	m.nextID[node]++
	req := Request{
		Resource: rapid.SampledFrom(propResources).Draw(rt, "res"),
		Lock:     LockID{Node: node, ID: m.nextID[node]},
		Owner:    OwnerID(rapid.IntRange(0, 3).Draw(rt, "owner")),
		Mode:     drawMode(rt, "mode"),
		Timeout:  Tick(rapid.SampledFrom([]int{0, 0, 2, 5}).Draw(rt, "timeout")),
		TTL:      Tick(rapid.SampledFrom([]int{0, 0, 0, 4}).Draw(rt, "ttl")),
	}
	if m.edgesOnly {
		req.Timeout, req.TTL = 0, 0
	}
	if req.TTL > 0 {
		req.Session = uint64(rapid.IntRange(0, 2).Draw(rt, "session"))
	}
	switch rapid.IntRange(0, 5).Draw(rt, "flags") {
	case 0:
		req.Flags = NoQueue
	case 1:
		if req.Mode == modes.NL {
			req.Flags = Expedite
		}
	}
	res, err := m.t.Request(req)
	if err != nil {
		if !errors.Is(err, ErrNotQueued) && !errors.Is(err, ErrLimit) {
			rt.Fatalf("request %+v: %v", req, err)
		}
	}
	m.noteResult(rt, req.Resource, req.Lock, res, err, true, modes.NL)
}

func (m *tableMachine) Convert(rt *rapid.T) {
	ls, ok := m.pick(rt, func(ls LockState) bool { return ls.Queue == QueueGranted })
	if !ok {
		rt.Skip("no granted lock")
	}
	c := Convert{Lock: ls.Lock, Owner: ls.Owner, Mode: drawMode(rt, "mode")}
	switch rapid.IntRange(0, 5).Draw(rt, "flags") {
	case 0:
		c.Flags = NoQueue
	case 1:
		if modes.IsUp(ls.Granted, c.Mode) {
			c.Flags = QueueConvert
		}
	case 2:
		c.Flags = ConvDeadlock
	}
	if rapid.Bool().Draw(rt, "write") {
		c.LVBOp, c.LVB = LVBWrite, []byte(fmt.Sprint(m.seq))
	}
	c.Timeout = Tick(rapid.SampledFrom([]int{0, 3}).Draw(rt, "timeout"))
	if m.edgesOnly {
		c.Timeout = 0
	}
	res, err := m.t.Convert(c)
	if err != nil && !errors.Is(err, ErrNotQueued) && !errors.Is(err, ErrLimit) && !errors.Is(err, ErrDeadlock) {
		rt.Fatalf("convert %+v: %v", c, err)
	}
	m.noteResult(rt, ls.Resource, ls.Lock, res, err, false, ls.Granted)
}

func (m *tableMachine) Release(rt *rapid.T) {
	ls, ok := m.pick(rt, func(LockState) bool { return true })
	if !ok {
		rt.Skip("no lock")
	}
	rel := Release{Lock: ls.Lock, Owner: ls.Owner}
	if rapid.Bool().Draw(rt, "write") {
		rel.LVBOp, rel.LVB = LVBWrite, []byte(fmt.Sprint(m.seq))
	}
	if err := m.t.Release(rel); err != nil {
		rt.Fatalf("release %v: %v", ls.Lock, err)
	}
	m.step(rt)
	if err := m.t.Release(rel); !errors.Is(err, ErrReleased) {
		rt.Fatalf("double release %v: %v, want ErrReleased", ls.Lock, err)
	}
}

func (m *tableMachine) Cancel(rt *rapid.T) {
	ls, ok := m.pick(rt, func(ls LockState) bool { return ls.Queue != QueueGranted })
	if !ok {
		rt.Skip("nothing queued")
	}
	if err := m.t.Cancel(ls.Lock, ls.Owner); err != nil {
		rt.Fatalf("cancel %v: %v", ls.Lock, err)
	}
	m.step(rt)
}

func (m *tableMachine) Tick(rt *rapid.T) {
	if m.edgesOnly {
		rt.Skip("edges only")
	}
	m.t.Tick(m.t.Now() + Tick(rapid.IntRange(0, 4).Draw(rt, "dt")))
	m.step(rt)
}

func (m *tableMachine) RenewSession(rt *rapid.T) {
	if m.edgesOnly {
		rt.Skip("edges only")
	}
	m.t.RenewSession(rapid.SampledFrom(propNodes).Draw(rt, "node"), uint64(rapid.IntRange(1, 2).Draw(rt, "session")))
	m.step(rt)
}

// checkLeases: every granted lock of a session is listed by its lease and
// expires with it, after now (Tick released what was due); a lease's timer
// is in the heap exactly while it has an expiry, and a dormant lease has
// requests waiting.
func (m *tableMachine) checkLeases(rt *rapid.T) {
	t := m.t
	for _, ns := range t.nodes {
		for id, l := range ns.locks {
			ls := l.leaseOf()
			if ls == nil || l.queue == QueueWaiting {
				continue
			}
			if !slices.Contains(ls.ids, id) || ls.tm.expires <= t.now || ns.leases[ls.session] != ls {
				rt.Fatalf("lock %v of session %d: listed %v, lease expires %d at %d", l.key(), ls.session, slices.Contains(ls.ids, id), ls.tm.expires, t.now)
			}
		}
		for _, ls := range ns.leases {
			inHeap := ls.tm.index >= 0 && int(ls.tm.index) < len(t.timers.h) && t.timers.h[ls.tm.index] == &ls.tm
			if inHeap != (ls.tm.expires != 0) || (ls.tm.expires == 0 && ls.waiting <= 0) {
				rt.Fatalf("lease n%d/%d: in heap %v, expires %d, waiting %d", ls.node, ls.session, inHeap, ls.tm.expires, ls.waiting)
			}
		}
	}
}

func (m *tableMachine) Purge(rt *rapid.T) {
	if m.edgesOnly {
		rt.Skip("edges only")
	}
	node := rapid.SampledFrom(propNodes).Draw(rt, "node")
	m.t.PurgeNode(node)
	for id := range m.pending {
		if id.Node == node {
			delete(m.pending, id)
		}
	}
	m.nextID[node] += 1000 // a restarted node's ids need not continue
	m.step(rt)
}

// Remaster moves every resource to a new table the way recovery does:
// survivors report their locks (with their copy of the value when they hold
// more than CR), the old master offers its own copy, the floor goes above
// every token issued.
func (m *tableMachine) Remaster(rt *rapid.T) {
	if m.edgesOnly {
		rt.Skip("edges only")
	}
	old := m.t
	nt := New(old.Config())
	nt.Tick(old.Now())
	nt.RaiseTokenFloor(old.LastToken())
	// dlm finishes the rebuild batch by batch, a resource's locks all in
	// one batch: finishing after each resource is the same rebuild.
	eachResource := rapid.Bool().Draw(rt, "finish each resource")
	for _, name := range propResources {
		if eachResource {
			nt.FinishRecovery()
		}
		rs, ok := old.Resource(name)
		if !ok {
			continue
		}
		for _, ls := range rs.Locks {
			if ls.Granted > modes.CR && ls.Queue != QueueWaiting {
				v := rs.LVB
				ls.LVB = &v
			}
			if err := nt.Restore(ls); err != nil {
				rt.Fatalf("restore %v: %v", ls, err)
			}
		}
		if err := nt.RestoreValue(name, rs.LVB); err != nil {
			rt.Fatal(err)
		}
	}
	m.t = nt
	m.observed = nil // another table: its generations start over
	m.unordered = true
	nt.FinishRecovery()
	m.step(rt)
	m.unordered = false
}

// noteResult records what a request or conversion returned.
func (m *tableMachine) noteResult(rt *rapid.T, res string, id LockID, r Result, err error, isNew bool, from modes.Mode) {
	if err == nil {
		switch r.Status {
		case Queued:
			m.seq++
			m.queuedAt[id] = m.seq
			m.pending[id] = true
			m.queueOf[id] = QueueConverting
			if isNew {
				m.queueOf[id] = QueueWaiting
			}
		case Granted:
			if isNew || modes.IsUp(from, r.Mode) {
				m.newTokens = append(m.newTokens, resToken{res, r.Token})
			}
		}
	}
	m.step(rt)
}

// checkTokens: every token issued by one call is new and larger than any
// issued before on its resource. (Within one call the order of the result
// and the effects does not say which was issued first.)
func (m *tableMachine) checkTokens(rt *rapid.T) {
	high := map[string]uint64{}
	seen := map[uint64]bool{}
	for _, nt := range m.newTokens {
		if nt.tok <= m.maxToken[nt.res] || seen[nt.tok] {
			rt.Fatalf("token %d on %q not above %d, or issued twice", nt.tok, nt.res, m.maxToken[nt.res])
		}
		seen[nt.tok] = true
		high[nt.res] = max(high[nt.res], nt.tok)
	}
	for res, tok := range high {
		m.maxToken[res] = tok
	}
	m.newTokens = m.newTokens[:0]
}

type resToken struct {
	res string
	tok uint64
}

// step drains the effects of the last call and checks every invariant.
func (m *tableMachine) step(rt *rapid.T) {
	m.grantedNow = m.grantedNow[:0]
	for _, e := range m.t.Effects() {
		switch e.Kind {
		case EffectGranted:
			m.newTokens = append(m.newTokens, resToken{e.Resource, e.Token})
			m.grantedNow = append(m.grantedNow, grantedLock{e.Resource, e.Lock, m.queueOf[e.Lock]})
			fallthrough
		case EffectFailed:
			if !m.pending[e.Lock] {
				rt.Fatalf("terminal effect for %v, which had nothing pending: %v", e.Lock, e)
			}
			delete(m.pending, e.Lock)
		case EffectReleased:
			delete(m.pending, e.Lock)
		}
	}
	m.checkTokens(rt)
	m.check(rt)
	m.checkEdges(rt)
	m.checkLeases(rt)
	m.stepStart = m.seq
}

// Observe remembers the wait-for edges there are now (and forgets the
// oldest observations past a few dozen).
func (m *tableMachine) Observe(rt *rapid.T) {
	if n := len(m.observed); n > 64 {
		m.observed = append(m.observed[:0], m.observed[n-32:]...)
	}
	for e := range m.t.WaitEdges() {
		m.observed = append(m.observed, observedEdge{e: e, inst: m.queuedAt[e.Waiter.Lock]})
	}
	m.step(rt)
}

// FailObserved fails the waiter of an observed edge by its generation, as a
// deadlock detector does: it must succeed exactly when that same request is
// still queued, and otherwise change nothing.
func (m *tableMachine) FailObserved(rt *rapid.T) {
	if len(m.observed) == 0 {
		rt.Skip("nothing observed")
	}
	o := rapid.SampledFrom(m.observed).Draw(rt, "edge")
	w := o.e.Waiter.Lock
	same := m.pending[w] && m.queuedAt[w] == o.inst
	before := m.t.Dump()
	err := m.t.FailRequest(w, o.e.WaiterGen, fmt.Errorf("%w: test", ErrDeadlock))
	switch {
	case same && err != nil:
		rt.Fatalf("fail %v gen %d, still queued: %v", w, o.e.WaiterGen, err)
	case !same && err == nil:
		rt.Fatalf("fail %v gen %d succeeded, but that request is no longer queued", w, o.e.WaiterGen)
	case !same && m.t.Dump() != before:
		rt.Fatalf("a refused FailRequest changed the table:\n%s\n%s", before, m.t.Dump())
	}
	if same {
		var failed bool
		for _, e := range m.t.pending {
			failed = failed || (e.Kind == EffectFailed && e.Lock == w && errors.Is(e.Err, ErrDeadlock))
		}
		if !failed {
			rt.Fatalf("FailRequest of %v produced no deadlock failure", w)
		}
	}
	m.step(rt)
}

// checkEdges checks the claim deadlock detection rests on: an observed edge
// that EdgeHolds confirms has held at every step since it was observed. It
// also checks that the list of queued requests agrees with the queues.
func (m *tableMachine) checkEdges(rt *rapid.T) {
	for i := range m.observed {
		o := &m.observed[i]
		if !m.edgeTrue(o) {
			o.broken = true
		}
		if o.broken && m.t.EdgeHolds(o.e) {
			rt.Fatalf("EdgeHolds confirms %+v, which stopped holding after it was observed", o.e)
		}
	}
	all := map[WaitEdge]int{}
	for e := range m.t.WaitEdges() {
		all[e]++
		if !m.t.EdgeHolds(e) {
			rt.Fatalf("EdgeHolds denies an edge just yielded: %+v", e)
		}
	}
	var last Tick
	for e := range m.t.WaitEdgesQueuedBy(m.t.Now()) {
		if e.Since < last || e.Since > m.t.Now() {
			rt.Fatalf("queued-by edges out of order: since %d after %d", e.Since, last)
		}
		last = e.Since
		all[e]--
	}
	for e, n := range all {
		if n != 0 {
			rt.Fatalf("WaitEdges and WaitEdgesQueuedBy disagree on %+v (%d)", e, n)
		}
	}
}

// edgeTrue says, from the queues alone, whether the observed edge holds
// now: its waiter's request (the same instance) is queued, and its blocker
// holds a mode that conflicts with it or is queued ahead of it.
func (m *tableMachine) edgeTrue(o *observedEdge) bool {
	w := o.e.Waiter.Lock
	if !m.pending[w] || m.queuedAt[w] != o.inst {
		return false
	}
	rs, ok := m.t.Resource(o.e.Resource)
	if !ok {
		return false
	}
	wi := slices.IndexFunc(rs.Locks, func(ls LockState) bool { return ls.Lock == w })
	bi := slices.IndexFunc(rs.Locks, func(ls LockState) bool { return ls.Lock == o.e.Blocker.Lock })
	if wi < 0 || bi < 0 || wi == bi || rs.Locks[wi].Queue == QueueGranted {
		return false
	}
	b := rs.Locks[bi]
	return (b.Queue != QueueWaiting && !modes.Compatible(b.Granted, rs.Locks[wi].Requested)) ||
		(b.Queue != QueueGranted && bi < wi)
}

type grantedLock struct {
	res   string
	id    LockID
	queue Queue
}

func (m *tableMachine) check(rt *rapid.T) {
	seen := map[LockID]bool{}
	queued := map[LockID]bool{}
	for _, name := range propResources {
		rs, ok := m.t.Resource(name)
		if !ok {
			delete(m.lvbSeq, name)
			continue
		}
		if rs.LVB.Seq < m.lvbSeq[name] {
			rt.Fatalf("%q value sequence went back from %d to %d", name, m.lvbSeq[name], rs.LVB.Seq)
		}
		m.lvbSeq[name] = rs.LVB.Seq
		for _, ls := range rs.Locks {
			if seen[ls.Lock] {
				rt.Fatalf("%v is on two queues", ls.Lock)
			}
			seen[ls.Lock] = true
			if ls.Queue != QueueGranted {
				queued[ls.Lock] = true
			}
		}
		checkCompatible(rt, rs)
		checkQuiescent(rt, rs)
		if !m.unordered {
			m.checkOrder(rt, rs)
		}
	}
	for id := range m.pending {
		if !queued[id] {
			rt.Fatalf("%v owes a terminal effect but is not queued", id)
		}
	}
	for id := range queued {
		if !m.pending[id] {
			rt.Fatalf("%v is queued but nothing is pending for it", id)
		}
	}
	if _, n := m.t.Len(); n != len(seen) {
		rt.Fatalf("lock index has %d locks, queues %d", n, len(seen))
	}
}

// checkCompatible: no two locks granted on a resource are incompatible
// (a lock with a queued conversion still holds its granted mode).
func checkCompatible(rt *rapid.T, rs ResourceState) {
	for i, a := range rs.Locks {
		for _, b := range rs.Locks[i+1:] {
			if a.Queue != QueueWaiting && b.Queue != QueueWaiting && !modes.Compatible(a.Granted, b.Granted) {
				rt.Fatalf("%q: %v and %v granted together", rs.Name, a, b)
			}
		}
	}
}

// checkQuiescent: after every call, the head of the queue that may move
// (conversions first) cannot be granted; otherwise a wakeup was lost.
func checkQuiescent(rt *rapid.T, rs ResourceState) {
	var head *LockState
	for i := range rs.Locks {
		if rs.Locks[i].Queue == QueueConverting {
			head = &rs.Locks[i]
			break
		}
	}
	if head == nil {
		for i := range rs.Locks {
			if rs.Locks[i].Queue == QueueWaiting {
				head = &rs.Locks[i]
				break
			}
		}
	}
	if head == nil {
		return
	}
	for _, o := range rs.Locks {
		if o.Lock != head.Lock && o.Queue != QueueWaiting && !modes.Compatible(o.Granted, head.Requested) {
			return
		}
	}
	rt.Fatalf("%q: %v could be granted but waits\n%v", rs.Name, *head, rs.Locks)
}

// checkOrder: a queued request granted by this step was not overtaken. A
// granted conversion leaves no conversion queued before it; a granted
// waiter leaves no conversion queued before this step, and no waiter queued
// before it.
func (m *tableMachine) checkOrder(rt *rapid.T, rs ResourceState) {
	for _, g := range m.grantedNow {
		if g.res != rs.Name {
			continue
		}
		for _, ls := range rs.Locks {
			earlier := m.queuedAt[ls.Lock] < m.queuedAt[g.id]
			switch {
			case ls.Queue == QueueConverting && g.queue == QueueConverting && earlier,
				ls.Queue == QueueConverting && g.queue == QueueWaiting && m.queuedAt[ls.Lock] <= m.stepStart,
				ls.Queue == QueueWaiting && g.queue == QueueWaiting && earlier:
				rt.Fatalf("%q: %v granted past %v", rs.Name, g.id, ls)
			}
		}
	}
}

func TestTableProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newTableMachine()
		rt.Repeat(rapid.StateMachineActions(m))
	})
}

// TestWaitEdgeProperties runs the machine on what makes and breaks wait-for
// edges, where checkEdges has the most to check: an edge EdgeHolds confirms
// held at every step since it was observed, and FailRequest fails exactly
// the request observed, if it is still queued.
func TestWaitEdgeProperties(t *testing.T) {
	var confirmed, broken int
	rapid.Check(t, func(rt *rapid.T) {
		m := newTableMachine()
		m.edgesOnly = true
		rt.Repeat(rapid.StateMachineActions(m))
		for _, o := range m.observed {
			if m.t.EdgeHolds(o.e) {
				confirmed++
			} else if o.broken && m.pending[o.e.Waiter.Lock] && m.queuedAt[o.e.Waiter.Lock] == o.inst {
				broken++ // the waiter still waits, but this edge broke meanwhile
			}
		}
	})
	t.Logf("at the end of the runs: %d observed edges still confirmed, %d broken under a waiter still queued", confirmed, broken)
}

// Check is the invariant rapid runs after every action; step already
// checked after each call, so there is nothing more to do.
func (m *tableMachine) Check(*rapid.T) {}
