package check

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// goodHistory is a safe run touching every kind of record: handoffs,
// conversions, a crash with a lock held and a call in flight, a lost lock
// followed by a rejected zombie write, unknown outcomes, reads.
func goodHistory() *History {
	h, clk := newManual()
	h.Note("nemesis", "start")
	h.Acquire(1, "n1", "r", modes.EX).Granted(modes.EX, 1)
	h.Write(1, "n1", "r", 1, 10).Accepted()
	clk.at(1 * s)
	h.Convert(1, "n1", "r", modes.PR).Granted(modes.PR, 1)
	h.Acquire(2, "n2", "r", modes.PR).Granted(modes.PR, 2)
	h.Acquire(3, "n3", "r", modes.CR).Granted(modes.CR, 3)
	clk.at(2 * s)
	h.Release(1, "n1", "r").Released()
	rel := h.Release(2, "n2", "r")
	pw := h.Acquire(4, "n3", "r", modes.PW)
	clk.at(3 * s)
	rel.Released()
	pw.Granted(modes.PW, 4) // PW is compatible with client 3's CR
	h.Write(4, "n3", "r", 4, 11).Accepted()
	h.Read(3, "n3", "r").Returned(11)

	// q: a holder on n1 crashes with an acquire in flight there.
	h.Acquire(5, "n1", "q", modes.EX).Granted(modes.EX, 5)
	inflight := h.Acquire(6, "n1", "q", modes.EX)
	end := h.Span("nemesis", "partition n1")
	clk.at(4 * s)
	h.Crash("n1")
	end()
	inflight.Granted(modes.EX, 99) // ignored: n1 is dead
	h.Acquire(7, "n2", "q", modes.EX).Granted(modes.EX, 6)
	h.Write(7, "n2", "q", 6, 1).Accepted()
	clk.at(5 * s)
	h.Lost(7, "n2", "q")
	h.Acquire(8, "n3", "q", modes.EX).Granted(modes.EX, 7)
	h.Write(8, "n3", "q", 7, 2).Accepted()
	h.Write(7, "n2", "q", 6, 3).Rejected() // the zombie is fenced off
	h.Release(7, "n2", "q").Failed(nil)
	h.Acquire(9, "n2", "q", modes.EX).Unknown() // timed out
	h.Read(9, "n2", "q").Returned(2)
	return h
}

func TestCheckGoodHistory(t *testing.T) {
	res := Check(goodHistory(), Options{Checks: AllChecks, VisualizationDir: t.TempDir()})
	if !res.OK || len(res.Violations) != 0 || len(res.Inconclusive) != 0 || len(res.Files) != 0 {
		t.Fatal(res)
	}
	st := res.Stats
	if st.Resources != 2 || st.Keys != 2 || st.Crashes != 1 || st.Unknown != 2 || st.Grants != 7 {
		t.Fatalf("stats: %+v", st)
	}
	if !strings.HasPrefix(res.String(), "check OK: 0 violations") {
		t.Fatal(res.String())
	}
}

// badHistory breaks every property once: client 2's EX overlaps client
// 1's PR on r, with a token that goes back, and the store accepts 33 after
// 34.
func badHistory() *History {
	h, clk := newManual()
	h.Acquire(1, "n1", "r", modes.PR).Granted(modes.PR, 7)
	clk.at(s)
	h.Acquire(2, "n2", "r", modes.EX).Granted(modes.EX, 5)
	h.Write(1, "n1", "k", 34, 1).Accepted()
	clk.at(2 * s)
	h.Write(2, "n2", "k", 33, 2).Accepted()
	h.Release(1, "n1", "r").Released()
	h.Release(2, "n2", "r").Released()
	return h
}

func TestCheckReportsEveryCheck(t *testing.T) {
	dir := t.TempDir()
	res := Check(badHistory(), Options{VisualizationDir: dir, Name: "bad/run"})
	if res.OK {
		t.Fatal("a bad history passed")
	}
	found := make(map[Checks]Violation)
	for _, v := range res.Violations {
		found[v.Check] = v
	}
	for _, c := range []Checks{CheckOverlap, CheckTokens, CheckStore, CheckModesModel, CheckRegisterModel} {
		if _, ok := found[c]; !ok {
			t.Errorf("no %v violation in\n%v", c, res)
		}
	}
	if _, ok := found[CheckMutexModel]; ok {
		t.Error("the mutex model is not a default check")
	}
	modesV := found[CheckModesModel]
	if !strings.Contains(modesV.Message, "not linearizable under the modes model") ||
		!strings.Contains(modesV.Message, `acquire #1 (client 2 on n2, "r", EX) at 1s: granted EX token 5`) {
		t.Errorf("model message:\n%s", modesV.Message)
	}
	for _, v := range []Violation{modesV, found[CheckRegisterModel]} {
		if v.Visualization == "" {
			t.Fatalf("no visualization for %v", v.Check)
		}
		b, err := os.ReadFile(v.Visualization)
		if err != nil || !strings.Contains(string(b), "<html") {
			t.Fatalf("visualization %s: %v", v.Visualization, err)
		}
		if filepath.Dir(v.Visualization) != dir || strings.ContainsAny(filepath.Base(v.Visualization), "/ ") {
			t.Fatalf("visualization path %q", v.Visualization)
		}
	}
	dump := filepath.Join(dir, "bad_run-history.txt")
	if b, err := os.ReadFile(dump); err != nil || !strings.Contains(string(b), "belief intervals:") {
		t.Fatalf("history dump: %v", err)
	}
	report := res.String()
	for _, want := range []string{"check FAILED: 5 violations", "[overlap]", "[tokens]", "[store]", "visualization: ", "history: " + dump} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

func TestCheckSelectedChecks(t *testing.T) {
	res := Check(badHistory(), Options{Checks: CheckOverlap})
	if len(res.Violations) != 1 || res.Violations[0].Check != CheckOverlap {
		t.Fatal(res)
	}
}

func TestCheckMutexModel(t *testing.T) {
	h, clk := newManual()
	h.Acquire(1, "n1", "ex", modes.EX).Granted(modes.EX, 1)
	clk.at(s)
	h.Acquire(2, "n2", "ex", modes.EX).Granted(modes.EX, 2) // split brain
	h.Acquire(1, "n1", "pr", modes.PR).Granted(modes.PR, 1)
	res := Check(h, Options{Checks: CheckMutexModel})
	if len(res.Violations) != 1 || res.Violations[0].Resource != "ex" || res.Violations[0].Check != CheckMutexModel {
		t.Fatal(res)
	}
	if len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0], `"pr"`) {
		t.Fatalf("skipped: %q", res.Skipped)
	}
}

func TestCheckHistoryMisuseFails(t *testing.T) {
	h, _ := newManual()
	op := h.Acquire(1, "n1", "r", modes.EX)
	op.Granted(modes.EX, 1)
	op.Granted(modes.EX, 1)
	res := Check(h, Options{})
	if res.OK || len(res.Violations) != 1 || res.Violations[0].Check != CheckHistory {
		t.Fatal(res)
	}
}

func TestCheckInconclusive(t *testing.T) {
	h := goodHistory()
	res := Check(h, Options{MaxSteps: 1})
	if res.OK || len(res.Violations) != 0 || len(res.Inconclusive) == 0 {
		t.Fatalf("a check out of steps must fail the result: %v", res)
	}
	if r := res.Inconclusive[0].Reason; !strings.Contains(r, "more than 1 steps") {
		t.Fatalf("reason: %q", r)
	}
	if !strings.HasPrefix(res.String(), "check FAILED: 0 violations, ") {
		t.Errorf("report: %q", res.String())
	}
	res = Check(h, Options{MaxSteps: 1, AllowInconclusive: true})
	if !res.OK || len(res.Inconclusive) == 0 {
		t.Fatalf("AllowInconclusive ignored: %v", res)
	}
	res = Check(h, Options{Timeout: time.Nanosecond})
	if res.OK || len(res.Inconclusive) == 0 || !strings.Contains(res.Inconclusive[0].Reason, "budget") {
		t.Fatal(res)
	}
}

func TestCheckTooManyClients(t *testing.T) {
	h, _ := newManual()
	for c := range MaxClients + 1 {
		h.Acquire(c, "n1", "r", modes.CR).Granted(modes.CR, uint64(c+1))
	}
	res := Check(h, Options{})
	if res.OK || len(res.Inconclusive) != 1 || !strings.Contains(res.Inconclusive[0].Reason, "33 clients") {
		t.Fatal(res)
	}
}

// TestModelsCountClientsAtOnce: the long run of 2026-12-01 was
// inconclusive on reg/0 and reg/1 (97 and 85 clients over 65 minutes, each
// witness of a holder nemesis a new one), though never more than a dozen
// used a register at once. A client done with a resource (everything it
// did returned, ending in a release) leaves its model index free for
// clients that come after; an overlap among them is still caught, and
// clients that are not done still count.
func TestModelsCountClientsAtOnce(t *testing.T) {
	sequential := func(overlapAt int) *History {
		h, clk := newManual()
		for c := range 3 * MaxClients {
			clk.at(time.Duration(2*c) * s)
			h.Acquire(c, "n1", "r", modes.EX).Granted(modes.EX, uint64(c+1))
			if c == overlapAt {
				// The next client is granted while this one holds.
				continue
			}
			clk.at(time.Duration(2*c+1) * s)
			h.Release(c, "n1", "r").Released()
		}
		return h
	}
	res := Check(sequential(-1), Options{})
	if !res.OK {
		t.Fatalf("96 clients one after another on one resource:\n%s", res)
	}
	res = Check(sequential(70), Options{Checks: CheckModesModel | CheckMutexModel})
	if res.OK || failedChecks(res) != CheckModesModel|CheckMutexModel || len(res.Inconclusive) != 0 {
		t.Fatalf("an overlap of client 70 and 71 went uncaught:\n%s", res)
	}
	if !strings.Contains(res.Violations[0].Message, "client 71") {
		t.Fatalf("the report names the wrong client:\n%s", res)
	}

	// Done clients whose times meet share nothing: equal times are
	// concurrent: 33 clients that all hold CR from 0 s to 1 s are too
	// many.
	h, clk := newManual()
	for c := range MaxClients + 1 {
		h.Acquire(c, "n1", "r", modes.CR).Granted(modes.CR, uint64(c+1))
	}
	clk.at(s)
	for c := range MaxClients + 1 {
		h.Release(c, "n1", "r").Released()
	}
	res = Check(h, Options{})
	if res.OK || len(res.Inconclusive) != 1 || !strings.Contains(res.Inconclusive[0].Reason, "33 clients at once") {
		t.Fatal(res)
	}
}

func TestCheckMaxReports(t *testing.T) {
	h, _ := newManual()
	for c := range 5 {
		h.Acquire(c, "n1", "r", modes.EX).Granted(modes.EX, uint64(c+1))
	}
	res := Check(h, Options{Checks: CheckOverlap, MaxReports: 3})
	if len(res.Violations) != 3 || res.Omitted != 7 || !strings.Contains(res.String(), "7 more violations") {
		t.Fatal(res)
	}
}

func TestCheckNilHistory(t *testing.T) {
	if res := Check(nil, Options{}); !res.OK {
		t.Fatal(res)
	}
}

// fakeTB records what Require does to a test.
type fakeTB struct {
	testing.TB
	fatal, logs []string
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Name() string      { return "TestFake/sub" }
func (f *fakeTB) Fatal(args ...any) { f.fatal = append(f.fatal, fmt.Sprint(args...)) }
func (f *fakeTB) Log(args ...any)   { f.logs = append(f.logs, fmt.Sprint(args...)) }

func TestRequire(t *testing.T) {
	var ok fakeTB
	Require(&ok, goodHistory(), Options{})
	if len(ok.fatal) != 0 || len(ok.logs) != 0 {
		t.Fatalf("good history: %v %v", ok.fatal, ok.logs)
	}

	var bad fakeTB
	res := Require(&bad, badHistory(), Options{})
	if len(bad.fatal) != 1 || !strings.Contains(bad.fatal[0], "check FAILED") {
		t.Fatalf("bad history: %v", bad.fatal)
	}
	if len(res.Files) == 0 {
		t.Fatal("Require wrote no files")
	}
	dir := filepath.Dir(res.Files[0])
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, f := range res.Files {
		if filepath.Dir(f) != dir || !strings.HasPrefix(filepath.Base(f), "TestFake_sub-") {
			t.Errorf("file %q", f)
		}
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}

	var unsure fakeTB
	Require(&unsure, goodHistory(), Options{MaxSteps: 1, VisualizationDir: t.TempDir()})
	if len(unsure.fatal) != 1 || !strings.Contains(unsure.fatal[0], "inconclusive") {
		t.Fatalf("inconclusive: %v %v", unsure.fatal, unsure.logs)
	}
	var allowed fakeTB
	Require(&allowed, goodHistory(), Options{MaxSteps: 1, VisualizationDir: t.TempDir(), AllowInconclusive: true})
	if len(allowed.fatal) != 0 || len(allowed.logs) != 1 || !strings.Contains(allowed.logs[0], "inconclusive") {
		t.Fatalf("inconclusive, allowed: %v %v", allowed.fatal, allowed.logs)
	}
}

// TestCheckInSynctest records a run inside a synctest bubble, where
// time.Now is fake and handoffs happen at equal timestamps, and checks it
// there: porcupine's goroutines and timeout timer live in the bubble too.
func TestCheckInSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHistory(nil)
		mu := make(chan uint64, 1) // a correct lock: the token travels with it
		mu <- 1
		store := struct {
			sync.Mutex
			max uint64
		}{}
		var wg sync.WaitGroup
		for c := range 4 {
			wg.Go(func() {
				node := fmt.Sprintf("n%d", c%2)
				for range 5 {
					op := h.Acquire(c, node, "r", modes.EX)
					tok := <-mu
					op.Granted(modes.EX, tok)
					time.Sleep(time.Duration(c+1) * time.Millisecond)
					w := h.Write(c, node, "k", tok, int64(c))
					store.Lock()
					if tok >= store.max {
						store.max = tok
						w.Accepted()
					} else {
						w.Rejected()
					}
					store.Unlock()
					h.Release(c, node, "r").Released()
					mu <- tok + 1
				}
			})
		}
		wg.Wait()
		Require(t, h, Options{Checks: AllChecks, VisualizationDir: t.TempDir()})

		// An extra EX grant in the middle of the run must be caught, in
		// the bubble as well.
		h.Acquire(99, "n9", "r", modes.EX).Granted(modes.EX, 1000)
		h.Acquire(98, "n9", "r", modes.EX).Granted(modes.EX, 1001)
		res := Check(h, Options{})
		if res.OK {
			t.Fatal("a split brain passed")
		}
	})
}

// TestCheckWhileRecording runs checks while clients record; run with
// -race.
func TestCheckWhileRecording(t *testing.T) {
	h := NewHistory(nil)
	var wg sync.WaitGroup
	for c := range 3 {
		wg.Go(func() {
			res := fmt.Sprintf("r%d", c)
			for i := 1; i <= 200; i++ {
				h.Acquire(c, "n1", res, modes.EX).Granted(modes.EX, uint64(i))
				h.Write(c, "n1", res, uint64(i), int64(i)).Accepted()
				h.Release(c, "n1", res).Released()
			}
		})
	}
	for range 3 {
		if res := Check(h, Options{}); !res.OK {
			t.Error(res)
		}
	}
	wg.Wait()
	if res := Check(h, Options{}); !res.OK || res.Stats.Records != 3*200*3 {
		t.Error(res)
	}
}

// TestCheckConversionFailedByLoss: a down-conversion took effect, a reader
// came in, then the lock was lost and the conversion reported failure. The
// failure cannot be trusted to mean "no effect"; had the lock not been
// lost, it would (and the reader would be a violation).
func TestCheckConversionFailedByLoss(t *testing.T) {
	for _, lost := range []bool{true, false} {
		h, clk := newManual()
		h.Acquire(1, "n1", "r", modes.CW).Granted(modes.CW, 1)
		cv := h.Convert(1, "n1", "r", modes.NL)
		h.Acquire(2, "n2", "r", modes.PR).Granted(modes.PR, 2)
		clk.at(s)
		if lost {
			h.Lost(1, "n1", "r")
		}
		cv.Failed(nil)
		res := Check(h, Options{})
		if res.OK != lost {
			t.Errorf("lost=%v: %v", lost, res)
		}
		if !lost && failedChecks(res) != CheckOverlap|CheckModesModel {
			t.Errorf("lost=%v: %v", lost, res)
		}
	}
}

// TestCheckConversionGrantedAfterLoss: the 65-minute run of 2026-12-01 at
// 29m55s. A worker's client held mix/2 in EX and converted it down to CR;
// the process stalled for a second, its quorum lease ran out, and on waking
// the client found both the conversion's grant and the lock's Lost waiting.
// It took the Lost first, then the grant, and unlocked. The grant came
// before the loss; the client believed in neither mode after it. Had
// another client been granted EX before the Lost, the two would overlap
// whatever the conversion did, and that is still caught.
func TestCheckConversionGrantedAfterLoss(t *testing.T) {
	for _, rival := range []bool{false, true} {
		h, clk := newManual()
		h.Acquire(1, "w2", "r", modes.EX).Granted(modes.EX, 5)
		clk.at(s)
		cv := h.Convert(1, "w2", "r", modes.CR)
		if rival {
			clk.at(1500 * ms)
			h.Acquire(4, "w1", "r", modes.EX).Granted(modes.EX, 6)
			clk.at(1600 * ms)
			h.Release(4, "w1", "r").Released()
		}
		clk.at(2 * s)
		h.Lost(1, "w2", "r")
		cv.Granted(modes.CR, 5)
		clk.at(2*s + 10*ms)
		h.Acquire(2, "w2", "r", modes.EX) // in flight across the unlock
		h.Release(1, "w2", "r").Released()
		clk.at(2*s + 20*ms)
		h.Acquire(3, "w1", "r", modes.CW).Granted(modes.CW, 7)
		h.Release(3, "w1", "r").Released()
		clk.at(2*s + 30*ms)
		if !rival {
			h.Acquire(2, "w2", "r", modes.EX).Granted(modes.EX, 8)
		}
		res := Check(h, Options{Checks: AllChecks})
		want := Checks(0)
		if rival {
			want = CheckOverlap | CheckModesModel
		}
		if got := failedChecks(res); got != want {
			t.Errorf("rival=%v: failed %v, want %v:\n%v", rival, got, want, res)
		}
		for _, v := range res.Violations {
			if v.Check == CheckOverlap && !strings.Contains(v.Message, "clients 1 and 4") {
				t.Errorf("rival=%v: an overlap other than the rival's:\n%s", rival, v.Message)
			}
		}
	}
}

func TestCheckFileNamesDoNotCollide(t *testing.T) {
	h, _ := newManual()
	for _, res := range []string{"a/b", "a b"} {
		h.Acquire(1, "n1", res, modes.EX).Granted(modes.EX, 1)
		h.Acquire(2, "n2", res, modes.EX).Granted(modes.EX, 2)
	}
	res := Check(h, Options{Checks: CheckModesModel, VisualizationDir: t.TempDir(), Name: "x"})
	if len(res.Violations) != 2 || res.Violations[0].Visualization == res.Violations[1].Visualization {
		t.Fatal(res)
	}
	for _, v := range res.Violations {
		if _, err := os.Stat(v.Visualization); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheckVerifiedBehaviours replays verification.md's verified behaviours
// end to end, through the History and Check.
func TestCheckVerifiedBehaviours(t *testing.T) {
	for _, tc := range []struct {
		name   string
		record func(h *History, clk *manualClock)
		want   Checks // the checks that must fail; 0 for none
	}{
		{"normal handoff", func(h *History, clk *manualClock) {
			h.Acquire(1, "n1", "r", modes.EX).Granted(modes.EX, 1)
			clk.at(s)
			h.Release(1, "n1", "r").Released()
			h.Acquire(2, "n2", "r", modes.EX).Granted(modes.EX, 2)
		}, 0},
		{"second grant before release", func(h *History, clk *manualClock) {
			h.Acquire(1, "n1", "r", modes.EX).Granted(modes.EX, 1)
			clk.at(s)
			h.Acquire(2, "n2", "r", modes.EX).Granted(modes.EX, 2)
			clk.at(2 * s)
			h.Release(1, "n1", "r").Released()
		}, CheckOverlap | CheckModesModel | CheckMutexModel},
		{"later grant after an unknown acquire", func(h *History, clk *manualClock) {
			h.Acquire(1, "n1", "r", modes.EX).Unknown()
			clk.at(s)
			h.Acquire(2, "n2", "r", modes.EX).Granted(modes.EX, 2)
		}, 0},
		{"PR+PR+CR then PW after both PR released", func(h *History, clk *manualClock) {
			h.Acquire(1, "n1", "r", modes.PR).Granted(modes.PR, 1)
			h.Acquire(2, "n2", "r", modes.PR).Granted(modes.PR, 2)
			h.Acquire(3, "n3", "r", modes.CR).Granted(modes.CR, 3)
			clk.at(s)
			h.Release(1, "n1", "r").Released()
			h.Release(2, "n2", "r").Released()
			clk.at(2 * s)
			h.Acquire(4, "n1", "r", modes.PW).Granted(modes.PW, 4)
		}, 0},
		{"PR overlapping EX", func(h *History, clk *manualClock) {
			h.Acquire(1, "n1", "r", modes.PR).Granted(modes.PR, 1)
			clk.at(s)
			h.Acquire(2, "n2", "r", modes.EX).Granted(modes.EX, 2)
		}, CheckOverlap | CheckModesModel},
		{"store accepting 33 after 34", func(h *History, clk *manualClock) {
			h.Write(1, "n1", "k", 34, 1).Accepted()
			clk.at(s)
			h.Write(2, "n2", "k", 33, 2).Accepted()
		}, CheckStore | CheckRegisterModel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, clk := newManual()
			tc.record(h, clk)
			res := Check(h, Options{Checks: AllChecks})
			if got := failedChecks(res); got != tc.want {
				t.Fatalf("failed %v, want %v:\n%v", got, tc.want, res)
			}
		})
	}
}
