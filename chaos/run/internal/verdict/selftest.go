package verdict

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/seed-a6839e30/dlm/chaos/check"
)

// SelfTest proves the checker is awake on this very run: it plants an
// overlap in the run's recorded history (its journal) — a second client
// granted EX on a resource inside an EX holder's hold — and requires both
// the direct overlap check and the lock model to flag it. It returns what
// it planted. It reads at most the journal's first SelfTestEntries
// entries: the first EX hold is early in any run, and a long run's whole
// journal would cost the memory of a second copy of its history.
func SelfTest(journal io.Reader, opts check.Options) (string, error) {
	var entries []check.JournalEntry
	sc := bufio.NewScanner(journal)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for len(entries) < SelfTestEntries && sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var e check.JournalEntry
		if err := json.Unmarshal(line, &e); err != nil {
			return "", fmt.Errorf("self-test: journal: %w", err)
		}
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("self-test: journal: %w", err)
	}
	planted, desc, err := PlantOverlap(entries)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	for _, e := range planted {
		b, _ := json.Marshal(e)
		buf.Write(append(b, '\n'))
	}
	h, err := check.ReadJournal(&buf)
	if err != nil {
		return "", fmt.Errorf("self-test: %w", err)
	}
	opts.Checks = check.CheckOverlap | check.CheckModesModel
	res := check.Check(h, opts)
	var got check.Checks
	for _, v := range res.Violations {
		got |= v.Check
	}
	if got&check.CheckOverlap == 0 || got&check.CheckModesModel == 0 {
		return desc, fmt.Errorf("self-test: planted %s, and the checker found only %v:\n%s", desc, got, res)
	}
	return desc, nil
}

// SelfTestEntries bounds the journal entries SelfTest reads.
const SelfTestEntries = 200_000

// PlantOverlap returns entries with a planted overlap: right after the
// first EX grant that a release follows, a new client is granted the same
// resource in EX, and releases it just before the holder does.
func PlantOverlap(entries []check.JournalEntry) ([]check.JournalEntry, string, error) {
	calls := make(map[int]check.JournalEntry)
	maxID := 0
	for _, e := range entries {
		maxID = max(maxID, e.ID)
		switch e.Op {
		case "acquire", "convert", "release", "write", "read", "span":
			calls[e.ID] = e
		}
	}
	for gi, g := range entries {
		if g.Op != "granted" || g.Mode != "EX" {
			continue
		}
		acq, ok := calls[g.ID]
		if !ok || acq.Op != "acquire" {
			continue
		}
		// The holder's release call, with some time after the grant.
		for ri := gi + 1; ri < len(entries); ri++ {
			r := entries[ri]
			if r.Op == "crash" && r.Node == acq.Node {
				break
			}
			if (r.Op == "release" || r.Op == "lost") && r.Client == acq.Client && r.Res == acq.Res {
				if r.Op == "lost" || r.T <= g.T {
					break
				}
				intruder, id := maxClient(entries)+1, maxID+1
				out := make([]check.JournalEntry, 0, len(entries)+4)
				out = append(out, entries[:gi+1]...)
				out = append(out,
					check.JournalEntry{T: g.T, Op: "acquire", ID: id, Client: intruder, Node: "planted", Res: acq.Res, Mode: "EX"},
					check.JournalEntry{T: g.T, Op: "granted", ID: id, Mode: "EX", Token: g.Token + 1})
				out = append(out, entries[gi+1:ri]...)
				out = append(out,
					check.JournalEntry{T: r.T, Op: "release", ID: id + 1, Client: intruder, Node: "planted", Res: acq.Res},
					check.JournalEntry{T: r.T, Op: "released", ID: id + 1})
				out = append(out, entries[ri:]...)
				desc := fmt.Sprintf("client %d granted EX on %q during client %d's EX hold (token %d)",
					intruder, acq.Res, acq.Client, g.Token)
				return out, desc, nil
			}
		}
	}
	return nil, "", errors.New("self-test: the history has no EX hold to plant an overlap in")
}

func maxClient(entries []check.JournalEntry) int {
	m := 0
	for _, e := range entries {
		m = max(m, e.Client)
	}
	return m
}

// Summary is a line for the console.
func (v Verdict) Summary() string {
	var b strings.Builder
	verdict := "OK"
	if !v.OK {
		verdict = "FAILED"
	}
	fmt.Fprintf(&b, "verdict %s: %d violations, %d inconclusive; %d faults; %d grants, %d writes checked; availability %.2f%% of %d slots (settled %.2f%% of %d)",
		verdict, len(v.Violations), len(v.Inconclusive), v.Faults, v.Stats.Grants, v.Stats.Writes,
		100*v.Availability.Share, v.Availability.Slots, 100*v.SettledAvailability.Share, v.SettledAvailability.Slots)
	return b.String()
}
