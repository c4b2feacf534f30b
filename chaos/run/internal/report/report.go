// Package report writes a chaos run's outcome: result.json (everything,
// for scripts), report.md (for a person) and timeline.svg (the faults, the
// grants per second and the recoveries on one time axis).
package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/nemesis"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/verdict"
)

// Run describes the run the report is about.
type Run struct {
	Command  string          `json:"command"`
	Seed     uint64          `json:"seed"`
	Nodes    int             `json:"nodes"`
	Clients  map[string]int  `json:"clients"`
	Network  bool            `json:"network"`
	Control  bool            `json:"control"`
	Started  time.Time       `json:"started"`
	Duration time.Duration   `json:"duration_ns"`
	Events   []nemesis.Event `json:"events"`
	Verdict  verdict.Verdict `json:"verdict"`
	SelfTest string          `json:"self_test"`
	Notes    []string        `json:"notes"`
	Majority []check.Window  `json:"majority_windows"`
	Settle   time.Duration   `json:"settle_ns"`
	Grants   []time.Duration `json:"-"` // grant return times, for the picture
}

// Write writes result.json, report.md and timeline.svg into dir.
func Write(dir string, r Run) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "result.json"), b, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "timeline.svg"), []byte(SVG(r)), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(Markdown(r)), 0o644)
}

func ms(d time.Duration) string {
	if d == check.Infinity {
		return "never"
	}
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

// Markdown is the report for a person.
func Markdown(r Run) string {
	v := r.Verdict
	var b strings.Builder
	verdictWord := "PASS"
	if !v.OK {
		verdictWord = "FAIL"
	}
	fmt.Fprintf(&b, "# Chaos run: %s\n\n", verdictWord)
	fmt.Fprintf(&b, "`%s`\n\n", r.Command)
	fmt.Fprintf(&b, "Seed %d, %d agents, started %s, ran %s; network nemeses %v; control (unsafe agents) %v.\n\n",
		r.Seed, r.Nodes, r.Started.UTC().Format(time.RFC3339), r.Duration.Round(time.Second), r.Network, r.Control)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	b.WriteString("\n![timeline](timeline.svg)\n\n## Safety\n\n")
	fmt.Fprintf(&b, "| | |\n|---|---|\n| violations | %d |\n| inconclusive | %d |\n| records | %d |\n| grants | %d |\n| fenced writes | %d |\n| unknown outcomes | %d |\n| crashes | %d |\n| counter | %d acknowledged, %d unknown, final %s; %d invalidated reads (flagged, %d increments lost with them); %d empty reads after every lock on it went (%d increments lost with the resource); %d reads across a freeze of their process, not written back, not judged |\n| election | %d terms, %d reads |\n| paused holders' late writes | %d: %d refused, %d accepted with no newer token, %d accepted over a newer one |\n| self-test | %s |\n\n",
		len(v.Violations), len(v.Inconclusive), v.Stats.Records, v.Stats.Grants, v.Stats.Writes, v.Stats.Unknown,
		v.Stats.Crashes, v.Counter.Acked, v.Counter.Unknown, finalText(v.Counter.Final), v.Counter.Invalidated,
		v.Counter.Flagged, v.Counter.Recreated, v.Counter.Lost, v.Counter.Paused, v.Election.Terms, v.Election.Observations, v.FrozenWrites.Total, v.FrozenWrites.Refused,
		v.FrozenWrites.AcceptedFresh, v.FrozenWrites.AcceptedStale, r.SelfTest)
	for _, x := range v.Violations {
		fmt.Fprintf(&b, "- violation: %s\n", strings.ReplaceAll(x, "\n", " "))
	}
	for _, x := range v.Inconclusive {
		fmt.Fprintf(&b, "- inconclusive: %s\n", strings.ReplaceAll(x, "\n", " "))
	}
	b.WriteString("\n## Availability\n\n")
	fmt.Fprintf(&b, "Probes in every worker process and in the harness each take a lock on a resource of their own every 100 ms, their resources spread over the masters by the hash; a 100 ms slot counts as available when a probe called in it, or waiting at its start, was granted within 1 s of its call. Settled leaves out the %s after every change (fault, heal, kill, restart). Per resource judges each probe resource by its own probes alone (the mean of their shares, and the lowest): what a program that needs one resource sees, for which a failure of its master costs the time to the next view.\n\n", r.Settle)
	fmt.Fprintf(&b, "| window | measured | slots | available | share | per resource: mean | lowest |\n|---|--:|--:|--:|--:|--:|--:|\n")
	for _, a := range []struct {
		name string
		a    check.Availability
	}{{"majority up and connected", v.Availability}, {"settled (less the recovery after each change)", v.SettledAvailability}} {
		pr := a.a.PerResource
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %.2f %% | %.2f %% | %.2f %% %s |\n", a.name, a.a.Measured.Round(time.Second), a.a.Slots, a.a.Available, 100*a.a.Share, 100*pr.Mean, 100*pr.Min, pr.Worst)
	}
	b.WriteString("\n## Time from each fault to the next grant\n\n")
	b.WriteString("For kill-holder, pause-holder and partition-holder: the struck holder's lock granted to a client of another process (a client in the harness asks for it just before the fault); for the others, any grant.\n\n")
	b.WriteString("| nemesis | faults | median | p99 | max | never |\n|---|--:|--:|--:|--:|--:|\n")
	kinds := make([]string, 0, len(v.ByKind))
	for k := range v.ByKind {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		s := v.ByKind[k]
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %d |\n", k, s.Count, ms(s.Median), ms(s.P99), ms(s.Max), s.Never)
	}
	if v.Unaimed > 0 {
		fmt.Fprintf(&b, "\n%d faults aimed at a holder found none within 3 s and struck a random process instead; they are left out above.\n", v.Unaimed)
	}
	if len(v.Skipped) > 0 {
		b.WriteString("\nSkipped:\n\n")
		for _, s := range v.Skipped {
			fmt.Fprintf(&b, "- %s\n", s)
		}
	}
	b.WriteString("\n## Faults\n\n| at | healed | nemesis | what | error |\n|--:|--:|---|---|---|\n")
	for _, e := range r.Events {
		fmt.Fprintf(&b, "| %.1f s | %.1f s | %s | %s | %s |\n", e.At.Seconds(), e.Healed.Seconds(), e.Kind, e.Text, e.Err)
	}
	return b.String()
}

func finalText(f *check.CounterRead) string {
	if f == nil {
		return "not read"
	}
	if !f.Valid {
		return fmt.Sprintf("%d (not valid)", f.Value)
	}
	return fmt.Sprint(f.Value)
}
