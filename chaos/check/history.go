package check

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// Infinity is the Return time of an operation whose outcome is unknown: like
// Jepsen's :info, it may take effect at any moment after its call.
const Infinity = time.Duration(math.MaxInt64)

// Kind says what a Record is.
type Kind uint8

// The kinds of records.
const (
	// Acquire: a client asked for a new lock on a resource in some mode.
	Acquire Kind = iota + 1
	// Convert: a client asked to change the mode of a lock it holds.
	Convert
	// Release: a holder unlocked.
	Release
	// Lost: the holder learned its lock was lost (Lost() fired), or its
	// node crashed. From that instant it no longer believes it holds the
	// lock. It has no duration: Call == Return.
	Lost
	// Crash: a node was killed. Node names it.
	Crash
	// Write: a write to the fenced store, under a fencing token.
	Write
	// Read: a read of the fenced store.
	Read
	// Note: a nemesis event (partition, pause, ...), shown in the
	// visualizations. Node holds the tag, Err the text.
	Note
)

var kindNames = [...]string{"?", "acquire", "convert", "release", "lost", "crash", "write", "read", "note"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Outcome is how an operation ended.
type Outcome uint8

// The outcomes.
const (
	// Pending: the call has not returned yet. A check treats it as Unknown.
	Pending Outcome = iota
	// OK: granted, released, accepted by the store, or read.
	OK
	// Fail: definitely had no effect (refused, not queued, cancelled,
	// never reached the store).
	Fail
	// Rejected: the fenced store refused the write because its token was
	// below the highest it had accepted.
	Rejected
	// Unknown: indeterminate. The client's node was killed or the call
	// timed out while it may have taken effect. Its Return is Infinity.
	Unknown
)

var outcomeNames = [...]string{"pending", "ok", "fail", "rejected", "unknown"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// A Record is one entry of a History. Times are durations since the first
// record of the history.
type Record struct {
	Seq      int    // index in the history, in call order
	Kind     Kind   // what happened
	Client   int    // the client (lock handle owner); -1 for Crash and Note
	Node     string // the client's node; for Note, the tag
	Resource string // the lock's resource, or the store key for Write and Read

	Mode modes.Mode // Acquire, Convert: the mode requested

	// Held and From: whether the client believed it held the resource at
	// the call (Convert, Release, Lost), and in which mode.
	Held bool
	From modes.Mode

	Outcome Outcome
	Granted modes.Mode // Acquire, Convert with Outcome OK: the mode granted
	Token   uint64     // the fencing token granted, or written under
	Value   int64      // Write: the value written; Read: the value read
	Err     string     // why it failed or is unknown; for Note, the text

	// Permits and Limit mark an Acquire of permits of a counting
	// semaphore (AcquirePermits): Permits asked for, of a semaphore of
	// Limit. Zero for a lock in a mode.
	Permits, Limit int

	// Shared marks an Acquire granted as a share of a grant its node
	// already held for several clients (a node-level cache of shared
	// locks): its token is that grant's, so it is no new grant for
	// CheckTokens; it is a holder like any other for CheckOverlap.
	Shared bool

	Call   time.Duration
	Return time.Duration // Infinity if Outcome is Unknown or Pending

	// ord are the positions of the call and the return in the order the
	// history saw them, which breaks ties between equal timestamps.
	callOrd, retOrd int
	// gen is, for a Convert, the generation of the belief it converts;
	// fromExact says that From is the mode the client held, not a guess
	// left by a conversion of unknown outcome.
	gen       int
	fromExact bool
	// lock identifies the lock a lock operation is about: an Acquire's
	// own Seq+1, and for later operations of the client on the resource,
	// that of its latest Acquire.
	lock int
	// late is the token of a grant that came back after the crash or
	// freeze of its node had made the call Unknown: void for the lock
	// checks, but what the node may have acted on when it woke.
	late uint64
	// endedIn, for a Convert of a lock the client's belief in had ended
	// (a Lost, a freeze), are the modes the lock may have been in then.
	endedIn []modes.Mode
	// lostDuring marks a Convert that returned (failed or granted) after
	// the client was told, while it was in flight, that its lock was
	// lost: the models take it as Unknown.
	lostDuring bool
}

// History records what clients did and saw while a test ran. It is safe for
// concurrent use, and each method takes one short mutex hold, so recording
// does not change the schedule much. A nil *History records nothing.
//
// Every operation is a call, which returns a handle, and exactly one
// resolution of the handle (Granted, Failed, Unknown, ...) when the call
// returns. Resolving twice is recorded as a history error, which makes the
// check fail. An operation still pending when the history is checked counts
// as Unknown.
//
// Timestamps come from the clock given to NewHistory, read under the mutex
// so that they never go backwards (a clock that does is clamped). Create
// the history where the test's clock is: inside a synctest bubble the
// clock is fake and equal timestamps are common; ties count as concurrent.
type History struct {
	now func() time.Time

	mu      sync.Mutex
	started bool
	start   time.Time
	last    time.Duration
	ord     int
	recs    []Record
	pending map[int]struct{} // indexes of unresolved operations
	beliefs beliefs
	errs    []string
	jr      *journal // see Journal
}

// NewHistory returns an empty history that reads timestamps from now; nil
// means time.Now. The first record sets time zero.
func NewHistory(now func() time.Time) *History {
	if now == nil {
		now = time.Now
	}
	return &History{now: now, pending: make(map[int]struct{}), beliefs: newBeliefs()}
}

// StartAt sets the history's time zero to t instead of its first record's
// time. Histories recorded in several processes with one origin (and one
// clock, such as CLOCK_MONOTONIC) share a timeline, and their journals
// merge (MergeJournals). Call it before the first record.
func (h *History) StartAt(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.recs) > 0 || h.started {
		h.misuse("StartAt called after %d records", len(h.recs))
		return
	}
	h.started, h.start = true, t
}

// clock returns the current time as an offset from the first record and
// the next position in the history's order. h.mu must be held.
func (h *History) clock() (time.Duration, int) {
	t := h.now()
	if !h.started {
		h.started, h.start = true, t
	}
	d := t.Sub(h.start)
	if d < h.last {
		d = h.last
	}
	h.last = d
	h.ord++
	return d, h.ord
}

// begin appends a pending operation and returns its index. h.mu must be
// held.
func (h *History) begin(r Record) int {
	r.Call, r.callOrd = h.clock()
	r.Return = Infinity
	r.Seq = len(h.recs)
	h.recs = append(h.recs, r)
	h.pending[r.Seq] = struct{}{}
	return r.Seq
}

// instant appends a record with no duration. h.mu must be held.
func (h *History) instant(r Record) int {
	r.Call, r.callOrd = h.clock()
	r.Return, r.retOrd = r.Call, r.callOrd
	r.Outcome = OK
	r.Seq = len(h.recs)
	h.recs = append(h.recs, r)
	return r.Seq
}

// resolve ends operation i with outcome o. It reports false (and records
// nothing) if the operation was already ended by a crash, and records a
// history error if it was resolved before. h.mu must be held.
func (h *History) resolve(i int, o Outcome, err error, what string) bool {
	r := &h.recs[i]
	if _, ok := h.pending[i]; !ok {
		if r.Outcome == Unknown && r.Err == errCrashed {
			return false // the node was declared dead first; its later news is void
		}
		h.misuse("%s: resolved twice (%s, then %s)", r.describe(), r.Outcome, what)
		return false
	}
	delete(h.pending, i)
	r.Outcome = o
	if err != nil {
		r.Err = err.Error()
	}
	if o == Unknown {
		// No return time, but the clock is read all the same: the
		// journal gives the resolution its place in time, which a merge
		// of several journals needs.
		_, ord := h.clock()
		r.Return, r.retOrd = Infinity, ord
	} else {
		r.Return, r.retOrd = h.clock()
	}
	return true
}

const errCrashed = "node crashed"

func (h *History) misuse(format string, args ...any) {
	h.errs = append(h.errs, fmt.Sprintf(format, args...))
}

// Acquire records a call asking for a new lock on resource in mode, made by
// client on node. Resolve the returned handle when the call returns.
func (h *History) Acquire(client int, node, resource string, mode modes.Mode) *Op {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !mode.Valid() {
		h.misuse("acquire by client %d of %q: invalid mode %v", client, resource, mode)
	}
	i := h.begin(Record{Kind: Acquire, Client: client, Node: node, Resource: resource, Mode: mode})
	h.logCall("acquire", i)
	h.beliefs.lockCall(&h.recs[i])
	h.beliefs.acquireCall(h, &h.recs[i])
	return &Op{h: h, i: i}
}

// AcquirePermits records a call asking for n permits of semaphore, a
// counting semaphore of permits permits, made by client on node. The
// semaphore is a resource of the history like a lock's: Release, Lost and
// Crash end the client's permits, and the handle resolves as an Acquire's
// does (GrantedPermits, Failed, Unknown).
func (h *History) AcquirePermits(client int, node, semaphore string, n, permits int) *Op {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n < 1 || n > permits {
		h.misuse("acquire by client %d of %d permits of %q, a semaphore of %d", client, n, semaphore, permits)
	}
	i := h.begin(Record{Kind: Acquire, Client: client, Node: node, Resource: semaphore, Mode: modes.NL, Permits: n, Limit: permits})
	h.logCall("permits", i)
	h.beliefs.lockCall(&h.recs[i])
	h.beliefs.acquireCall(h, &h.recs[i])
	return &Op{h: h, i: i}
}

// Convert records a call asking to change the mode of the lock client holds
// on resource. Resolve the returned handle when the call returns.
func (h *History) Convert(client int, node, resource string, mode modes.Mode) *Op {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !mode.Valid() {
		h.misuse("convert by client %d of %q: invalid mode %v", client, resource, mode)
	}
	i := h.begin(Record{Kind: Convert, Client: client, Node: node, Resource: resource, Mode: mode})
	h.logCall("convert", i)
	h.beliefs.lockCall(&h.recs[i])
	h.beliefs.convertCall(&h.recs[i])
	return &Op{h: h, i: i}
}

// Release records a call unlocking client's lock on resource. The client's
// belief that it holds the lock ends at the call.
func (h *History) Release(client int, node, resource string) *ReleaseOp {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.begin(Record{Kind: Release, Client: client, Node: node, Resource: resource})
	h.logCall("release", i)
	h.beliefs.lockCall(&h.recs[i])
	h.beliefs.end(&h.recs[i], "release")
	return &ReleaseOp{h: h, i: i}
}

// Lost records that client learned its lock on resource was lost (its
// Lost() channel closed): from now on it does not believe it holds it. A
// Lost for a lock the client did not believe it held is recorded and has
// no further effect.
func (h *History) Lost(client int, node, resource string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.instant(Record{Kind: Lost, Client: client, Node: node, Resource: resource})
	h.logCall("lost", i)
	h.beliefs.lockCall(&h.recs[i])
	h.beliefs.end(&h.recs[i], "lost")
}

// Crash records that node was killed. Every operation in flight on the node
// becomes Unknown (whatever its call later returns is ignored), and every
// lock a client on the node believed it held gets a Lost now.
func (h *History) Crash(node string) { h.crash(node, "") }

// Freeze records that node's process was frozen (SIGSTOP) and may act again
// when it wakes. The checks take it as a crash at this instant: calls in
// flight become Unknown and beliefs end. A frozen process believes nothing
// it could act on safely: by the time it wakes its leases have run out on
// the clocks that count, and what it does then (a late write under an old
// token, which the fenced store must refuse) is recorded as new operations.
func (h *History) Freeze(node string) { h.crash(node, frozen) }

// frozen is the Err of a Crash record that Freeze made.
const frozen = "frozen"

func (h *History) crash(node, why string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.instant(Record{Kind: Crash, Client: -1, Node: node, Err: why})
	h.logCall("crash", c)
	at := h.recs[c].Call
	idx := make([]int, 0, len(h.pending))
	for i := range h.pending {
		if h.recs[i].Node == node && h.recs[i].Kind != Note {
			idx = append(idx, i)
		}
	}
	sort.Ints(idx)
	for _, i := range idx {
		h.resolve(i, Unknown, nil, "")
		h.recs[i].Err = errCrashed
	}
	what := "crash of "
	if why == frozen {
		what = "freeze of "
	}
	for _, b := range h.beliefs.onNode(node) {
		i := h.instant(Record{Kind: Lost, Client: b.client, Node: node, Resource: b.resource,
			Err: what + node})
		h.recs[i].Call, h.recs[i].Return = at, at
		h.beliefs.lockCall(&h.recs[i])
		h.beliefs.end(&h.recs[i], "crash")
	}
}

// Write records a write of value to the fenced store under key with a
// fencing token. Resolve the handle with the store's answer.
func (h *History) Write(client int, node, key string, token uint64, value int64) *WriteOp {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.begin(Record{Kind: Write, Client: client, Node: node, Resource: key, Token: token, Value: value})
	h.logCall("write", i)
	return &WriteOp{h: h, i: i}
}

// Read records a read of key from the fenced store. Resolve the handle with
// the value read.
func (h *History) Read(client int, node, key string) *ReadOp {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.begin(Record{Kind: Read, Client: client, Node: node, Resource: key})
	h.logCall("read", i)
	return &ReadOp{h: h, i: i}
}

// Note records a nemesis event at this instant, such as "kill n3". It is
// shown on the visualizations under tag and has no effect on the checks.
func (h *History) Note(tag, text string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logCall("note", h.instant(Record{Kind: Note, Client: -1, Node: tag, Err: text}))
}

// Span records a nemesis event that lasts, such as a partition, starting
// now; call the returned function when it ends. A span not ended by the
// time of the check runs to the end of the history.
func (h *History) Span(tag, text string) (end func()) {
	if h == nil {
		return func() {}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.begin(Record{Kind: Note, Client: -1, Node: tag, Err: text})
	h.logCall("span", i)
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			delete(h.pending, i)
			h.recs[i].Outcome = OK
			h.recs[i].Return, h.recs[i].retOrd = h.clock()
			h.logResolve("end", i, 0, "")
		})
	}
}

// Records returns a copy of the history so far. Operations still pending
// have Outcome Pending and Return Infinity.
// Freezes returns, for each node, the instants its process was frozen
// (Freeze), in order.
func (h *History) Freezes() map[string][]time.Duration {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string][]time.Duration{}
	for i := range h.recs {
		if r := &h.recs[i]; r.Kind == Crash && r.Err == frozen {
			out[r.Node] = append(out[r.Node], r.Call)
		}
	}
	for _, ts := range out {
		slices.Sort(ts)
	}
	return out
}

func (h *History) Records() []Record {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Record(nil), h.recs...)
}

// snapshot is what a check reads: the records, the belief intervals (open
// ones end at Infinity), and the history errors.
type snapshot struct {
	recs      []Record
	intervals []Interval
	errs      []string
	end       time.Duration // the latest timestamp
}

func (h *History) snapshot() snapshot {
	if h == nil {
		return snapshot{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	s := snapshot{
		recs:      append([]Record(nil), h.recs...),
		intervals: h.beliefs.intervals(),
		errs:      append([]string(nil), h.errs...),
		end:       h.last,
	}
	for i := range s.recs {
		if s.recs[i].Outcome == Pending && s.recs[i].Kind != Note {
			s.recs[i].Outcome = Unknown
			s.recs[i].Err = "still pending at the check"
		}
	}
	return s
}

// Op is an Acquire or Convert in flight. Resolve it exactly once.
type Op struct {
	h *History
	i int
}

// Granted records that the call returned the lock granted in mode (usually
// the mode requested) with fencing token token. The client believes it
// holds the lock from now on.
func (o *Op) Granted(mode modes.Mode, token uint64) {
	if o == nil {
		return
	}
	o.h.mu.Lock()
	defer o.h.mu.Unlock()
	o.granted(mode, token, "granted")
}

// granted resolves o as granted; o.h.mu must be held.
func (o *Op) granted(mode modes.Mode, token uint64, op string) {
	h := o.h
	defer func() { h.logResolve(op, o.i, mode, "") }()
	if !mode.Valid() {
		h.misuse("%s: granted an invalid mode %v", h.recs[o.i].describe(), mode)
	}
	if !h.resolve(o.i, OK, nil, "granted") {
		if r := &h.recs[o.i]; r.Outcome == Unknown && r.Err == errCrashed {
			r.late = token
			h.beliefs.lateGrant(r, mode)
		}
		return
	}
	r := &h.recs[o.i]
	r.Granted, r.Token = mode, token
	h.beliefs.granted(h, r)
}

// GrantedPermits records that an AcquirePermits returned the permits, with
// fencing token token.
func (o *Op) GrantedPermits(token uint64) { o.Granted(modes.NL, token) }

// GrantedShared records that an Acquire returned a share of a grant its
// node holds for several clients (dlm.Cache): the client holds the lock
// in mode from now on, under the shared grant's token, which other shares
// carry too.
func (o *Op) GrantedShared(mode modes.Mode, token uint64) {
	if o == nil {
		return
	}
	o.h.mu.Lock()
	defer o.h.mu.Unlock()
	r := &o.h.recs[o.i]
	if r.Kind != Acquire {
		o.h.misuse("%s: only an Acquire can be granted a share", r.describe())
	}
	r.Shared = true
	o.granted(mode, token, "shared")
}

// Failed records that the call returned without granting: refused, not
// queued, cancelled before it was granted. err may be nil.
func (o *Op) Failed(err error) {
	if o == nil {
		return
	}
	h := o.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.resolve(o.i, Fail, err, "failed") {
		h.beliefs.failed(&h.recs[o.i])
	}
	h.logResolve("failed", o.i, 0, errText(err))
}

// Unknown records that the call ended without telling whether the lock was
// granted: it timed out, or the connection broke.
func (o *Op) Unknown() {
	if o == nil {
		return
	}
	h := o.h
	h.mu.Lock()
	defer h.mu.Unlock()
	h.resolve(o.i, Unknown, nil, "unknown")
	h.logResolve("unknown", o.i, 0, "")
}

// ReleaseOp is a Release in flight. Resolve it exactly once.
type ReleaseOp struct {
	h *History
	i int
}

// Released records that the unlock succeeded.
func (o *ReleaseOp) Released() { o.end(OK, nil, "released") }

// Failed records that the unlock definitely did nothing (for example, the
// lock was not held). err may be nil.
func (o *ReleaseOp) Failed(err error) { o.end(Fail, err, "failed") }

// Unknown records that the unlock ended without telling whether it took
// effect.
func (o *ReleaseOp) Unknown() { o.end(Unknown, nil, "unknown") }

func (o *ReleaseOp) end(out Outcome, err error, what string) {
	if o == nil {
		return
	}
	o.h.mu.Lock()
	defer o.h.mu.Unlock()
	o.h.resolve(o.i, out, err, what)
	o.h.logResolve(what, o.i, 0, errText(err))
}

// WriteOp is a Write in flight. Resolve it exactly once.
type WriteOp struct {
	h *History
	i int
}

// Accepted records that the store accepted the write.
func (o *WriteOp) Accepted() { o.end(OK, nil, "accepted") }

// Rejected records that the store refused the write because of its token.
func (o *WriteOp) Rejected() { o.end(Rejected, nil, "rejected") }

// Failed records that the write never reached the store. err may be nil.
func (o *WriteOp) Failed(err error) { o.end(Fail, err, "failed") }

// Unknown records that the write may or may not have been applied.
func (o *WriteOp) Unknown() { o.end(Unknown, nil, "unknown") }

func (o *WriteOp) end(out Outcome, err error, what string) {
	if o == nil {
		return
	}
	o.h.mu.Lock()
	defer o.h.mu.Unlock()
	o.h.resolve(o.i, out, err, what)
	o.h.logResolve(what, o.i, 0, errText(err))
}

// ReadOp is a Read in flight. Resolve it exactly once.
type ReadOp struct {
	h *History
	i int
}

// Returned records the value read (0 if the key was never written).
func (o *ReadOp) Returned(value int64) {
	if o == nil {
		return
	}
	o.h.mu.Lock()
	defer o.h.mu.Unlock()
	if o.h.resolve(o.i, OK, nil, "returned") {
		o.h.recs[o.i].Value = value
	}
	o.h.logResolve("returned", o.i, 0, "")
}

// Failed records that the read returned no value. err may be nil.
func (o *ReadOp) Failed(err error) {
	if o == nil {
		return
	}
	o.h.mu.Lock()
	defer o.h.mu.Unlock()
	o.h.resolve(o.i, Fail, err, "failed")
	o.h.logResolve("failed", o.i, 0, errText(err))
}
