package check

import (
	"cmp"
	"slices"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// An Interval is a stretch of time during which a client believed it held a
// lock on a resource in one mode. It starts when a grant or conversion
// returned to the client and ends at the earliest of its release call, its
// Lost, its node's crash, or a conversion that changed what it may assume.
type Interval struct {
	Client   int
	Node     string // the node of the operation that granted the lock
	Resource string
	Mode     modes.Mode
	Token    uint64
	Start    time.Duration
	End      time.Duration // Infinity: still held at the end of the history
	Begin    int           // Seq of the record that started the interval
	Finish   int           // Seq of the record that ended it, or -1
	Why      string        // what ended it: release, lost, crash, convert, or "held at end"
	// Permits and Limit: the permits held, of a semaphore of Limit (see
	// History.AcquirePermits); zero for a lock in a mode.
	Permits, Limit int

	startOrd, endOrd int
	beginKind        Kind
}

type beliefKey struct {
	client   int
	resource string
}

// belief is a lock that a client currently believes it holds.
type belief struct {
	gen      int // distinguishes successive beliefs of one client and resource
	client   int
	node     string
	resource string
	mode     modes.Mode
	token    uint64
	since    time.Duration
	sinceOrd int
	begin    int  // Seq of the record that started the current interval
	kind     Kind // and its kind
	exact    bool // mode is the mode granted, not the meet of a pending or unknown conversion
	// pending are the modes a pending or unknown conversion goes
	// between (from, to) while exact is false: the lock is in one of them.
	pending []modes.Mode
	permits int // of a semaphore of limit; zero for a lock
	limit   int
}

// beliefs follows, as the history is recorded, which locks each client
// believes it holds, and collects the intervals. It is used under the
// history's mutex.
type beliefs struct {
	open   map[beliefKey]*belief
	closed []Interval
	gen    int
	locks  map[beliefKey]int // the latest Acquire of each client and resource, as Seq+1
	// ended are the modes the lock of a client and resource may have been
	// in when the client's belief in it ended (a Lost or a freeze does
	// not end the lock itself: a frozen process wakes and converts it).
	ended map[beliefKey]endedLock
}

// endedLock is the lock a belief was about when it ended, and the modes it
// may have been in then.
type endedLock struct {
	lock  int
	modes []modes.Mode
}

func newBeliefs() beliefs {
	return beliefs{open: make(map[beliefKey]*belief), locks: make(map[beliefKey]int), ended: make(map[beliefKey]endedLock)}
}

// lockCall names the lock r is about: a new one for an Acquire, else the
// client's latest on the resource.
func (bs *beliefs) lockCall(r *Record) {
	k := keyOf(r)
	if r.Kind == Acquire {
		bs.locks[k] = r.Seq + 1
	}
	r.lock = bs.locks[k]
}

func keyOf(r *Record) beliefKey { return beliefKey{r.Client, r.Resource} }

// acquireCall notes r's belief state; a client asking for a lock it already
// believes it holds is a misuse of the history (one client id per handle).
func (bs *beliefs) acquireCall(h *History, r *Record) {
	if b := bs.open[keyOf(r)]; b != nil {
		r.Held, r.From = true, b.mode
		h.misuse("%s: client %d already believes it holds %q in %v (since %s, record #%d); give each lock handle its own client id",
			r.describe(), r.Client, r.Resource, b.mode, fmtTime(b.since), b.begin)
	}
}

// convertCall notes r's belief state. While a conversion is pending the
// client may assume only what both the old and the new mode give it, so its
// belief drops to their meet: the old mode for an up-conversion, the new one
// for a down-conversion, CR for PR <-> CW.
func (bs *beliefs) convertCall(r *Record) {
	b := bs.open[keyOf(r)]
	if b == nil {
		if e, ok := bs.ended[keyOf(r)]; ok && e.lock == r.lock {
			r.endedIn = e.modes
		}
		return
	}
	r.Held, r.From, r.gen, r.fromExact = true, b.mode, b.gen, b.exact
	if b.exact {
		b.pending = []modes.Mode{b.mode, r.Mode}
	} else {
		b.pending = append(b.pending, r.Mode)
	}
	if r.Mode.Valid() {
		bs.switchTo(b, meet(b.mode, r.Mode), b.token, r.Call, r.callOrd, r.Seq, r.Kind)
	}
	b.exact = false // until the conversion returns
}

// granted opens or updates the belief of the client of r, an Acquire or
// Convert that returned OK.
func (bs *beliefs) granted(h *History, r *Record) {
	k := keyOf(r)
	b := bs.open[k]
	if b == nil && r.Kind == Convert && r.Held {
		// The client was told its lock was lost while the conversion
		// was in flight, and then that the conversion was granted: a
		// process that stalls finds both answers waiting and may take
		// the Lost first, though the grant came before the loss. The
		// client believes in neither mode now; the lock may be in the
		// granted one, which a later conversion of it may start from.
		r.lostDuring = true
		bs.lateGrant(r, r.Granted)
		return
	}
	if b != nil && r.Kind == Convert && b.gen == r.gen {
		bs.switchTo(b, r.Granted, r.Token, r.Return, r.retOrd, r.Seq, r.Kind)
		b.exact, b.pending = true, nil
		return
	}
	if b != nil {
		if !(r.Kind == Acquire && r.Held) { // not reported at the call already
			h.misuse("%s: granted while client %d already believes it holds %q in %v (since %s, record #%d); give each lock handle its own client id",
				r.describe(), r.Client, r.Resource, b.mode, fmtTime(b.since), b.begin)
		}
		bs.close(b, r.Return, r.retOrd, r.Seq, "replaced")
	}
	bs.gen++
	bs.open[k] = &belief{
		gen: bs.gen, client: r.Client, node: r.Node, resource: r.Resource,
		mode: r.Granted, token: r.Token, since: r.Return, sinceOrd: r.retOrd, begin: r.Seq, kind: r.Kind,
		exact: true, permits: r.Permits, limit: r.Limit,
	}
}

// lateGrant notes that r, a lock operation its node's crash or freeze
// made Unknown, was granted mode after all: a frozen process wakes holding
// the lock in that mode, which a later conversion of it may start from.
func (bs *beliefs) lateGrant(r *Record, mode modes.Mode) {
	k := keyOf(r)
	if (r.Kind != Acquire && r.Kind != Convert) || bs.locks[k] != r.lock || bs.open[k] != nil {
		return
	}
	e, ok := bs.ended[k]
	if !ok || e.lock != r.lock {
		e = endedLock{lock: r.lock}
	}
	if !slices.Contains(e.modes, mode) {
		e.modes = append(slices.Clone(e.modes), mode)
	}
	bs.ended[k] = e
}

// failed restores the mode a failed conversion started from. If the lock
// was lost while the conversion was in flight, the failure may only report
// the loss: the conversion may have taken effect before it, so r is
// checked as Unknown.
func (bs *beliefs) failed(r *Record) {
	if r.Kind != Convert || !r.Held {
		return
	}
	if b := bs.open[keyOf(r)]; b != nil && b.gen == r.gen {
		bs.switchTo(b, r.From, b.token, r.Return, r.retOrd, r.Seq, r.Kind)
		b.exact = r.fromExact
		if b.exact {
			b.pending = nil
		}
		return
	}
	r.lostDuring = true
}

// end closes the client's belief at r's call (a Release or Lost), noting in
// r whether there was one.
func (bs *beliefs) end(r *Record, why string) {
	b := bs.open[keyOf(r)]
	if b == nil {
		return
	}
	r.Held, r.From = true, b.mode
	bs.close(b, r.Call, r.callOrd, r.Seq, why)
}

// onNode returns the beliefs granted through node, in a fixed order.
func (bs *beliefs) onNode(node string) []*belief {
	var out []*belief
	for _, b := range bs.open {
		if b.node == node {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b *belief) int {
		return cmp.Or(cmp.Compare(a.resource, b.resource), cmp.Compare(a.client, b.client))
	})
	return out
}

// switchTo ends b's current interval at t and starts one in mode with
// token, unless nothing changes.
func (bs *beliefs) switchTo(b *belief, mode modes.Mode, token uint64, t time.Duration, ord, seq int, kind Kind) {
	if mode == b.mode && token == b.token {
		return
	}
	bs.closed = append(bs.closed, b.interval(t, ord, seq, "convert"))
	b.mode, b.token, b.since, b.sinceOrd, b.begin, b.kind = mode, token, t, ord, seq, kind
}

func (bs *beliefs) close(b *belief, t time.Duration, ord, seq int, why string) {
	bs.closed = append(bs.closed, b.interval(t, ord, seq, why))
	k := beliefKey{b.client, b.resource}
	in := []modes.Mode{b.mode}
	if !b.exact && len(b.pending) > 0 {
		in = b.pending
	}
	bs.ended[k] = endedLock{lock: bs.locks[k], modes: in}
	delete(bs.open, k)
}

func (b *belief) interval(end time.Duration, ord, seq int, why string) Interval {
	return Interval{
		Client: b.client, Node: b.node, Resource: b.resource, Mode: b.mode, Token: b.token,
		Start: b.since, End: end, Begin: b.begin, Finish: seq, Why: why,
		Permits: b.permits, Limit: b.limit,
		startOrd: b.sinceOrd, endOrd: ord, beginKind: b.kind,
	}
}

// intervals returns every interval so far, the open ones ending at
// Infinity, sorted by resource and start.
func (bs *beliefs) intervals() []Interval {
	out := append([]Interval(nil), bs.closed...)
	for _, b := range bs.open {
		iv := b.interval(Infinity, int(^uint(0)>>1), -1, "held at end")
		out = append(out, iv)
	}
	slices.SortFunc(out, func(a, b Interval) int {
		return cmp.Or(cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.startOrd, b.startOrd),
			cmp.Compare(a.Client, b.Client))
	})
	return out
}

// Held returns the belief intervals of every client on resource so far
// (the open ones end at Infinity), in the order they started.
func (h *History) Held(resource string) []Interval {
	var out []Interval
	for _, iv := range h.snapshot().intervals {
		if iv.Resource == resource {
			out = append(out, iv)
		}
	}
	return out
}

// meet returns the strongest mode that is compatible with every mode that a
// or b is compatible with: what a client may rely on when it holds a or b
// and does not know which.
func meet(a, b modes.Mode) modes.Mode {
	best, bestN := modes.NL, modes.Count+1
	for _, m := range modes.All() {
		n, ok := 0, true
		for _, x := range modes.All() {
			c := modes.Compatible(m, x)
			if (modes.Compatible(a, x) || modes.Compatible(b, x)) && !c {
				ok = false
				break
			}
			if c {
				n++
			}
		}
		if ok && n < bestN {
			best, bestN = m, n
		}
	}
	return best
}
