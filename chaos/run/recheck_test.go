package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/nemesis"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/workload"
	"github.com/seed-a6839e30/dlm/modes"
)

// recordedDir writes an output directory as a run leaves it: the merged
// journal of a short history (register writers taking turns, a probe) and
// recording.json. With overlap, a second client is granted the register
// while the first holds it.
func recordedDir(t *testing.T, overlap bool) string {
	t.Helper()
	dir := t.TempDir()
	var mu sync.Mutex
	now := time.Unix(0, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	at := func(d time.Duration) { mu.Lock(); now = time.Unix(0, 0).Add(d); mu.Unlock() }
	var buf bytes.Buffer
	h := check.NewHistory(clock)
	h.StartAt(time.Unix(0, 0))
	h.Journal(&buf)
	ms := time.Millisecond
	for i := range 20 {
		base := time.Duration(i) * 100 * ms
		at(base + 10*ms) // the history starts 10 ms after the origin
		c := 1 + i%2
		h.Acquire(c, "w1", workload.RegisterPrefix+"0", modes.EX).Granted(modes.EX, uint64(10+i))
		if overlap && i == 5 {
			h.Acquire(9, "w2", workload.RegisterPrefix+"0", modes.EX).Granted(modes.EX, 99)
			at(base + 30*ms)
			h.Release(9, "w2", workload.RegisterPrefix+"0").Released()
		}
		at(base + 40*ms)
		h.Release(c, "w1", workload.RegisterPrefix+"0").Released()
		p := h.Acquire(3, "h1", workload.ProbePrefix+"h1", modes.EX)
		at(base + 45*ms)
		p.Granted(modes.EX, uint64(100+i))
		h.Release(3, "h1", workload.ProbePrefix+"h1").Released()
	}
	end := h.Elapsed()
	if err := os.WriteFile(filepath.Join(dir, "history.jsonl"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	rc := recording{Command: "test", Seed: 1, Nodes: 3, End: end, Kinds: []nemesis.Kind{nemesis.QuorumLoss},
		Events:  []nemesis.Event{{Kind: nemesis.QuorumLoss, Text: "quorum loss: kill n1,n2", Nodes: []string{"n1", "n2"}, At: 500 * ms, Healed: 700 * ms}},
		States:  []memberState{{At: 500 * ms, Up: []bool{false, false, true}}, {At: 700 * ms, Up: []bool{true, true, true}}},
		Changes: []time.Duration{500 * ms, 700 * ms}, Members: 3, Embedded: 1, Probe: probeSpec{Within: time.Second}}
	if err := writeRecording(dir, rc); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRecheckJudgesARecordedDirectory: -check DIR gives a verdict from the
// files alone, and the same checks catch what they would catch in a run.
func TestRecheckJudgesARecordedDirectory(t *testing.T) {
	dir := recordedDir(t, false)
	var out, errb bytes.Buffer
	if code := runMain([]string{"-check", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "verdict OK: 0 violations, 0 inconclusive; 1 faults") {
		t.Fatalf("output:\n%s", out.String())
	}
	var res struct {
		Verdict struct {
			OK           bool `json:"ok"`
			Availability struct {
				Slots int `json:"slots"`
			} `json:"availability_majority"`
		} `json:"verdict"`
		SelfTest string `json:"self_test"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	// Majority windows [0, 500 ms) and [700 ms, end): the probes' slots
	// in them, not those of the kill.
	if !res.Verdict.OK || res.Verdict.Availability.Slots != 17 || !strings.HasPrefix(res.SelfTest, "caught a planted overlap") {
		t.Fatalf("result.json: %+v", res)
	}

	bad := recordedDir(t, true)
	out.Reset()
	if code := runMain([]string{"-check", bad}, &out, &errb); code != 1 || !strings.Contains(out.String(), "verdict FAILED") ||
		!strings.Contains(out.String(), "[overlap]") {
		t.Fatalf("an overlap re-judged: exit %d:\n%s", code, out.String())
	}
}

func TestRecheckRefusesWhatIsNoRun(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := runMain([]string{"-check", dir}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "has no recording.json") {
		t.Fatalf("exit %d: %q", code, errb.String())
	}
	dir = recordedDir(t, false)
	if err := os.WriteFile(filepath.Join(dir, "history.jsonl"), []byte("{\"t\":1,\"op\":\"acquire\"\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := runMain([]string{"-check", dir}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "history.jsonl") {
		t.Fatalf("a bad journal: exit %d: %q", code, errb.String())
	}
}
