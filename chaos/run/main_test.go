package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/nemesis"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/netlab"
)

func TestBadFlagsExit2WithOneLine(t *testing.T) {
	for _, args := range [][]string{{"-nodes", "2"}, {"-nemesis", "kill-everyone"}, {"-network", "maybe"},
		{"-embedded", "5"}, {"stray"}, {"-no-such-flag"}} {
		var out, errb bytes.Buffer
		if code := runMain(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errb.String())
		}
		if !strings.Contains(errb.String(), "chaos:") && !strings.Contains(errb.String(), "flag provided but not defined") {
			t.Errorf("%v: %q", args, errb.String())
		}
	}
}

// TestRapidPaceStrikesAThousandAnHour: the rapid schedule's holds and
// quiets of 65 minutes add up to well over 1,000 faults of every nemesis,
// leaving room for what each strike costs on top (about 0.8 s here: the
// restart of what is down, the search for a holder).
func TestRapidPaceStrikesAThousandAnHour(t *testing.T) {
	steps := nemesis.Schedule(2027, nemesis.All(), 65*time.Minute, 1, paceTiming("rapid", 1500*time.Millisecond))
	if len(steps) < 1300 {
		t.Fatalf("%d steps in 65 minutes", len(steps))
	}
	fast := nemesis.Schedule(2027, nemesis.All(), 65*time.Minute, 1, paceTiming("fast", 1500*time.Millisecond))
	if len(fast) >= len(steps) {
		t.Fatalf("rapid (%d steps) no faster than fast (%d)", len(steps), len(fast))
	}
}

func TestMajorityAndWindows(t *testing.T) {
	up := []bool{true, true, true, true, true}
	if !majority(up, nil, 1) || majority(up, cutPairs(5, netlab.Ring([]int{0, 1, 2, 3, 4})), 0) {
		t.Fatal("majority")
	}
	down := []bool{false, false, false, true, true}
	// 5 agents + 1 embedded = 6 members: 4 needed, the embedded one and
	// two agents are 3.
	if majority(down, nil, 1) {
		t.Fatal("a majority with three of five agents down")
	}
	h := check.NewHistory(nil)
	r := newRecorder(h, []string{"n1", "n2", "n3"}, 3, 0)
	r.changes = []time.Duration{10 * time.Second}
	r.states = []memberState{{At: 20 * time.Second, Up: []bool{true, false, false}}}
	maj, settled := r.Windows(30*time.Second, 6*time.Second)
	if len(maj) != 1 || len(settled) != 2 || settled[0] != (check.Window{From: 0, To: 10 * time.Second}) ||
		settled[1] != (check.Window{From: 16 * time.Second, To: 20 * time.Second}) {
		t.Fatalf("windows %v settled %v", maj, settled)
	}
	// Back up at 25 s: a second window from there.
	r.states = append(r.states, memberState{At: 25 * time.Second, Up: []bool{true, true, false}})
	if maj, _ = r.Windows(30*time.Second, 6*time.Second); len(maj) != 2 || maj[1] != (check.Window{From: 25 * time.Second, To: 30 * time.Second}) {
		t.Fatalf("windows %v", maj)
	}
}

func TestWithoutNamespacesTheNetworkNemesesAreSkippedWithALine(t *testing.T) {
	var out, errb bytes.Buffer
	code := runMain([]string{"-network", "off", "-nemesis", "partition-ring,loss"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "chaos: skipping the network nemeses (partition-ring, loss): -network off\n") ||
		!strings.Contains(errb.String(), "no nemesis left") {
		t.Fatalf("exit %d: %q", code, errb.String())
	}
}

func TestNotStruckListsKindsOnlySkipped(t *testing.T) {
	kinds := []nemesis.Kind{nemesis.KillHolder, nemesis.PartRing, nemesis.Delay}
	events := []nemesis.Event{{Kind: nemesis.KillHolder}, {Kind: nemesis.PartRing, Err: "skipped: not every process is up"},
		{Kind: nemesis.Delay, Err: "nft: some error"}}
	if got := notStruck(kinds, events); len(got) != 1 || got[0] != nemesis.PartRing {
		t.Fatalf("notStruck = %v, want [partition-ring]", got)
	}
}
