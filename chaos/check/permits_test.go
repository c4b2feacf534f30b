package check

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// goodPermits is a safe history of a semaphore of 3 permits: holders come
// and go, a crash frees its node's permits (its synthetic release), an
// acquire of unknown outcome that may have taken effect, a lost holder's
// late release.
func goodPermits() *History {
	h, clk := newManual()
	recordGoodPermits(h, clk)
	return h
}

func recordGoodPermits(h *History, clk *manualClock) {
	h.AcquirePermits(1, "n1", "s", 2, 3).GrantedPermits(1)
	h.AcquirePermits(2, "n2", "s", 1, 3).GrantedPermits(2)
	big := h.AcquirePermits(3, "n3", "s", 3, 3) // waits for both
	clk.at(1 * s)
	h.Release(1, "n1", "s").Released()
	clk.at(2 * s)
	h.Crash("n2")
	clk.at(3 * s)
	big.GrantedPermits(3)
	clk.at(4 * s)
	h.Lost(3, "n3", "s")
	h.AcquirePermits(4, "n1", "s", 3, 3).GrantedPermits(4)
	h.Release(3, "n3", "s").Failed(nil)
	h.Release(4, "n1", "s").Released()
	h.AcquirePermits(5, "n1", "s", 1, 3).Unknown()
	clk.at(5 * s)
	h.AcquirePermits(6, "n3", "s", 2, 3).GrantedPermits(6)
}

// TestPermitsJournal: a journal replays permits as it does locks.
func TestPermitsJournal(t *testing.T) {
	h, clk := newManual()
	var buf bytes.Buffer
	h.Journal(&buf)
	recordGoodPermits(h, clk)
	back, err := ReadJournal(&buf)
	if err != nil {
		t.Fatal(err)
	}
	a, b := h.snapshot(), back.snapshot()
	if !reflect.DeepEqual(a.recs, b.recs) || !reflect.DeepEqual(a.intervals, b.intervals) {
		t.Fatalf("replayed permits differ:\n%s\nreplayed:\n%s", dump(h), dump(back))
	}
}

func TestCheckGoodPermits(t *testing.T) {
	res := Check(goodPermits(), Options{Checks: AllChecks})
	if !res.OK || len(res.Inconclusive) != 0 {
		t.Fatal(res)
	}
	if res.Stats.Grants != 5 {
		t.Fatalf("stats: %+v", res.Stats)
	}
}

// TestCheckOversubscribedPermits: two clients believe they hold 2 of a
// semaphore's 3 permits at once; both the direct check and the model say
// so, and the overlapping grants are named.
func TestCheckOversubscribedPermits(t *testing.T) {
	h, clk := newManual()
	h.AcquirePermits(1, "n1", "s", 2, 3).GrantedPermits(1)
	clk.at(s)
	h.AcquirePermits(2, "n2", "s", 2, 3).GrantedPermits(2)
	clk.at(2 * s)
	h.Release(1, "n1", "s").Released()
	h.Release(2, "n2", "s").Released()
	res := Check(h, Options{Checks: AllChecks})
	if got := failedChecks(res); got != CheckPermits|CheckSemaphoreModel {
		t.Fatalf("failed checks %v, want permits and semaphore model:\n%v", got, res)
	}
	for _, v := range res.Violations {
		if v.Check == CheckPermits && (!strings.Contains(v.Message, "held 4 permits, it has 3") || len(v.Intervals) != 2) {
			t.Errorf("permits violation: %v", v)
		}
	}
}

// TestCheckPermitsAfterCrashTooEarly: a node's permits handed out again
// before its crash was recorded is a violation (what the lock-delay
// prevents); the same grant after the crash is fine.
func TestCheckPermitsAfterCrashTooEarly(t *testing.T) {
	for _, early := range []bool{true, false} {
		h, clk := newManual()
		h.AcquirePermits(1, "n1", "s", 1, 1).GrantedPermits(1)
		clk.at(s)
		if !early {
			h.Crash("n1")
		}
		h.AcquirePermits(2, "n2", "s", 1, 1).GrantedPermits(2)
		clk.at(2 * s)
		if early {
			h.Crash("n1")
		}
		res := Check(h, Options{})
		if res.OK == early {
			t.Errorf("grant before the crash (%v): %v", early, res)
		}
	}
}

// TestCheckPermitsUnknownMayExplain: an acquire of unknown outcome may or
// may not have taken effect, and the model takes whichever branch the rest
// of the history needs.
func TestCheckPermitsUnknownMayExplain(t *testing.T) {
	h, clk := newManual()
	h.AcquirePermits(1, "n1", "s", 2, 2).Unknown()
	clk.at(s)
	h.AcquirePermits(2, "n2", "s", 2, 2).GrantedPermits(5)
	res := Check(h, Options{Checks: AllChecks})
	if !res.OK {
		t.Fatal(res)
	}
	// Had it taken effect, the semaphore would have been full: the model
	// must take the branch where it did not, and still does when client
	// 1 asks again and is granted after client 2 released.
	clk.at(2 * s)
	h.Release(2, "n2", "s").Released()
	h.AcquirePermits(3, "n1", "s", 2, 2).GrantedPermits(6)
	if res := Check(h, Options{Checks: AllChecks}); !res.OK {
		t.Fatal(res)
	}
	// But two definite grants of the whole semaphore at once are not
	// explained by any branch.
	h.AcquirePermits(4, "n3", "s", 1, 2).GrantedPermits(7)
	if res := Check(h, Options{Checks: CheckSemaphoreModel}); res.OK {
		t.Fatalf("the model accepted 3 permits of 2 held at once: %v", res)
	}
}

func TestCheckPermitsTokens(t *testing.T) {
	h, clk := newManual()
	h.AcquirePermits(1, "n1", "s", 1, 2).GrantedPermits(9)
	h.Release(1, "n1", "s").Released()
	clk.at(s)
	h.AcquirePermits(2, "n2", "s", 1, 2).GrantedPermits(4)
	if got := failedChecks(Check(h, Options{})); got != CheckTokens {
		t.Fatalf("failed checks %v, want tokens", got)
	}
}

func TestCheckPermitsMisuse(t *testing.T) {
	h, _ := newManual()
	h.AcquirePermits(1, "n1", "s", 1, 2).GrantedPermits(1)
	h.AcquirePermits(2, "n1", "s", 1, 3).GrantedPermits(2)
	h.AcquirePermits(3, "n1", "t", 4, 3).Failed(nil)
	res := Check(h, Options{})
	if got := failedChecks(res); got&CheckHistory == 0 {
		t.Fatalf("two permit counts for one semaphore, and more permits than it has, not reported: %v", res)
	}
}
