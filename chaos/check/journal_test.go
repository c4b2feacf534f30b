package check

import (
	"bytes"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
	"pgregory.net/rapid"
)

// roundTrip records events with a journal and replays the journal.
func roundTrip(t interface {
	Fatal(...any)
	Fatalf(string, ...any)
}, events []simEvent) (orig, back *History, journal string) {
	h, clk := newManual()
	var buf bytes.Buffer
	h.Journal(&buf)
	replayInto(h, clk, events)
	if err := h.JournalErr(); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJournal(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("%v\njournal:\n%s", err, buf.String())
	}
	return h, back, buf.String()
}

// TestJournalReplaysExactly: a replayed journal is the same history, record
// for record (unexported orders included) and interval for interval, so
// every check gives the same verdict.
func TestJournalReplaysExactly(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h, back, journal := roundTrip(t, simulate(t))
		a, b := h.snapshot(), back.snapshot()
		if !reflect.DeepEqual(a.recs, b.recs) {
			t.Fatalf("records differ after replay:\n%s\nreplayed:\n%s\njournal:\n%s", dump(h), dump(back), journal)
		}
		if !reflect.DeepEqual(a.intervals, b.intervals) || !reflect.DeepEqual(a.errs, b.errs) {
			t.Fatalf("intervals or errors differ after replay")
		}
		if x, y := Check(h, Options{}), Check(back, Options{}); x.OK != y.OK || len(x.Violations) != len(y.Violations) {
			t.Fatalf("verdicts differ after replay:\n%s\n%s", x, y)
		}
	})
}

func TestReadJournalRejectsBadInput(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"not json", "{", "line 1"},
		{"bad mode", `{"t":0,"op":"acquire","id":0,"c":1,"n":"n1","r":"r","m":"XX"}`, "acquire"},
		{"unstarted", `{"t":0,"op":"granted","id":4,"m":"EX","tok":1}`, "never started"},
		{"twice", `{"t":0,"op":"read","id":0,"r":"k"}` + "\n" + `{"t":0,"op":"read","id":0,"r":"k"}`, "started twice"},
		{"wrong resolution", `{"t":0,"op":"read","id":0,"r":"k"}` + "\n" + `{"t":1,"op":"granted","id":0,"m":"EX"}`, "of a read"},
	} {
		_, err := ReadJournal(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error mentioning %q", c.name, err, c.want)
		}
	}
}

func TestJournalAfterRecordsIsMisuse(t *testing.T) {
	h, _ := newManual()
	h.Note("x", "y")
	h.Journal(&bytes.Buffer{})
	if res := Check(h, Options{}); res.OK {
		t.Fatal("a journal started after records went unreported")
	}
}

// TestMergeJournalsEqualsOneHistory: the events of a simulated run recorded
// into one history per node (one origin, one clock) and merged are the
// history recorded in one piece, record for record and verdict for verdict.
func TestMergeJournalsEqualsOneHistory(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		events := simulate(t)
		// Distinct times: events of different journals at one instant
		// are concurrent, and their merged order need not be the one
		// history's.
		for i := range events {
			events[i].at = events[i].at*1000 + time.Duration(i+1)
		}
		whole, _ := replay(events)
		byNode := make(map[string][]simEvent)
		var nodes []string
		opNode := make(map[int]string)
		for _, e := range events {
			switch e.kind {
			case evAcquire, evConvert, evRelease, evWrite, evRead:
				opNode[e.op] = e.node
			case evGranted, evFailed, evUnknown, evReleased, evAccepted, evRejected, evReturned:
				e.node = opNode[e.op] // a resolution goes where its call went
			}
			if byNode[e.node] == nil {
				nodes = append(nodes, e.node)
			}
			byNode[e.node] = append(byNode[e.node], e)
		}
		if len(nodes) == 0 {
			nodes = append(nodes, "") // the note's journal
		}
		var journals []io.Reader
		for k, n := range nodes {
			h, clk := newManual()
			h.StartAt(epoch)
			var buf bytes.Buffer
			h.Journal(&buf)
			if k == 0 {
				h.Note("sim", "start") // as replay does, once
			}
			r := newSimRecorder(h, clk)
			for _, e := range byNode[n] {
				r.record(e)
			}
			journals = append(journals, &buf)
		}
		var out bytes.Buffer
		merged, cut, err := MergeJournals(&out, journals...)
		if err != nil || cut != 0 {
			t.Fatalf("merge: %v (cut %d)", err, cut)
		}
		a, b := whole.snapshot(), merged.snapshot()
		if !reflect.DeepEqual(a.recs, b.recs) || !reflect.DeepEqual(a.intervals, b.intervals) || !reflect.DeepEqual(a.errs, b.errs) {
			t.Fatalf("merged history differs:\n%s\nmerged:\n%s", dump(whole), dump(merged))
		}
		again, err := ReadJournal(&out)
		if err != nil {
			t.Fatal(err)
		}
		if c := again.snapshot(); !reflect.DeepEqual(c.recs, b.recs) {
			t.Fatalf("the merged journal does not replay to the merged history")
		}
		if x, y := Check(whole, propertyOptions), Check(merged, propertyOptions); x.OK != y.OK || len(x.Violations) != len(y.Violations) {
			t.Fatalf("verdicts differ:\n%s\n%s", x, y)
		}
	})
}

func TestMergeJournalsBadInput(t *testing.T) {
	good := `{"t":5,"op":"note","n":"x","e":"y"}` + "\n"
	// A last line cut short is left out and counted.
	h, cut, err := MergeJournals(nil, strings.NewReader(good+`{"t":6,"op":"acq`), strings.NewReader(good))
	if err != nil || cut != 1 || len(h.Records()) != 2 {
		t.Fatalf("cut line: %v, cut %d, %d records", err, cut, len(h.Records()))
	}
	if r := h.Records()[0]; r.Call != 5 {
		t.Fatalf("the merged history moved time zero: note at %v", r.Call)
	}
	for _, c := range []struct{ name, in, want string }{
		{"bad line inside", `{"t":6,"op":"acq` + "\n" + good, "line 1"},
		{"time goes back", `{"t":6,"op":"note","n":"x"}` + "\n" + good, "before the line above"},
		{"unstarted", `{"t":7,"op":"granted","id":4,"m":"EX","tok":1}`, "never started"},
	} {
		if _, _, err := MergeJournals(nil, strings.NewReader(good), strings.NewReader(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error mentioning %q", c.name, err, c.want)
		}
	}
}

// TestFreezeEndsBeliefsAndCallsInFlight: a frozen node's holders stop
// believing and its calls in flight become Unknown, as at a crash, and
// what it does after it wakes is recorded as new; the journal keeps the
// difference from a crash.
func TestFreezeEndsBeliefsAndCallsInFlight(t *testing.T) {
	h, clk := newManual()
	var buf bytes.Buffer
	h.Journal(&buf)
	h.Acquire(1, "w1", "r", modes.EX).Granted(modes.EX, 1)
	inflight := h.Write(1, "w1", "r", 1, 10)
	clk.at(1 * s)
	h.Freeze("w1")
	clk.at(2 * s)
	h.Acquire(2, "w2", "r", modes.EX).Granted(modes.EX, 2)
	h.Write(2, "w2", "r", 2, 20).Accepted()
	clk.at(3 * s)
	inflight.Accepted() // news from before the freeze: void
	h.Write(1, "w1", "r", 1, 11).Rejected()
	res := Check(h, Options{Checks: CheckOverlap | CheckTokens | CheckStore | CheckHistory})
	if !res.OK {
		t.Fatalf("a frozen holder's belief outlived its freeze:\n%s", res)
	}
	recs := h.Records()
	if recs[1].Outcome != Unknown || recs[2].Kind != Crash || recs[2].describe() != "freeze #2 of w1" || recs[3].Err != "freeze of w1" || recs[3].Kind != Lost {
		t.Fatalf("%s", dump(h))
	}
	back, err := ReadJournal(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.snapshot().recs, h.snapshot().recs) {
		t.Fatalf("replayed:\n%s\nwant:\n%s", dump(back), dump(h))
	}
}

func TestStartAtSetsTimeZero(t *testing.T) {
	h, clk := newManual()
	h.StartAt(epoch)
	clk.at(7 * s)
	h.Note("x", "y")
	if r := h.Records()[0]; r.Call != 7*s {
		t.Fatalf("note at %v, want 7s after the origin", r.Call)
	}
	h.StartAt(epoch)
	if res := Check(h, Options{}); res.OK {
		t.Fatal("StartAt after a record went unreported")
	}
}

// TestReadJournalKeepsTheOrigin: a history started at an origin before its
// first record replays with the same times, not from its first record (the
// results and nemeses of a chaos run count from the origin too).
func TestReadJournalKeepsTheOrigin(t *testing.T) {
	h, clk := newManual()
	var buf bytes.Buffer
	h.StartAt(epoch)
	h.Journal(&buf)
	clk.at(7 * s)
	h.Acquire(1, "n1", "r", modes.EX).Granted(modes.EX, 1)
	back, err := ReadJournal(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := h.Records()[0], back.Records()[0]; a.Call != 7*s || b.Call != a.Call || b.Return != a.Return {
		t.Fatalf("replayed at %v..%v, recorded at %v..%v", b.Call, b.Return, a.Call, a.Return)
	}
}
