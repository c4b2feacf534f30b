package master

import (
	"fmt"

	"github.com/seed-a6839e30/dlm/modes"
)

// resource is the state of one resource this table masters. It exists while
// it has at least one lock; its LVB lives and dies with it, as in VMS and
// Linux (an NL lock is how a user keeps a value alive).
type resource struct {
	name    string
	granted lockList // granted locks with nothing queued, in grant order
	convert lockList // granted locks with a queued conversion, FIFO
	wait    lockList // new requests, FIFO
	lvb     *lvbState
	// held summarises the granted modes of every lock on granted and
	// convert, so a compatibility check costs a few counters, not a walk.
	held    heldModes
	nqueued uint32 // len(convert) + len(wait)
}

// lock is one lock. Field order keeps it at 64 bytes.
type lock struct {
	id    uint64
	node  NodeID
	mode  modes.Mode // granted mode; meaningless while queue == QueueWaiting
	rq    modes.Mode // requested mode; == mode once settled
	bast  modes.Mode // strongest mode notified this blocking episode; NL = none
	queue Queue
	owner OwnerID
	res   *resource
	prev  *lock
	next  *lock
	token uint64
	timer *timer // nil unless the lock has a timeout or a TTL, or a request queued
}

func (l *lock) key() LockID { return LockID{Node: l.node, ID: l.id} }

type lvbState struct {
	data  []byte
	seq   uint64
	valid bool
}

// nodeStats tracks what the table knows of one requesting node: its locks,
// indexed by the id the node gave them (a map per node keys on 8 bytes, not
// 16, and makes purging a node cost its own locks only), and the highest id
// it has used.
type nodeStats struct {
	maxID  uint64
	locks  map[uint64]*lock
	leases map[uint64]*lease // by session; nil until the node's first
}

// Table is the lock table of the resources one node masters in one lockspace.
// It is a pure state machine: no goroutines, clock, network or context. It is
// not safe for concurrent use; its owner serialises calls. See the package
// documentation for the rules it follows.
type Table struct {
	cfg    Config
	res    map[string]*resource
	nodes  map[NodeID]*nodeStats
	nlocks int
	// lastNode caches the stats of the node seen last: on a master most
	// traffic comes from few nodes, and this saves a map lookup per call.
	lastNode  NodeID
	lastStats *nodeStats

	now       Tick
	lastToken uint64    // last fencing token issued, by any resource
	floor     uint64    // tokens issued from now on are above this
	timers    timerHeap // of locks and of sessions' leases

	// queued is the sentinel of the list of queued requests and conversions
	// (through their timers), in the order they were queued, so oldest
	// first; lastGen is the last request generation issued.
	queued  timer
	lastGen uint64

	pending, out           []Effect
	pendingArena, outArena []byte

	// recovering indexes restores by resource: what recovery learned of
	// each resource restored since the last FinishRecovery, in the order
	// of their first Restore.
	recovering map[*resource]int32
	restores   []restoreInfo
	// purgeVictims and purgeTouched are PurgeNodeUpTo's scratch, kept
	// between its batches: a purge of a million locks in batches of a few
	// hundred then allocates nothing per batch.
	purgeVictims []*lock
	purgeTouched map[*resource]struct{}
	prefetched   uint8 // what prefetch read, kept only so that it reads

	freeLocks  []*lock
	freeRes    []*resource
	freeTimers []*timer // of requests that queued and left
}

// freeListCap bounds the recycled locks and resources a table keeps, so a
// burst does not pin memory forever.
const freeListCap = 4096

// New returns an empty table. It panics if cfg is invalid; call cfg.Validate
// first where cfg comes from a user.
func New(cfg Config) *Table {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	t := &Table{
		cfg:   cfg,
		res:   make(map[string]*resource),
		nodes: make(map[NodeID]*nodeStats),
	}
	t.queued.qprev, t.queued.qnext = &t.queued, &t.queued
	return t
}

// Config returns the table's limits.
func (t *Table) Config() Config { return t.cfg }

// Now returns the last tick given to Tick.
func (t *Table) Now() Tick { return t.now }

// Len returns the number of resources and locks in the table.
func (t *Table) Len() (resources, locks int) { return len(t.res), t.nlocks }

// LastToken returns a bound on the tokens this table has issued: the highest
// it issued or learned of through Restore, or its floor if that is higher. A
// table that takes over must raise its floor to at least this.
func (t *Table) LastToken() uint64 { return max(t.lastToken, t.floor) }

// RaiseTokenFloor makes every token issued from now on larger than floor.
// Recovery raises it above anything an earlier master may have issued. It
// never lowers the floor.
func (t *Table) RaiseTokenFloor(floor uint64) {
	if floor > t.floor {
		t.floor = floor
	}
}

// TokenFloor returns the current floor.
func (t *Table) TokenFloor() uint64 { return t.floor }

// nextToken issues a fencing token. One counter serves every resource of the
// table, so a resource that is freed and created again still never sees a
// token go back.
func (t *Table) nextToken() uint64 {
	t.lastToken = max(t.lastToken, t.floor) + 1
	return t.lastToken
}

func (t *Table) node(id NodeID) *nodeStats {
	if t.lastStats != nil && t.lastNode == id {
		return t.lastStats
	}
	ns := t.nodes[id]
	if ns == nil {
		ns = &nodeStats{locks: make(map[uint64]*lock)}
		t.nodes[id] = ns
	}
	t.lastNode, t.lastStats = id, ns
	return ns
}

func (t *Table) newLock(id LockID, owner OwnerID, r *resource) *lock {
	var l *lock
	if n := len(t.freeLocks); n > 0 {
		l = t.freeLocks[n-1]
		t.freeLocks = t.freeLocks[:n-1]
	} else {
		l = new(lock)
	}
	*l = lock{id: id.ID, node: id.Node, owner: owner, res: r}
	return l
}

// addLock registers l in the lock index and its node's count.
func (t *Table) addLock(l *lock, ns *nodeStats) {
	ns.locks[l.id] = l
	ns.maxID = max(ns.maxID, l.id)
	t.nlocks++
}

// dropLock removes l from the index and recycles it. l must already be off
// every queue.
func (t *Table) dropLock(l *lock) {
	delete(t.node(l.node).locks, l.id)
	t.nlocks--
	if tm := l.timer; tm != nil && tm.lock == l {
		if tm.lease != nil && tm.ttl != 0 { // a new request of the session, not granted
			t.leaveWaiting(tm.lease)
		}
		tm.dequeue()
		t.timers.remove(tm)
		tm.lock, tm.lease = nil, nil
	}
	*l = lock{}
	if len(t.freeLocks) < freeListCap {
		t.freeLocks = append(t.freeLocks, l)
	}
}

// resource returns the named resource, creating it if create is set.
func (t *Table) resource(name string, create bool) *resource {
	if r := t.res[name]; r != nil || !create {
		return r
	}
	return t.newResource(name)
}

// newResource creates the named resource, which the table must not have.
func (t *Table) newResource(name string) *resource {
	var r *resource
	if n := len(t.freeRes); n > 0 {
		r = t.freeRes[n-1]
		t.freeRes = t.freeRes[:n-1]
		lvb := r.lvb
		*r = resource{name: name}
		if lvb != nil {
			// Keep the buffer, not the value: a new resource starts empty.
			lvb.data, lvb.seq, lvb.valid = lvb.data[:0], 0, true
			r.lvb = lvb
		}
	} else {
		r = &resource{name: name}
	}
	t.res[name] = r
	return r
}

func (r *resource) empty() bool {
	return r.granted.empty() && r.convert.empty() && r.wait.empty()
}

// maybeFree deletes r if no lock is left on it.
func (t *Table) maybeFree(r *resource) {
	if !r.empty() {
		return
	}
	delete(t.res, r.name)
	// A rebuild of r, if any, is over: r may be reused for another name.
	if i, ok := t.recovering[r]; ok {
		t.restores[i].r = nil
		delete(t.recovering, r)
	}
	if len(t.freeRes) < freeListCap {
		r.name = ""
		t.freeRes = append(t.freeRes, r)
	}
}

// lookup finds the lock a convert, release or cancel is about, and checks
// that it belongs to owner.
func (t *Table) lookup(id LockID, owner OwnerID) (*lock, error) {
	l, err := t.find(id)
	if err != nil {
		return nil, err
	}
	if l.owner != owner {
		return nil, fmt.Errorf("%w: %v is owned by %d, not %d", ErrNotOwner, id, l.owner, owner)
	}
	return l, nil
}

// find finds a lock by id, telling a lock that is gone (an id at or below
// the highest its node has used here) from one the table never had.
func (t *Table) find(id LockID) (*lock, error) {
	ns := t.nodes[id.Node]
	if ns != nil {
		if l := ns.locks[id.ID]; l != nil {
			return l, nil
		}
		if id.ID <= ns.maxID {
			return nil, fmt.Errorf("%w: %v", ErrReleased, id)
		}
	}
	return nil, fmt.Errorf("%w: %v", ErrUnknownLock, id)
}

// conflicts reports whether mode rq is incompatible with the granted mode of
// any lock on r's granted or convert queues other than self.
func (r *resource) conflicts(rq modes.Mode, self *lock) bool {
	if self != nil && self.queue != QueueWaiting {
		return r.held.conflicts(rq, self.mode, true)
	}
	return r.held.conflicts(rq, modes.NL, false)
}

// hasLock reports whether the table holds a lock with this id.
func (t *Table) hasLock(id LockID) bool {
	ns := t.nodes[id.Node]
	return ns != nil && ns.locks[id.ID] != nil
}

func (t *Table) emit(e Effect) {
	if e.LVBRead && len(e.LVB.Data) > 0 {
		start := len(t.pendingArena)
		t.pendingArena = append(t.pendingArena, e.LVB.Data...)
		e.LVB.Data = t.pendingArena[start:len(t.pendingArena):len(t.pendingArena)]
	}
	t.pending = append(t.pending, e)
}

// Effects returns what the calls since the last Effects did to locks other
// than the ones they were about: grants of queued requests, failures of
// queued requests, blocking notifications and releases by the table. The
// slice and the LVB data in it stay valid until the next call of Effects.
// The caller must deliver each effect to the node of its lock.
func (t *Table) Effects() []Effect {
	t.out, t.pending = t.pending, t.out[:0]
	t.outArena, t.pendingArena = t.pendingArena, t.outArena[:0]
	clear(t.pending[:cap(t.pending)])
	return t.out
}

// PendingEffects reports how many effects wait for Effects.
func (t *Table) PendingEffects() int { return len(t.pending) }
