package check

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/seed-a6839e30/dlm/modes"
)

// Checks is a set of checks.
type Checks uint

// The checks. CheckHistory is not a check one can select: it reports a
// history that was recorded wrongly (an operation resolved twice, a client
// id used for two locks at once), which makes every other verdict suspect.
const (
	// CheckOverlap: belief intervals of different clients in incompatible
	// modes do not overlap.
	CheckOverlap Checks = 1 << iota
	// CheckTokens: fencing tokens of grants strictly increase per
	// resource.
	CheckTokens
	// CheckStore: the fenced store accepted no stale token and rejected
	// only stale ones.
	CheckStore
	// CheckModesModel: each resource's lock history is linearizable under
	// ModesModel.
	CheckModesModel
	// CheckMutexModel: each resource whose history is EX-only is
	// linearizable under MutexModel (redundant with CheckModesModel; a
	// cross-check of the models).
	CheckMutexModel
	// CheckRegisterModel: each store key's history is linearizable under
	// RegisterModel.
	CheckRegisterModel
	// CheckHistory reports misuse of the History.
	CheckHistory
	// CheckPermits: the permits of a counting semaphore that its clients
	// believe they hold never add up to more than it has.
	CheckPermits
	// CheckSemaphoreModel: each semaphore's history is linearizable under
	// SemaphoreModel.
	CheckSemaphoreModel

	// DefaultChecks is what a zero Options runs.
	DefaultChecks = CheckOverlap | CheckTokens | CheckStore | CheckModesModel | CheckRegisterModel | CheckPermits | CheckSemaphoreModel
	// AllChecks adds CheckMutexModel.
	AllChecks = DefaultChecks | CheckMutexModel
)

var checkNames = []string{"overlap", "tokens", "store", "modes model", "mutex model", "register model", "history", "permits", "semaphore model"}

func (c Checks) String() string {
	var parts []string
	for i, n := range checkNames {
		if c&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}

// Options configure Check. The zero value runs DefaultChecks with a 30 s
// budget for the models and writes no files.
type Options struct {
	// Checks to run; zero means DefaultChecks.
	Checks Checks
	// Timeout bounds the time spent in porcupine over the whole check
	// (default 30 s). A model that runs out of it is inconclusive. Inside
	// a synctest bubble the clock does not move while porcupine computes,
	// so there MaxSteps is the bound that applies.
	Timeout time.Duration
	// MaxSteps bounds the model steps porcupine may take per resource
	// (default 5 million: about 8 s on a 2-core machine); past it the
	// result is inconclusive. Unlike Timeout it is deterministic. Many
	// operations concurrent at one instant cost the most: 25 grants
	// returning together with a conflict among them exceed the default.
	MaxSteps int64
	// VisualizationDir, if set, receives for each resource that a model
	// found illegal or could not decide a porcupine HTML visualization,
	// and a text dump of the history when anything failed. Require uses a
	// new directory under os.TempDir() when it is empty.
	VisualizationDir string
	// Name prefixes the files written (default "check"; Require uses the
	// test's name).
	Name string
	// AllowInconclusive lets a model check that could not decide pass:
	// Result.OK then ignores Result.Inconclusive. By default an undecided
	// check fails the result, since a check that ran out of budget has not
	// shown the run safe.
	AllowInconclusive bool
	// MaxReports is the most violations kept per check (default 10); the
	// rest are counted in Result.Omitted.
	MaxReports int
}

func (o Options) withDefaults() Options {
	if o.Checks == 0 {
		o.Checks = DefaultChecks
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.MaxSteps <= 0 {
		o.MaxSteps = 5_000_000
	}
	if o.Name == "" {
		o.Name = "check"
	}
	if o.MaxReports <= 0 {
		o.MaxReports = 10
	}
	return o
}

// A Violation is one thing a check found wrong.
type Violation struct {
	Check    Checks // the check that found it (one bit)
	Resource string // the resource, or the store key
	Message  string // what is wrong, naming clients, nodes, modes, tokens and times
	// Records are the operations involved (tokens, store, and the
	// operation a model could not place), Intervals the two belief
	// intervals of an overlap.
	Records   []Record
	Intervals []Interval
	// Visualization is the porcupine HTML file written for a model
	// violation, if any.
	Visualization string
}

func (v Violation) String() string { return fmt.Sprintf("[%v] %s", v.Check, v.Message) }

// Inconclusive is a model check that could not decide: porcupine ran out of
// time or steps, or the resource has too many clients for the model.
type Inconclusive struct {
	Check         Checks
	Resource      string
	Reason        string
	Visualization string
}

func (i Inconclusive) String() string {
	s := fmt.Sprintf("[%v] %q: %s", i.Check, i.Resource, i.Reason)
	if i.Visualization != "" {
		s += "\n    visualization: " + i.Visualization
	}
	return s
}

// Stats describe the history checked.
type Stats struct {
	Records, Resources, Keys, Intervals, Grants, Writes, Unknown, Crashes int
	// Shared counts the Acquires granted as shares of a node's grant
	// (GrantedShared), which Grants does not count.
	Shared int
}

// Result is what Check found.
type Result struct {
	// OK is true when there is no violation and nothing inconclusive
	// (with AllowInconclusive: no violation).
	OK           bool
	Violations   []Violation
	Omitted      int // violations found beyond MaxReports per check
	Inconclusive []Inconclusive
	// Skipped says which checks did not apply to which resources, and why.
	Skipped []string
	// Files are the visualizations and history dumps written.
	Files []string
	Stats Stats
}

// String is the report: a summary line, then each violation and each
// inconclusive check.
func (r Result) String() string {
	var b strings.Builder
	verdict := "OK"
	if !r.OK {
		verdict = "FAILED"
	}
	s := r.Stats
	fmt.Fprintf(&b, "check %s: %d violations, %d inconclusive (%d records, %d resources, %d store keys, %d belief intervals, %d grants, %d shared grants, %d writes, %d unknown, %d crashes)\n",
		verdict, len(r.Violations)+r.Omitted, len(r.Inconclusive), s.Records, s.Resources, s.Keys, s.Intervals, s.Grants, s.Shared, s.Writes, s.Unknown, s.Crashes)
	for _, v := range r.Violations {
		b.WriteString(v.String())
		if v.Visualization != "" {
			b.WriteString("\n    visualization: " + v.Visualization)
		}
		b.WriteByte('\n')
	}
	if r.Omitted > 0 {
		fmt.Fprintf(&b, "(%d more violations not shown)\n", r.Omitted)
	}
	for _, i := range r.Inconclusive {
		b.WriteString("inconclusive " + i.String() + "\n")
	}
	for _, f := range r.Files {
		if strings.HasSuffix(f, ".txt") {
			b.WriteString("history: " + f + "\n")
		}
	}
	return b.String()
}

// Check runs the checks opts selects on what h recorded so far, and returns
// the verdict. It does not change h. Porcupine work is bounded by
// opts.Timeout and opts.MaxSteps; see Options.
func Check(h *History, opts Options) Result {
	return check(h, opts, nil)
}

// Require runs Check and fails t with the report if a check found a
// violation or could not decide; with AllowInconclusive, an inconclusive
// result is only logged. Visualizations go to
// opts.VisualizationDir, or to a new directory under os.TempDir(), and are
// named after the test.
func Require(t testing.TB, h *History, opts Options) Result {
	t.Helper()
	if opts.Name == "" {
		opts.Name = t.Name()
	}
	var mkdir func() (string, error)
	if opts.VisualizationDir == "" {
		mkdir = func() (string, error) { return os.MkdirTemp("", "dlm-check-") }
	}
	res := check(h, opts, mkdir)
	switch {
	case !res.OK:
		t.Fatal(res.String())
	case len(res.Inconclusive) > 0:
		t.Log(res.String())
	}
	return res
}

// checker carries one run of Check.
type checker struct {
	opts     Options
	snap     snapshot
	deadline time.Time
	mkdir    func() (string, error)
	dir      string
	dirErr   error
	res      Result
	count    map[Checks]int
}

func check(h *History, opts Options, mkdir func() (string, error)) Result {
	opts = opts.withDefaults()
	c := &checker{
		opts:     opts,
		snap:     h.snapshot(),
		deadline: time.Now().Add(opts.Timeout),
		mkdir:    mkdir,
		dir:      opts.VisualizationDir,
		count:    make(map[Checks]int),
	}
	c.stats()
	for _, e := range c.snap.errs {
		c.report(Violation{Check: CheckHistory, Message: e})
	}
	if opts.Checks&CheckOverlap != 0 {
		c.report(checkOverlap(c.snap.intervals)...)
	}
	if opts.Checks&CheckTokens != 0 {
		c.report(checkTokens(c.snap.recs)...)
	}
	if opts.Checks&CheckStore != 0 {
		c.report(checkStore(c.snap.recs)...)
	}
	sems := c.semaphores()
	if opts.Checks&CheckPermits != 0 {
		c.report(checkPermits(c.snap.intervals)...)
	}
	if opts.Checks&(CheckModesModel|CheckMutexModel) != 0 {
		c.lockModels(sems)
	}
	if opts.Checks&CheckSemaphoreModel != 0 {
		c.semaphoreModels(sems)
	}
	if opts.Checks&CheckRegisterModel != 0 {
		c.registerModel()
	}
	c.res.OK = len(c.res.Violations) == 0 && (opts.AllowInconclusive || len(c.res.Inconclusive) == 0)
	if !c.res.OK || len(c.res.Inconclusive) > 0 {
		if path := c.file("history.txt"); path != "" {
			c.writeDump(path)
		}
	}
	return c.res
}

func (c *checker) stats() {
	s := &c.res.Stats
	res, keys := make(map[string]bool), make(map[string]bool)
	for i := range c.snap.recs {
		r := &c.snap.recs[i]
		switch r.Kind {
		case Acquire, Convert, Release, Lost:
			res[r.Resource] = true
		case Write, Read:
			keys[r.Resource] = true
		case Crash:
			s.Crashes++
		}
		if r.Kind == Write {
			s.Writes++
		}
		if isGrant(r) {
			s.Grants++
		}
		if r.Shared && r.Outcome == OK {
			s.Shared++
		}
		if r.Outcome == Unknown {
			s.Unknown++
		}
	}
	s.Records, s.Resources, s.Keys, s.Intervals = len(c.snap.recs), len(res), len(keys), len(c.snap.intervals)
}

// report keeps up to MaxReports violations per check.
func (c *checker) report(vs ...Violation) {
	for _, v := range vs {
		if c.count[v.Check] >= c.opts.MaxReports {
			c.res.Omitted++
			continue
		}
		c.count[v.Check]++
		c.res.Violations = append(c.res.Violations, v)
	}
}

// opMeta is the metadata of a porcupine operation: the record it came from.
type opMeta struct {
	seq  int
	text string
}

func (m opMeta) String() string { return m.text }

// lockModels builds each resource's lock history and runs the lock models
// on it; semaphores (sems) have their own model.
func (c *checker) lockModels(sems map[string]bool) {
	type part struct {
		recs   []modelRecord
		exOnly bool
	}
	parts := make(map[string]*part)
	var order []string
	for _, m := range lockHistory(c.snap.recs) {
		r := m.r
		if sems[r.Resource] {
			continue
		}
		p := parts[r.Resource]
		if p == nil {
			p = &part{exOnly: true}
			parts[r.Resource] = p
			order = append(order, r.Resource)
		}
		if r.Kind == Convert || (r.Kind == Acquire && (r.Mode != modes.EX || (r.Outcome == OK && r.Granted != modes.EX))) {
			p.exOnly = false
		}
		if !m.skip {
			p.recs = append(p.recs, m)
		}
	}
	slices.Sort(order)
	for _, res := range order {
		p := parts[res]
		slot, n := modelSlots(p.recs)
		if n > MaxClients {
			for _, ch := range []Checks{CheckModesModel, CheckMutexModel} {
				if c.opts.Checks&ch != 0 {
					c.res.Inconclusive = append(c.res.Inconclusive, Inconclusive{Check: ch, Resource: res,
						Reason: fmt.Sprintf("%d clients at once; the lock models handle at most %d per resource", n, MaxClients)})
				}
			}
			continue
		}
		ops := make([]porcupine.Operation, 0, len(p.recs))
		for _, m := range p.recs {
			r := m.r
			idx := slot[r.Client]
			ops = append(ops, porcupine.Operation{
				ClientId: idx,
				Input: LockInput{Resource: r.Resource, Client: idx, Kind: m.kind, Mode: r.Mode,
					From: r.From, CheckFrom: m.kind == Convert && r.Held && r.fromExact, Lock: r.lock},
				Call:     int64(r.Call),
				Output:   LockOutput{Outcome: m.out, Mode: r.Granted},
				Return:   int64(m.ret),
				Metadata: opMeta{seq: r.Seq, text: r.summary()},
			})
		}
		if c.opts.Checks&CheckModesModel != 0 {
			c.runModel(CheckModesModel, "modes", modesSegModel(), res, ops)
		}
		if c.opts.Checks&CheckMutexModel != 0 {
			if p.exOnly {
				c.runModel(CheckMutexModel, "mutex", mutexSegModel(), res, ops)
			} else {
				c.res.Skipped = append(c.res.Skipped, fmt.Sprintf("mutex model: resource %q has modes other than EX or conversions", res))
			}
		}
	}
}

// modelSlots gives each client of one resource's model records (in call
// order) a model client index, and returns how many indexes it used.
//
// A client whose operations all returned, the last of them a release that
// leaves it holding nothing in every state (a Release that returned OK, or
// a Lost) after every other one returned, is done with the resource from
// that return on: any legal order places all its operations before those
// of a client whose first call comes later, and leaves its index holding
// nothing, as a new client's is. Such a later client shares the index, so
// that the models' MaxClients bounds the clients active at once, not all
// the clients a long run had (each witness of a holder nemesis is a new
// one). A client with an operation of unknown outcome is never done.
func modelSlots(recs []modelRecord) (map[int]int, int) {
	type span struct {
		client      int
		first, done time.Duration // done: Infinity if never
		last        *modelRecord
		others      time.Duration // the latest return before last
		lock        int           // the lock of its latest Acquire
	}
	spans := make(map[int]*span)
	var clients []*span
	for i := range recs {
		m := &recs[i]
		sp := spans[m.r.Client]
		if sp == nil {
			sp = &span{client: m.r.Client, first: m.r.Call, others: -1}
			spans[m.r.Client] = sp
			clients = append(clients, sp)
		}
		if sp.last != nil {
			sp.others = max(sp.others, sp.last.ret)
		}
		sp.last = m
		if m.kind == Acquire {
			sp.lock = m.r.lock
		}
	}
	for _, sp := range clients {
		l := sp.last
		// It ends the lock its latest Acquire made, which could be
		// granted only while it held nothing else.
		frees := (l.kind == Release || l.kind == Lost) && l.out == OK && l.r.lock == sp.lock && sp.lock != 0
		sp.done = Infinity
		if frees && l.ret != Infinity && sp.others < l.r.Call {
			sp.done = l.ret
		}
	}
	slices.SortStableFunc(clients, func(a, b *span) int { return cmp.Compare(a.first, b.first) })
	slot := make(map[int]int, len(clients))
	var freeAt []time.Duration // per index: when its last client was done
	for _, sp := range clients {
		idx := slices.IndexFunc(freeAt, func(t time.Duration) bool { return t < sp.first })
		if idx < 0 {
			idx = len(freeAt)
			freeAt = append(freeAt, 0)
		}
		freeAt[idx] = sp.done
		slot[sp.client] = idx
	}
	return slot, len(freeAt)
}

// registerModel builds each store key's history and runs RegisterModel.
func (c *checker) registerModel() {
	parts := make(map[string][]porcupine.Operation)
	var order []string
	clients := make(map[string]map[int]int)
	for i := range c.snap.recs {
		r := &c.snap.recs[i]
		if r.Kind != Write && r.Kind != Read {
			continue
		}
		if r.Outcome != OK && r.Outcome != Rejected && (r.Kind == Read || r.Outcome == Fail) {
			continue // no effect in any state: only more work for porcupine
		}
		if _, ok := parts[r.Resource]; !ok {
			order = append(order, r.Resource)
			clients[r.Resource] = make(map[int]int)
		}
		cl := clients[r.Resource]
		idx, ok := cl[r.Client]
		if !ok {
			idx = len(cl)
			cl[r.Client] = idx
		}
		out := r.Outcome
		if out == Pending {
			out = Unknown
		}
		parts[r.Resource] = append(parts[r.Resource], porcupine.Operation{
			ClientId: idx,
			Input:    RegisterInput{Key: r.Resource, Kind: r.Kind, Token: r.Token, Value: r.Value},
			Call:     int64(r.Call),
			Output:   RegisterOutput{Outcome: out, Value: r.Value},
			Return:   int64(r.Return),
			Metadata: opMeta{seq: r.Seq, text: r.summary()},
		})
	}
	slices.Sort(order)
	for _, key := range order {
		c.runModel(CheckRegisterModel, "register", registerSegModel(), key, parts[key])
	}
}

// runModel checks one resource's history against a model, within the time
// left and MaxSteps, and reports the outcome. The history is checked in
// segments (checkSegmented), so that its memory stays that of the largest
// segment; a segment no order fits is given to porcupine, from the states
// the history before it can leave, for the explanation and the picture.
func (c *checker) runModel(which Checks, name string, m segModel, res string, ops []porcupine.Operation) {
	left := time.Until(c.deadline)
	if left <= 0 {
		c.res.Inconclusive = append(c.res.Inconclusive, Inconclusive{Check: which, Resource: res,
			Reason: fmt.Sprintf("not checked: the %v budget was spent on other resources", c.opts.Timeout)})
		return
	}
	got := checkSegmented(m, ops, segLimits{maxSteps: c.opts.MaxSteps, deadline: c.deadline, maxConfigs: maxCarried})
	switch got.verdict {
	case porcupine.Ok:
		return
	case porcupine.Unknown:
		reason := fmt.Sprintf("%s on %d operations (%d segments, the largest of %d operations)", got.reason, len(ops), got.segments, got.largest)
		c.res.Inconclusive = append(c.res.Inconclusive, Inconclusive{Check: which, Resource: res, Reason: reason})
		return
	}
	v := Violation{Check: which, Resource: res}
	what := "resource"
	if which == CheckRegisterModel {
		what = "key"
	}
	v.Message = fmt.Sprintf("%s %q: the history of its %d operations is not linearizable under the %s model: no order fits the %d operations called from %v to %v from any state the operations before can leave",
		what, res, len(ops), name, len(got.failed), got.from, got.to)
	// porcupine on that segment alone, from those states.
	nm := m.nm
	starts := got.startStates
	nm.Init = func() []any { return starts }
	model := nm.ToModel()
	verdict, info := porcupine.CheckOperationsVerbose(model, got.failed, max(time.Second, min(time.Until(c.deadline), time.Minute)))
	if verdict == porcupine.Illegal {
		if hint, rec := c.stuck(info, got.failed); hint != "" {
			v.Message += ";\n    " + hint
			v.Records = []Record{rec}
		}
		v.Visualization = c.visualize(model, info, name, res)
	}
	c.report(v)
}

// maxCarried bounds the states and pending operations a model check
// carries from one segment of a history to the next.
const maxCarried = 10_000

// stuck explains an illegal result: how far porcupine got, and the earliest
// operation it could not place in any order.
func (c *checker) stuck(info porcupine.LinearizationInfo, ops []porcupine.Operation) (string, Record) {
	parts := info.PartialLinearizationsOperations()
	if len(parts) != 1 {
		return "", Record{}
	}
	var longest []porcupine.Operation
	for _, lin := range parts[0] {
		if len(lin) > len(longest) {
			longest = lin
		}
	}
	placed := make(map[int]bool)
	for _, op := range longest {
		placed[op.Metadata.(opMeta).seq] = true
	}
	var first *porcupine.Operation
	for i := range ops {
		op := &ops[i]
		if !placed[op.Metadata.(opMeta).seq] && (first == nil || op.Call < first.Call) {
			first = op
		}
	}
	if first == nil {
		return "", Record{}
	}
	seq := first.Metadata.(opMeta).seq
	return fmt.Sprintf("the longest legal order places %d of them; the first that fits nowhere is\n    %s",
		len(longest), first.Metadata.(opMeta).text), c.snap.recs[seq]
}

// visualize writes porcupine's HTML for one resource and returns its path,
// or "" if there is no directory to write to.
func (c *checker) visualize(model porcupine.Model, info porcupine.LinearizationInfo, name, res string) string {
	path := c.file(name + "-" + res + ".html")
	if path == "" {
		return ""
	}
	info.AddAnnotations(c.annotations())
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		c.res.Skipped = append(c.res.Skipped, fmt.Sprintf("visualization %s: %v", path, err))
		return ""
	}
	return path
}

// annotations are the crashes and notes, for the visualizations.
func (c *checker) annotations() []porcupine.Annotation {
	var out []porcupine.Annotation
	for _, r := range c.snap.recs {
		end := r.Return
		if end == Infinity {
			end = c.snap.end
		}
		switch r.Kind {
		case Crash:
			out = append(out, porcupine.Annotation{Tag: "nemesis", Start: int64(r.Call), End: int64(r.Call),
				Description: "crash " + r.Node, Details: r.String(), BackgroundColor: "#f4b4b4"})
		case Note:
			tag := r.Node
			if tag == "" {
				tag = "nemesis"
			}
			out = append(out, porcupine.Annotation{Tag: tag, Start: int64(r.Call), End: int64(end),
				Description: r.Err, Details: r.String()})
		}
	}
	return out
}

// file returns the path of a new file in the output directory, creating
// the directory if needed, or "" if there is none.
func (c *checker) file(name string) string {
	if c.dir == "" && c.mkdir != nil && c.dirErr == nil {
		c.dir, c.dirErr = c.mkdir()
		if c.dirErr != nil {
			c.res.Skipped = append(c.res.Skipped, fmt.Sprintf("visualization directory: %v", c.dirErr))
		}
	}
	if c.dir == "" {
		return ""
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		c.res.Skipped = append(c.res.Skipped, fmt.Sprintf("visualization directory: %v", err))
		return ""
	}
	path := filepath.Join(c.dir, sanitize(c.opts.Name+"-"+name))
	ext := filepath.Ext(path)
	for n := 2; slices.Contains(c.res.Files, path); n++ { // resources whose names sanitize alike
		path = fmt.Sprintf("%s-%d%s", strings.TrimSuffix(path, ext), n, ext)
	}
	c.res.Files = append(c.res.Files, path)
	return path
}

// sanitize makes a file name from test and resource names.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
}

func (c *checker) writeDump(path string) {
	var b strings.Builder
	for _, r := range c.snap.recs {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	b.WriteString("\nbelief intervals:\n")
	for _, iv := range c.snap.intervals {
		fmt.Fprintf(&b, "%q %s\n", iv.Resource, iv)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		c.res.Skipped = append(c.res.Skipped, fmt.Sprintf("history dump %s: %v", path, err))
	}
}
