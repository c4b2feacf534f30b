package check

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// A journal is a history's recording as it happened: every call of a
// recording method, one JSON object a line, in the order the history saw
// them, with the timestamp the history gave it. ReadJournal replays it into
// a history equal to the original, so a run's history can be kept, checked
// again, and edited (a self-test plants a violation in a real one).
//
// Each line has "t" (nanoseconds since the history's first record) and "op":
// a call (acquire, permits, convert, release, write, read, span), which starts an
// operation named by "id" (its record's Seq); an instant (lost, crash,
// note); or a resolution of operation "id" (granted, shared, failed,
// unknown, released, accepted, rejected, returned, end). The other fields
// are the method's arguments: "c" client, "n" node (or a note's tag), "r"
// resource or store key, "m" mode, "tok" token, "v" value, "e" error or
// text, "p" and "lim" the permits asked for and the semaphore's.
type JournalEntry struct {
	T      int64  `json:"t"`
	Op     string `json:"op"`
	ID     int    `json:"id,omitempty"`
	Client int    `json:"c,omitempty"`
	Node   string `json:"n,omitempty"`
	Res    string `json:"r,omitempty"`
	Mode   string `json:"m,omitempty"`
	Token  uint64 `json:"tok,omitempty"`
	Value  int64  `json:"v,omitempty"`
	Err    string `json:"e,omitempty"`
	// Permits and Limit: of a permits call (History.AcquirePermits).
	Permits int `json:"p,omitempty"`
	Limit   int `json:"lim,omitempty"`
}

type journal struct {
	w   io.Writer
	err error
}

// Journal makes h write its journal to w from now on, a line per record;
// call it before the first record. Writes happen under the history's
// mutex: give it a buffered writer and flush it after the run. The first
// write error stops the journal and is reported by JournalErr.
func (h *History) Journal(w io.Writer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.recs) > 0 {
		h.misuse("Journal called after %d records; the journal would miss them", len(h.recs))
	}
	h.jr = &journal{w: w}
}

// JournalErr returns the error that stopped the journal, if any.
func (h *History) JournalErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.jr == nil {
		return nil
	}
	return h.jr.err
}

// log writes one entry; h.mu must be held.
func (h *History) log(e JournalEntry) {
	if h.jr == nil || h.jr.err != nil {
		return
	}
	b, err := json.Marshal(e)
	if err == nil {
		b = append(b, '\n')
		_, err = h.jr.w.Write(b)
	}
	h.jr.err = err
}

// logCall journals the call that created record i.
func (h *History) logCall(op string, i int) {
	if h.jr == nil {
		return
	}
	r := &h.recs[i]
	e := JournalEntry{T: int64(r.Call), Op: op, ID: i, Client: r.Client, Node: r.Node, Res: r.Resource,
		Token: r.Token, Value: r.Value}
	switch r.Kind {
	case Acquire, Convert:
		e.Mode = r.Mode.String()
		e.Permits, e.Limit = r.Permits, r.Limit
	}
	if r.Kind == Crash || r.Kind == Note {
		e.Client = 0
		e.Err = r.Err
	}
	h.log(e)
}

// logResolve journals the resolution of record i.
func (h *History) logResolve(op string, i int, mode modes.Mode, err string) {
	if h.jr == nil {
		return
	}
	r := &h.recs[i]
	t := r.Return
	if t == Infinity {
		t = h.last
	}
	tok := r.Token
	if tok == 0 {
		tok = r.late // a grant that came back after its node's crash
	}
	e := JournalEntry{T: int64(t), Op: op, ID: i, Err: err, Token: tok, Value: r.Value}
	if op == "granted" || op == "shared" {
		e.Mode = mode.String()
	}
	h.log(e)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// ReadJournal replays a journal into a new history. The result records
// exactly what the original did, with the same timestamps, so checks give
// the same verdicts.
func ReadJournal(r io.Reader) (*History, error) {
	var cur time.Duration
	base := time.Unix(0, 0)
	h := NewHistory(func() time.Time { return base.Add(cur) })
	// A journal's times are offsets from its history's start: keep them,
	// rather than start again from the first entry's (a merged journal's
	// first entry comes well after the run's origin, which the results
	// and the nemeses' times count from too).
	h.StartAt(base)
	ops := make(map[int]any)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxJournalLine)
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e JournalEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("check: journal line %d: %w", line, err)
		}
		cur = time.Duration(e.T)
		if err := replayEntry(h, ops, e); err != nil {
			return nil, fmt.Errorf("check: journal line %d: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("check: journal: %w", err)
	}
	return h, nil
}

// maxJournalLine bounds a journal line: the longest is a note's text.
const maxJournalLine = 1 << 20

// MergeJournals replays several journals onto one timeline into a new
// history, and writes its journal to out (if not nil): the journals of
// histories that share their time zero (StartAt with one origin, read
// from one clock), such as those of the processes of one chaos run. The
// entries are taken in time order, those of one journal in their own
// order; equal times of different journals count as concurrent, as in
// one history. Each journal names its operations by its own ids. Times
// are kept: the merged history's time zero is the journals' origin.
//
// A journal's last line may lack its newline because its process was
// killed while writing it: such a line is left out if it does not parse,
// and counted in cut. Any other bad line is an error.
func MergeJournals(out io.Writer, journals ...io.Reader) (h *History, cut int, err error) {
	type stream struct {
		entries []JournalEntry
		next    int
	}
	streams := make([]*stream, len(journals))
	for k, r := range journals {
		st := &stream{}
		br := bufio.NewReaderSize(r, 64<<10)
		for line := 1; ; line++ {
			b, rerr := br.ReadBytes('\n')
			if rerr != nil && rerr != io.EOF {
				return nil, 0, fmt.Errorf("check: journal %d: %w", k, rerr)
			}
			if len(b) > maxJournalLine {
				return nil, 0, fmt.Errorf("check: journal %d line %d: longer than %d bytes", k, line, maxJournalLine)
			}
			if t := bytes.TrimSpace(b); len(t) > 0 {
				var e JournalEntry
				if err := json.Unmarshal(t, &e); err != nil {
					if rerr == io.EOF && b[len(b)-1] != '\n' {
						cut++ // the last line, cut short
						break
					}
					return nil, 0, fmt.Errorf("check: journal %d line %d: %w", k, line, err)
				}
				if n := len(st.entries); n > 0 && e.T < st.entries[n-1].T {
					return nil, 0, fmt.Errorf("check: journal %d line %d: time %d before the line above's %d", k, line, e.T, st.entries[n-1].T)
				}
				st.entries = append(st.entries, e)
			}
			if rerr == io.EOF {
				break
			}
		}
		streams[k] = st
	}
	var cur time.Duration
	base := time.Unix(0, 0)
	h = NewHistory(func() time.Time { return base.Add(cur) })
	h.StartAt(base)
	if out != nil {
		h.Journal(out)
	}
	ops := make([]map[int]any, len(streams))
	for k := range ops {
		ops[k] = make(map[int]any)
	}
	for {
		best := -1
		for k, st := range streams {
			if st.next < len(st.entries) && (best < 0 || st.entries[st.next].T < streams[best].entries[streams[best].next].T) {
				best = k
			}
		}
		if best < 0 {
			break
		}
		st := streams[best]
		e := st.entries[st.next]
		st.next++
		cur = time.Duration(e.T)
		if err := replayEntry(h, ops[best], e); err != nil {
			return nil, 0, fmt.Errorf("check: journal %d entry %d: %w", best, st.next, err)
		}
	}
	if err := h.JournalErr(); err != nil {
		return nil, 0, fmt.Errorf("check: merged journal: %w", err)
	}
	return h, cut, nil
}

func replayEntry(h *History, ops map[int]any, e JournalEntry) error {
	mode := func() (modes.Mode, error) {
		m, err := modes.Parse(e.Mode)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", e.Op, err)
		}
		return m, nil
	}
	var errv error
	if e.Err != "" {
		errv = errors.New(e.Err)
	}
	start := func(op any) error {
		if _, dup := ops[e.ID]; dup {
			return fmt.Errorf("%s: operation %d started twice", e.Op, e.ID)
		}
		ops[e.ID] = op
		return nil
	}
	switch e.Op {
	case "acquire", "convert":
		m, err := mode()
		if err != nil {
			return err
		}
		if e.Op == "acquire" {
			return start(h.Acquire(e.Client, e.Node, e.Res, m))
		}
		return start(h.Convert(e.Client, e.Node, e.Res, m))
	case "permits":
		return start(h.AcquirePermits(e.Client, e.Node, e.Res, e.Permits, e.Limit))
	case "release":
		return start(h.Release(e.Client, e.Node, e.Res))
	case "write":
		return start(h.Write(e.Client, e.Node, e.Res, e.Token, e.Value))
	case "read":
		return start(h.Read(e.Client, e.Node, e.Res))
	case "span":
		return start(h.Span(e.Node, e.Err))
	case "lost":
		h.Lost(e.Client, e.Node, e.Res)
		return nil
	case "crash":
		h.crash(e.Node, e.Err)
		return nil
	case "note":
		h.Note(e.Node, e.Err)
		return nil
	}
	op, ok := ops[e.ID]
	if !ok {
		return fmt.Errorf("%s of operation %d, which never started", e.Op, e.ID)
	}
	switch o := op.(type) {
	case *Op:
		switch e.Op {
		case "granted", "shared":
			m, err := mode()
			if err != nil {
				return err
			}
			if e.Op == "shared" {
				o.GrantedShared(m, e.Token)
			} else {
				o.Granted(m, e.Token)
			}
		case "failed":
			o.Failed(errv)
		case "unknown":
			o.Unknown()
		default:
			return fmt.Errorf("%s of a lock operation", e.Op)
		}
	case *ReleaseOp:
		switch e.Op {
		case "released":
			o.Released()
		case "failed":
			o.Failed(errv)
		case "unknown":
			o.Unknown()
		default:
			return fmt.Errorf("%s of a release", e.Op)
		}
	case *WriteOp:
		switch e.Op {
		case "accepted":
			o.Accepted()
		case "rejected":
			o.Rejected()
		case "failed":
			o.Failed(errv)
		case "unknown":
			o.Unknown()
		default:
			return fmt.Errorf("%s of a write", e.Op)
		}
	case *ReadOp:
		switch e.Op {
		case "returned":
			o.Returned(e.Value)
		case "failed":
			o.Failed(errv)
		default:
			return fmt.Errorf("%s of a read", e.Op)
		}
	case func():
		if e.Op != "end" {
			return fmt.Errorf("%s of a span", e.Op)
		}
		o()
	default:
		return fmt.Errorf("%s: unknown operation %d", e.Op, e.ID)
	}
	return nil
}
