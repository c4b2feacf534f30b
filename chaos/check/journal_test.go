package check

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

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
