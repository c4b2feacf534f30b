package check

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
	"pgregory.net/rapid"
)

// The property test: a simple sequential simulation of a correct lock
// service and fenced store, driven by rapid, produces histories with
// handoffs, conversions, timeouts, lost locks, zombie writes and crashes.
// Every such history must pass every check. Injecting one violation (an
// extra overlapping grant, a token going back, a stale write accepted)
// must make the relevant checks fail.

// evKind is what a simulated event does to the history.
type evKind uint8

const (
	evAcquire evKind = iota // calls
	evConvert
	evRelease
	evWrite
	evRead
	evGranted // resolutions
	evFailed
	evUnknown
	evReleased
	evAccepted
	evRejected
	evReturned
	evLost // instants
	evCrash
)

// simEvent is one call to the History API, at a time.
type simEvent struct {
	at     time.Duration
	kind   evKind
	op     int // the operation a call starts or a resolution ends
	client int
	node   string
	res    string
	mode   modes.Mode
	token  uint64
	value  int64
}

// replay records events into a new history and returns it with, for each
// operation, the Seq of its record.
func replay(events []simEvent) (*History, map[int]int) {
	h, clk := newManual()
	return h, replayInto(h, clk, events)
}

// replayInto records events into h, whose clock is clk.
func replayInto(h *History, clk *manualClock, events []simEvent) map[int]int {
	h.Note("sim", "start") // time zero of the history is time zero of the events
	r := newSimRecorder(h, clk)
	for _, e := range events {
		r.record(e)
	}
	return r.seqs
}

// simRecorder records simulated events into a history, keeping the handles
// of its operations and their Seqs.
type simRecorder struct {
	h       *History
	clk     *manualClock
	handles map[int]any
	seqs    map[int]int
}

func newSimRecorder(h *History, clk *manualClock) *simRecorder {
	return &simRecorder{h: h, clk: clk, handles: make(map[int]any), seqs: make(map[int]int)}
}

func (r *simRecorder) record(e simEvent) {
	h, handles, seqs := r.h, r.handles, r.seqs
	r.clk.at(e.at)
	switch e.kind {
	case evAcquire:
		op := h.Acquire(e.client, e.node, e.res, e.mode)
		handles[e.op], seqs[e.op] = op, op.i
	case evConvert:
		op := h.Convert(e.client, e.node, e.res, e.mode)
		handles[e.op], seqs[e.op] = op, op.i
	case evRelease:
		op := h.Release(e.client, e.node, e.res)
		handles[e.op], seqs[e.op] = op, op.i
	case evWrite:
		op := h.Write(e.client, e.node, e.res, e.token, e.value)
		handles[e.op], seqs[e.op] = op, op.i
	case evRead:
		op := h.Read(e.client, e.node, e.res)
		handles[e.op], seqs[e.op] = op, op.i
	case evGranted:
		handles[e.op].(*Op).Granted(e.mode, e.token)
	case evFailed:
		switch op := handles[e.op].(type) {
		case *Op:
			op.Failed(nil)
		case *ReleaseOp:
			op.Failed(nil)
		case *WriteOp:
			op.Failed(nil)
		case *ReadOp:
			op.Failed(nil)
		}
	case evUnknown:
		switch op := handles[e.op].(type) {
		case *Op:
			op.Unknown()
		case *ReleaseOp:
			op.Unknown()
		case *WriteOp:
			op.Unknown()
		}
	case evReleased:
		handles[e.op].(*ReleaseOp).Released()
	case evAccepted:
		handles[e.op].(*WriteOp).Accepted()
	case evRejected:
		handles[e.op].(*WriteOp).Rejected()
	case evReturned:
		handles[e.op].(*ReadOp).Returned(e.value)
	case evLost:
		h.Lost(e.client, e.node, e.res)
	case evCrash:
		h.Crash(e.node)
	}
}

// insert adds events at their times, after the events already there at
// the same time.
func insert(events []simEvent, extra ...simEvent) []simEvent {
	out := slices.Clone(events)
	for _, e := range extra {
		i := len(out)
		for i > 0 && out[i-1].at > e.at {
			i--
		}
		out = slices.Insert(out, i, e)
	}
	return out
}

type clientState uint8

const (
	idle      clientState = iota
	holding               // believes it holds res in mode with token
	uncertain             // holding, but a conversion's outcome is unknown: only release
	orphan                // an acquire or release ended unknown: clean up with a release
	zombie                // lost its lock, still has the token and may write with it
)

type simClient struct {
	id    int
	node  string
	state clientState
	res   string
	mode  modes.Mode
	token uint64
	op    *simOp // the operation in flight, if any
}

type simOp struct {
	id       int
	kind     evKind // the call
	c        *simClient
	res      string
	mode     modes.Mode
	from     modes.Mode // Convert: the mode converted from
	token    uint64     // Write: the token written with
	value    int64
	effected bool
	ok       bool // granted, released, accepted
	granted  modes.Mode
	newTok   uint64
	read     int64
	revoked  bool // the lock was lost while a conversion was in flight (after its effect, if ok)
}

// sim is a correct lock service (no queues: a request that does not fit is
// refused) and a fenced store, with clients that call them.
type sim struct {
	t       *rapid.T
	now     time.Duration
	events  []simEvent
	nextOp  int
	nodes   []string
	clients []*simClient
	res     []string
	modes   []modes.Mode
	held    map[string]map[int]modes.Mode // the service's view: resource -> client -> mode
	tokens  uint64
	max     map[string]uint64 // the store's highest accepted token per key
	val     map[string]int64
	values  int64
}

func (s *sim) emit(e simEvent) {
	e.at = s.now
	s.events = append(s.events, e)
}

func (s *sim) inflight() []*simOp {
	var out []*simOp
	for _, c := range s.clients {
		if c.op != nil {
			out = append(out, c.op)
		}
	}
	return out
}

// admits reports whether the service can let client hold res in m.
func (s *sim) admits(res string, client int, m modes.Mode) bool {
	for c, h := range s.held[res] {
		if c != client && !modes.Compatible(h, m) {
			return false
		}
	}
	return true
}

// call starts an operation for c.
func (s *sim) call(c *simClient) {
	s.nextOp++
	op := &simOp{id: s.nextOp, c: c, res: c.res}
	choices := map[clientState][]evKind{
		idle:      {evAcquire, evAcquire, evAcquire, evRead},
		holding:   {evConvert, evConvert, evRelease, evRelease, evWrite, evWrite, evWrite, evRead},
		uncertain: {evRelease, evWrite},
		orphan:    {evRelease},
		zombie:    {evWrite, evWrite, evWrite, evRelease, evRead},
	}[c.state]
	op.kind = rapid.SampledFrom(choices).Draw(s.t, "call")
	if c.state == idle {
		op.res = rapid.SampledFrom(s.res).Draw(s.t, "resource")
	}
	e := simEvent{kind: op.kind, op: op.id, client: c.id, node: c.node, res: op.res}
	switch op.kind {
	case evAcquire:
		op.mode = rapid.SampledFrom(s.modes).Draw(s.t, "mode")
		e.mode = op.mode
	case evConvert:
		op.from = c.mode
		targets := s.modes
		if c.mode == modes.PR || c.mode == modes.CW { // make middle conversions common
			targets = append(slices.Clone(targets), modes.PR^modes.CW^c.mode, modes.PR^modes.CW^c.mode)
		}
		op.mode = rapid.SampledFrom(targets).Draw(s.t, "to")
		e.mode = op.mode
	case evWrite:
		s.values++
		op.token, op.value = c.token, s.values
		e.token, e.value = op.token, op.value
	}
	c.op = op
	s.emit(e)
}

// effect is the moment the service or the store acts on op.
func (s *sim) effect(op *simOp) {
	op.effected = true
	c := op.c
	switch op.kind {
	case evAcquire:
		if op.ok = s.admits(op.res, c.id, op.mode); op.ok {
			s.held[op.res][c.id] = op.mode
			s.tokens++
			op.granted, op.newTok = op.mode, s.tokens
		}
	case evConvert:
		cur, has := s.held[op.res][c.id]
		if op.ok = has && s.admits(op.res, c.id, op.mode); op.ok {
			s.held[op.res][c.id] = op.mode
			op.granted, op.newTok = op.mode, c.token
			if modes.IsUp(cur, op.mode) {
				s.tokens++
				op.newTok = s.tokens
			}
		}
	case evRelease:
		_, op.ok = s.held[op.res][c.id]
		delete(s.held[op.res], c.id)
	case evWrite:
		if op.ok = op.token >= s.max[op.res]; op.ok {
			s.max[op.res], s.val[op.res] = op.token, op.value
		}
	case evRead:
		op.read = s.val[op.res]
	}
}

// ret returns op to its client, normally or (if unknown) as a timeout.
func (s *sim) ret(op *simOp, unknown bool) {
	c := op.c
	c.op = nil
	e := simEvent{op: op.id}
	if unknown && op.kind != evRead {
		if !op.effected && rapid.Bool().Draw(s.t, "applied anyway") {
			s.effect(op)
		}
		e.kind = evUnknown
		s.emit(e)
		switch op.kind {
		case evAcquire, evRelease:
			c.state, c.res = orphan, op.res
		case evConvert:
			if c.state == holding {
				c.state = uncertain
				if op.effected && op.ok {
					c.token = op.newTok // what it would have been told
				}
			}
		}
		return
	}
	if !op.effected {
		s.effect(op)
	}
	switch op.kind {
	case evAcquire:
		if op.ok {
			e.kind, e.mode, e.token = evGranted, op.granted, op.newTok
			c.state, c.res, c.mode, c.token = holding, op.res, op.granted, op.newTok
		} else {
			e.kind = evFailed
			c.state = idle
		}
	case evConvert:
		switch {
		case op.ok && !op.revoked:
			e.kind, e.mode, e.token = evGranted, op.granted, op.newTok
			c.mode, c.token = op.granted, op.newTok
		case op.ok && rapid.Bool().Draw(s.t, "granted before the loss"):
			// It took effect before the lock was lost, and the
			// client heard of the loss first (a process that
			// stalls finds both answers at once).
			e.kind, e.mode, e.token = evGranted, op.granted, op.newTok
			c.token = op.newTok
		default:
			e.kind = evFailed
		}
	case evRelease:
		e.kind = evFailed
		if op.ok {
			e.kind = evReleased
		}
		c.state = idle
	case evWrite:
		e.kind = evRejected
		if op.ok {
			e.kind = evAccepted
		}
	case evRead:
		e.kind, e.value = evReturned, op.read
	}
	s.emit(e)
}

// lose revokes c's lock: the service frees it and the client learns at
// the same instant.
func (s *sim) lose(c *simClient) {
	delete(s.held[c.res], c.id)
	if c.op != nil && c.op.kind == evConvert {
		c.op.revoked = true
	}
	s.emit(simEvent{kind: evLost, client: c.id, node: c.node, res: c.res})
	c.state = zombie
}

// crash kills node: the service purges its clients' locks, and what they
// had in flight may or may not have happened.
func (s *sim) crash(node string) {
	s.emit(simEvent{kind: evCrash, node: node})
	for _, c := range s.clients {
		if c.node != node {
			continue
		}
		if op := c.op; op != nil {
			if op.kind == evWrite && !op.effected && rapid.Bool().Draw(s.t, "write landed") {
				s.effect(op)
			}
			// The dead node's late answer, which the history ignores.
			late := simEvent{kind: evFailed, op: op.id}
			if op.kind == evAcquire || op.kind == evConvert {
				late = simEvent{kind: evGranted, op: op.id, mode: op.mode, token: 1 << 40}
			}
			s.emit(late)
		}
		for _, res := range s.res {
			delete(s.held[res], c.id)
		}
		c.state, c.op = idle, nil
	}
}

// step draws and runs one action that the current state allows.
func (s *sim) step() {
	gap := rapid.SampledFrom([]time.Duration{0, 0, 0, ms, 2 * ms, 5 * ms}).Draw(s.t, "gap")
	s.now += gap
	var free, holders []*simClient
	for _, c := range s.clients {
		if c.op == nil {
			free = append(free, c)
		}
		if c.state == holding || c.state == uncertain {
			if c.op == nil || c.op.kind == evWrite || c.op.kind == evConvert {
				holders = append(holders, c)
			}
		}
	}
	var unEffected []*simOp
	for _, op := range s.inflight() {
		if !op.effected {
			unEffected = append(unEffected, op)
		}
	}
	var actions []string
	if len(free) > 0 {
		actions = append(actions, "call", "call", "call")
	}
	if len(unEffected) > 0 {
		actions = append(actions, "effect", "effect")
	}
	if len(s.inflight()) > 0 {
		actions = append(actions, "return", "return", "return", "return", "timeout")
	}
	if len(holders) > 0 {
		actions = append(actions, "lose")
	}
	actions = append(actions, "crash", "forget")
	switch rapid.SampledFrom(actions).Draw(s.t, "action") {
	case "call":
		s.call(rapid.SampledFrom(free).Draw(s.t, "client"))
	case "effect":
		s.effect(rapid.SampledFrom(unEffected).Draw(s.t, "op"))
	case "return":
		s.ret(rapid.SampledFrom(s.inflight()).Draw(s.t, "op"), false)
	case "timeout":
		s.ret(rapid.SampledFrom(s.inflight()).Draw(s.t, "op"), true)
	case "lose":
		s.lose(rapid.SampledFrom(holders).Draw(s.t, "client"))
	case "crash":
		if rapid.IntRange(0, 3).Draw(s.t, "really crash") == 0 {
			s.crash(rapid.SampledFrom(s.nodes).Draw(s.t, "node"))
		}
	case "forget":
		// A zombie gives up its stale token.
		for _, c := range s.clients {
			if c.state == zombie && c.op == nil {
				c.state = idle
				break
			}
		}
	}
}

// simulate draws a safe history's events.
func simulate(t *rapid.T) []simEvent {
	s := &sim{
		t:    t,
		held: make(map[string]map[int]modes.Mode),
		max:  make(map[string]uint64),
		val:  make(map[string]int64),
	}
	for i := range rapid.IntRange(1, 3).Draw(t, "nodes") {
		s.nodes = append(s.nodes, fmt.Sprintf("n%d", i))
	}
	for i := range rapid.IntRange(1, 2).Draw(t, "resources") {
		s.res = append(s.res, fmt.Sprintf("r%d", i))
		s.held[s.res[i]] = make(map[int]modes.Mode)
	}
	all := modes.All()
	s.modes = all[:]
	if rapid.IntRange(0, 3).Draw(t, "EX only") == 0 {
		s.modes = []modes.Mode{modes.EX} // so that the mutex model applies
	}
	for i := range rapid.IntRange(2, 5).Draw(t, "clients") {
		s.clients = append(s.clients, &simClient{id: i, node: s.nodes[i%len(s.nodes)]})
	}
	for range rapid.IntRange(1, 100).Draw(t, "steps") {
		s.step()
	}
	return s.events
}

var propertyOptions = Options{Checks: AllChecks, Timeout: time.Minute}

func dump(h *History) string {
	var b strings.Builder
	h.WriteTo(&b)
	return b.String()
}

func TestPropertySafeHistoriesPass(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h, _ := replay(simulate(t))
		res := Check(h, propertyOptions)
		if !res.OK || len(res.Inconclusive) > 0 {
			t.Fatalf("a safe history failed:\n%v\n%s", res, dump(h))
		}
	})
}

func TestPropertyOverlapIsCaught(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		events := simulate(t)
		h, _ := replay(events)
		snap := h.snapshot()
		// A victim: a belief in a mode other than NL, of a client with
		// no lock operation of unknown outcome on that resource before
		// the belief ends (a deferred unknown acquire could re-set its
		// mode in the model, which only the overlap check would see).
		var victims []Interval
		for _, iv := range snap.intervals {
			if iv.Mode == modes.NL || iv.End <= iv.Start {
				continue
			}
			clean := true
			for _, r := range snap.recs {
				if r.Client == iv.Client && r.Resource == iv.Resource && (r.Kind == Acquire || r.Kind == Convert) &&
					r.Outcome == Unknown && r.Call < iv.End {
					clean = false
				}
			}
			if clean {
				victims = append(victims, iv)
			}
		}
		if len(victims) == 0 {
			t.Skip("no belief to break")
		}
		iv := rapid.SampledFrom(victims).Draw(t, "victim")
		t1, t2 := iv.Start+(iv.End-iv.Start)/3, iv.Start+2*(iv.End-iv.Start)/3
		if iv.End == Infinity {
			t1, t2 = iv.Start+time.Microsecond, iv.Start+2*time.Microsecond
		}
		const intruder = 1000
		bad, _ := replay(insert(events,
			simEvent{at: t1, kind: evAcquire, op: -1, client: intruder, node: "nX", res: iv.Resource, mode: modes.EX},
			simEvent{at: t1, kind: evGranted, op: -1, mode: modes.EX, token: 1 << 41},
			simEvent{at: t2, kind: evRelease, op: -2, client: intruder, node: "nX", res: iv.Resource},
			simEvent{at: t2, kind: evReleased, op: -2},
		))
		res := Check(bad, propertyOptions)
		want := CheckOverlap | CheckModesModel
		if failedChecks(res)&want != want {
			t.Fatalf("an EX grant inside %v was not caught by %v:\n%v\n%s", iv, want, res, dump(bad))
		}
	})
}

func TestPropertyTokenGoingBackIsCaught(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		events := simulate(t)
		h, seqs := replay(events)
		recs := h.snapshot().recs
		type pair struct{ x, y Record }
		var pairs []pair
		for _, x := range recs {
			for _, y := range recs {
				if isGrant(&x) && isGrant(&y) && x.Resource == y.Resource && x.Return < y.Call {
					pairs = append(pairs, pair{x, y})
				}
			}
		}
		if len(pairs) == 0 {
			t.Skip("no two grants in sequence")
		}
		p := rapid.SampledFrom(pairs).Draw(t, "pair")
		token := rapid.Uint64Range(0, p.x.Token).Draw(t, "token")
		bad := slices.Clone(events)
		for i, e := range bad {
			if e.kind == evGranted && seqs[e.op] == p.y.Seq {
				bad[i].token = token
			}
		}
		hb, _ := replay(bad)
		res := Check(hb, propertyOptions)
		if failedChecks(res)&CheckTokens == 0 {
			t.Fatalf("token %d for #%d after #%d's %d was not caught:\n%v\n%s", token, p.y.Seq, p.x.Seq, p.x.Token, res, dump(hb))
		}
	})
}

func TestPropertyStaleWriteIsCaught(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		events := simulate(t)
		h, _ := replay(events)
		var accepted []Record
		for _, r := range h.snapshot().recs {
			if r.Kind == Write && r.Outcome == OK {
				accepted = append(accepted, r)
			}
		}
		if len(accepted) == 0 {
			t.Skip("no accepted write")
		}
		x := rapid.SampledFrom(accepted).Draw(t, "write")
		at := x.Return + time.Microsecond
		bad, _ := replay(insert(events,
			simEvent{at: at, kind: evWrite, op: -1, client: 1001, node: "nY", res: x.Resource, token: x.Token - 1, value: -1},
			simEvent{at: at, kind: evAccepted, op: -1},
		))
		res := Check(bad, propertyOptions)
		want := CheckStore | CheckRegisterModel
		if failedChecks(res)&want != want {
			t.Fatalf("a write with token %d accepted after %v was not caught by %v:\n%v\n%s", x.Token-1, x, want, res, dump(bad))
		}
	})
}
