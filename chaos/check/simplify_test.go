package check

import (
	"testing"

	"github.com/seed-a6839e30/dlm/modes"
)

func TestLockHistorySimplifies(t *testing.T) {
	h, clk := newManual()
	h.Acquire(1, "n1", "r", modes.EX).Failed(nil)           // #0: no effect anywhere
	h.Acquire(2, "n2", "r", modes.EX).Unknown()             // #1: nobody relies on it
	h.Release(2, "n2", "r").Released()                      // #2: clean-up, not held
	h.Acquire(3, "n3", "r", modes.NL).Unknown()             // #3: the convert below relies on it
	h.Convert(3, "n3", "r", modes.CR).Granted(modes.CR, 9)  // #4
	h.Acquire(4, "n4", "r", modes.PR).Granted(modes.PR, 10) // #5
	clk.at(s)
	h.Release(4, "n4", "r").Unknown() // #6: becomes a release at its call
	h.Acquire(5, "n5", "r", modes.PR) // #7: pending at the check, nobody relies on it

	got := lockHistory(h.snapshot().recs)
	type want struct {
		kind Kind
		out  Outcome
		skip bool
	}
	wants := []want{
		{Acquire, Fail, true},
		{Acquire, Unknown, true},
		{Lost, OK, false},
		{Acquire, Unknown, false},
		{Convert, OK, false},
		{Acquire, OK, false},
		{Lost, OK, false},
		{Acquire, Unknown, true},
	}
	if len(got) != len(wants) {
		t.Fatalf("%d records: %+v", len(got), got)
	}
	for i, w := range wants {
		g := got[i]
		if g.kind != w.kind || g.out != w.out || g.skip != w.skip {
			t.Errorf("#%d: got %v %v skip=%v, want %v %v skip=%v", i, g.kind, g.out, g.skip, w.kind, w.out, w.skip)
		}
	}
	if got[6].ret != s {
		t.Errorf("the unknown release should take effect at its call: %v", got[6].ret)
	}
}

// TestCheckUnknownAcquireReliedOn: an acquire of unknown outcome that a
// later conversion shows was granted still counts, so it cannot hide a
// conflict.
func TestCheckUnknownAcquireReliedOn(t *testing.T) {
	h, clk := newManual()
	h.Acquire(1, "n1", "r", modes.EX).Granted(modes.EX, 1)
	h.Acquire(2, "n2", "r", modes.NL).Unknown()
	clk.at(s)
	h.Convert(2, "n2", "r", modes.CR).Granted(modes.CR, 2) // so it was granted, and CR meets EX
	res := Check(h, Options{Checks: CheckModesModel})
	if res.OK {
		t.Fatal("the conflict was hidden")
	}
}
