package check

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

func TestHistoryRecordsOperations(t *testing.T) {
	h, clk := newManual()
	clk.at(0)
	a := h.Acquire(1, "n1", "r", modes.EX)
	clk.at(10 * ms)
	a.Granted(modes.EX, 7)
	w := h.Write(1, "n1", "r", 7, 42)
	clk.at(12 * ms)
	w.Accepted()
	rel := h.Release(1, "n1", "r")
	clk.at(15 * ms)
	rel.Released()
	f := h.Acquire(2, "n2", "r", modes.PR)
	f.Failed(errors.New("would block"))

	recs := h.Records()
	if len(recs) != 4 {
		t.Fatalf("%d records: %v", len(recs), recs)
	}
	want := []struct {
		kind      Kind
		out       Outcome
		call, ret time.Duration
	}{
		{Acquire, OK, 0, 10 * ms},
		{Write, OK, 10 * ms, 12 * ms},
		{Release, OK, 12 * ms, 15 * ms},
		{Acquire, Fail, 15 * ms, 15 * ms},
	}
	for i, w := range want {
		r := recs[i]
		if r.Seq != i || r.Kind != w.kind || r.Outcome != w.out || r.Call != w.call || r.Return != w.ret {
			t.Errorf("record %d = %v, want %v %v [%v, %v]", i, r, w.kind, w.out, w.call, w.ret)
		}
	}
	if recs[0].Granted != modes.EX || recs[0].Token != 7 {
		t.Errorf("grant: %v", recs[0])
	}
	if !recs[2].Held || recs[2].From != modes.EX {
		t.Errorf("release should note the lock was held in EX: %v", recs[2])
	}
	if recs[3].Err != "would block" {
		t.Errorf("failure reason: %q", recs[3].Err)
	}
	if got := recs[0].String(); !strings.Contains(got, `client 1@n1 acquire "r" EX -> granted EX token 7`) {
		t.Errorf("String: %q", got)
	}
}

func TestHistoryUnknownReturnsAtInfinity(t *testing.T) {
	h, clk := newManual()
	op := h.Acquire(1, "n1", "r", modes.EX)
	clk.at(s)
	op.Unknown()
	if r := h.Records()[0]; r.Outcome != Unknown || r.Return != Infinity {
		t.Fatalf("%v", r)
	}
}

func TestHistoryPendingIsUnknownAtCheck(t *testing.T) {
	h, _ := newManual()
	h.Acquire(1, "n1", "r", modes.EX)
	if r := h.Records()[0]; r.Outcome != Pending {
		t.Fatalf("Records: %v", r)
	}
	if r := h.snapshot().recs[0]; r.Outcome != Unknown || r.Return != Infinity {
		t.Fatalf("snapshot: %v", r)
	}
}

func TestHistoryResolvedTwiceIsAnError(t *testing.T) {
	h, _ := newManual()
	op := h.Acquire(1, "n1", "r", modes.EX)
	op.Granted(modes.EX, 1)
	op.Failed(nil)
	errs := h.snapshot().errs
	if len(errs) != 1 || !strings.Contains(errs[0], "resolved twice (ok, then failed)") {
		t.Fatalf("errors: %q", errs)
	}
	if r := h.Records()[0]; r.Outcome != OK {
		t.Fatalf("the first resolution must stand: %v", r)
	}
}

func TestHistoryTwoLocksForOneClientIsAnError(t *testing.T) {
	h, _ := newManual()
	h.Acquire(1, "n1", "r", modes.PR).Granted(modes.PR, 1)
	h.Acquire(1, "n1", "r", modes.PR).Granted(modes.PR, 2)
	errs := h.snapshot().errs
	if len(errs) != 1 || !strings.Contains(errs[0], "give each lock handle its own client id") {
		t.Fatalf("errors: %q", errs)
	}
}

func TestHistoryNilRecordsNothing(t *testing.T) {
	var h *History
	h.Acquire(1, "n", "r", modes.EX).Granted(modes.EX, 1)
	h.Convert(1, "n", "r", modes.PR).Failed(nil)
	h.Release(1, "n", "r").Released()
	h.Write(1, "n", "r", 1, 1).Accepted()
	h.Read(1, "n", "r").Returned(1)
	h.Lost(1, "n", "r")
	h.Crash("n")
	h.Note("nemesis", "x")
	h.Span("nemesis", "y")()
	if h.Records() != nil {
		t.Fatal("records from a nil history")
	}
}

func TestHistoryClockNeverGoesBack(t *testing.T) {
	h, clk := newManual()
	clk.at(5 * s)
	h.Note("t", "first")
	clk.at(2 * s) // a clock step backwards
	h.Note("t", "second")
	recs := h.Records()
	if recs[0].Call != 0 || recs[1].Call != 0 {
		t.Fatalf("times: %v, %v", recs[0].Call, recs[1].Call)
	}
}

// TestCrash: a crash makes the node's operations in flight Unknown (and
// ignores what they return later), ends the beliefs of its clients at the
// crash instant with a Lost, and leaves other nodes alone.
func TestCrash(t *testing.T) {
	h, clk := newManual()
	h.Acquire(1, "n1", "r", modes.EX).Granted(modes.EX, 1) // held on n1
	h.Acquire(2, "n2", "q", modes.PR).Granted(modes.PR, 2) // held on n2
	inflight := h.Acquire(3, "n1", "q", modes.PR)          // in flight on n1
	other := h.Acquire(4, "n2", "q", modes.CR)             // in flight on n2
	w := h.Write(1, "n1", "r", 1, 5)                       // write in flight on n1
	clk.at(2 * s)
	h.Crash("n1")
	clk.at(3 * s)
	inflight.Granted(modes.PR, 3) // the dead node's late news is ignored
	w.Accepted()
	other.Granted(modes.CR, 4)

	snap := h.snapshot()
	if len(snap.errs) != 0 {
		t.Fatalf("errors: %q", snap.errs)
	}
	byClient := func(kind Kind, client int) Record {
		for _, r := range snap.recs {
			if r.Kind == kind && r.Client == client {
				return r
			}
		}
		t.Fatalf("no %v by client %d", kind, client)
		return Record{}
	}
	if r := byClient(Acquire, 3); r.Outcome != Unknown || r.Return != Infinity || r.Err != errCrashed {
		t.Errorf("in-flight acquire: %v", r)
	}
	if r := byClient(Write, 1); r.Outcome != Unknown {
		t.Errorf("in-flight write: %v", r)
	}
	if r := byClient(Acquire, 4); r.Outcome != OK {
		t.Errorf("other node's acquire: %v", r)
	}
	if r := byClient(Lost, 1); r.Call != 2*s || r.Return != 2*s || !r.Held || r.Err != "crash of n1" {
		t.Errorf("synthetic lost: %v", r)
	}
	for _, r := range snap.recs {
		if r.Kind == Lost && r.Client != 1 {
			t.Errorf("unexpected lost: %v", r)
		}
	}
	var ended, stillHeld bool
	for _, iv := range snap.intervals {
		switch iv.Client {
		case 1:
			ended = iv.End == 2*s && iv.Why == "crash"
		case 2:
			stillHeld = iv.End == Infinity
		case 3:
			t.Errorf("a grant after the crash opened a belief: %v", iv)
		}
	}
	if !ended || !stillHeld {
		t.Errorf("intervals: %v", snap.intervals)
	}
}

// TestConvertBeliefs: a conversion in flight leaves the client with only
// what both modes give it; the new mode starts at the return.
func TestConvertBeliefs(t *testing.T) {
	type step struct {
		from, to modes.Mode
		out      Outcome
		want     []modes.Mode // the modes of the intervals, in order
	}
	for _, tc := range []step{
		{modes.PR, modes.EX, OK, []modes.Mode{modes.PR, modes.EX}},             // up: PR until granted
		{modes.EX, modes.NL, OK, []modes.Mode{modes.EX, modes.NL}},             // down: NL from the call
		{modes.PR, modes.CW, OK, []modes.Mode{modes.PR, modes.CR, modes.CW}},   // middle: CR while pending
		{modes.PR, modes.CW, Fail, []modes.Mode{modes.PR, modes.CR, modes.PR}}, // back to PR on failure
		{modes.PR, modes.EX, Unknown, []modes.Mode{modes.PR}},                  // unknown: keep PR
		{modes.PW, modes.PW, OK, []modes.Mode{modes.PW}},                       // nothing changes
	} {
		t.Run(fmt.Sprintf("%v-%v-%v", tc.from, tc.to, tc.out), func(t *testing.T) {
			h, clk := newManual()
			h.Acquire(1, "n1", "r", tc.from).Granted(tc.from, 1)
			clk.at(s)
			op := h.Convert(1, "n1", "r", tc.to)
			clk.at(2 * s)
			switch tc.out {
			case OK:
				tok := uint64(1)
				if modes.IsUp(tc.from, tc.to) {
					tok = 2
				}
				op.Granted(tc.to, tok)
			case Fail:
				op.Failed(nil)
			case Unknown:
				op.Unknown()
			}
			clk.at(3 * s)
			h.Release(1, "n1", "r").Released()
			var got []modes.Mode
			var prevEnd time.Duration
			for i, iv := range h.snapshot().intervals {
				got = append(got, iv.Mode)
				if i > 0 && iv.Start != prevEnd {
					t.Errorf("gap before %v", iv)
				}
				prevEnd = iv.End
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("modes %v, want %v", got, tc.want)
			}
			if prevEnd != 3*s {
				t.Fatalf("the last interval ends at %v", prevEnd)
			}
		})
	}
}

func TestMeet(t *testing.T) {
	for _, tc := range []struct{ a, b, want modes.Mode }{
		{modes.PR, modes.CW, modes.CR},
		{modes.CW, modes.PR, modes.CR},
		{modes.PR, modes.EX, modes.PR},
		{modes.EX, modes.NL, modes.NL},
		{modes.PW, modes.PW, modes.PW},
		{modes.PW, modes.PR, modes.PR},
		{modes.CW, modes.PW, modes.CW},
	} {
		if got := meet(tc.a, tc.b); got != tc.want {
			t.Errorf("meet(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestHistoryLostEndsBelief(t *testing.T) {
	h, clk := newManual()
	h.Acquire(1, "n1", "r", modes.EX).Granted(modes.EX, 1)
	clk.at(s)
	h.Lost(1, "n1", "r")
	clk.at(2 * s)
	h.Lost(1, "n1", "r")                // again: not held any more
	h.Release(1, "n1", "r").Failed(nil) // unlock after the loss
	snap := h.snapshot()
	if len(snap.intervals) != 1 || snap.intervals[0].End != s || snap.intervals[0].Why != "lost" {
		t.Fatalf("intervals: %v", snap.intervals)
	}
	if !snap.recs[1].Held || snap.recs[2].Held || snap.recs[3].Held {
		t.Fatalf("held flags: %v", snap.recs)
	}
}

func TestHistorySpan(t *testing.T) {
	h, clk := newManual()
	end := h.Span("nemesis", "partition n3")
	clk.at(4 * s)
	end()
	end()
	open := h.Span("nemesis", "pause n2")
	_ = open
	recs := h.snapshot().recs
	if recs[0].Return != 4*s || recs[0].Outcome != OK {
		t.Fatalf("span: %v", recs[0])
	}
	if recs[1].Outcome != Pending {
		t.Fatalf("open span: %v", recs[1])
	}
}

// TestHistoryConcurrent records from many goroutines; run with -race.
func TestHistoryConcurrent(t *testing.T) {
	h := NewHistory(nil)
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			node := fmt.Sprintf("n%d", c%3)
			res := fmt.Sprintf("r%d", c)
			for i := range 50 {
				op := h.Acquire(c, node, res, modes.PR)
				op.Granted(modes.PR, uint64(i+1))
				h.Write(c, node, res, uint64(i+1), int64(i)).Accepted()
				h.Release(c, node, res).Released()
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			h.Crash("n9")
			h.Note("nemesis", "tick")
		}
	})
	wg.Wait()
	recs := h.Records()
	if len(recs) != 8*50*3+40 {
		t.Fatalf("%d records", len(recs))
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Call < recs[i-1].Call {
			t.Fatalf("calls out of order at %d", i)
		}
	}
	snap := h.snapshot()
	if len(snap.errs) != 0 || len(snap.intervals) != 8*50 {
		t.Fatalf("%d intervals, errors %q", len(snap.intervals), snap.errs)
	}
}

func TestFreezesListsEachNodesFreezes(t *testing.T) {
	now := time.Duration(0)
	h := NewHistory(func() time.Time { now += time.Second; return time.Unix(0, int64(now)) })
	h.Freeze("w1")
	h.Crash("w2")
	h.Freeze("w1")
	h.Freeze("w2")
	f := h.Freezes()
	if len(f) != 2 || len(f["w1"]) != 2 || len(f["w2"]) != 1 || f["w1"][0] >= f["w1"][1] || f["w2"][0] <= f["w1"][1] {
		t.Fatalf("freezes %v: want two of w1, in order, and w2's one after them (its crash is no freeze)", f)
	}
}
