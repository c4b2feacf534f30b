// Package verdict runs every checker over a chaos run's history and what
// its workloads saw, and sums it up: safety (chaos/check's models and
// direct checks, the counter, the election), availability while a
// majority was up and connected, the time from each fault to the next
// grant, and the paused holders' late writes.
package verdict

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/nemesis"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/workload"
)

// Input is what a run hands to Judge.
type Input struct {
	History *check.History
	Results workload.Results
	Events  []nemesis.Event
	// Majority are the windows in which a majority of agents was up and
	// connected; Settled the same windows less the Settle after each
	// change (the recovery the change starts).
	Majority, Settled []check.Window
	// Probe options for availability.
	Probe check.AvailabilityOptions
	// CheckTimeout bounds porcupine; MaxSteps bounds its steps per
	// resource (0: chaos/check's default).
	CheckTimeout time.Duration
	MaxSteps     int64
	// Dir receives porcupine's visualizations and dumps on failure.
	Dir string
}

// Verdict is the outcome of a run.
type Verdict struct {
	OK           bool     `json:"ok"`
	Violations   []string `json:"violations"`
	Inconclusive []string `json:"inconclusive"`
	Stats        check.Stats

	Availability        check.Availability `json:"availability_majority"`
	SettledAvailability check.Availability `json:"availability_settled"`

	Recoveries []check.GrantAfter       `json:"recoveries"`
	ByKind     map[string]RecoveryStats `json:"recovery_by_kind"`

	Counter      check.CounterResult  `json:"counter"`
	Election     check.ElectionResult `json:"election"`
	FrozenWrites FrozenStats          `json:"frozen_writes"`
	Faults       int                  `json:"faults"`
	// Unaimed counts the faults aimed at a holder that found none and
	// struck at random: left out of the times to a grant.
	Unaimed int      `json:"unaimed_faults"`
	Skipped []string `json:"skipped_faults"`
	Files   []string `json:"files"`
}

// RecoveryStats sum up the times to the next grant of one nemesis kind.
type RecoveryStats struct {
	Count  int           `json:"count"`
	Never  int           `json:"never"` // no grant before the end of the run
	Median time.Duration `json:"median_ns"`
	P99    time.Duration `json:"p99_ns"`
	Max    time.Duration `json:"max_ns"`
}

// FrozenStats: the writes paused holders made when they woke.
type FrozenStats struct {
	Total int `json:"total"`
	// Refused by the register; AcceptedFresh were accepted while no newer
	// token had been (nobody else wrote during the pause); AcceptedStale
	// were accepted over a newer token: a violation.
	Refused, AcceptedFresh, AcceptedStale int
}

// Judge runs the checkers.
func Judge(in Input) Verdict {
	opts := check.Options{Checks: check.DefaultChecks, Timeout: in.CheckTimeout, MaxSteps: in.MaxSteps, VisualizationDir: in.Dir,
		Name: "run"} // an inconclusive check fails the verdict (check's default)
	res := check.Check(in.History, opts)
	v := Verdict{Stats: res.Stats, Files: res.Files, ByKind: make(map[string]RecoveryStats)}
	for _, x := range res.Violations {
		v.Violations = append(v.Violations, x.String())
	}
	if res.Omitted > 0 {
		v.Violations = append(v.Violations, fmt.Sprintf("(%d more violations not shown)", res.Omitted))
	}
	for _, x := range res.Inconclusive {
		v.Inconclusive = append(v.Inconclusive, x.String())
	}

	v.Counter = check.CheckCounterHeld(check.MarkFrozen(in.Results.Increments, in.History.Freezes()), in.Results.Final, in.History.Held(workload.CounterRes))
	for _, x := range v.Counter.Violations {
		v.Violations = append(v.Violations, "[counter] "+x)
	}
	v.Election = check.CheckElection(in.History, workload.ElectionRes, in.Results.Observations)
	for _, x := range v.Election.Violations {
		v.Violations = append(v.Violations, "[election] "+x)
	}
	for _, w := range in.Results.FrozenWrites {
		v.FrozenWrites.Total++
		switch {
		case !w.Accepted:
			v.FrozenWrites.Refused++
		case w.Newer:
			v.FrozenWrites.AcceptedStale++
			v.Violations = append(v.Violations, fmt.Sprintf(
				"[frozen] client %d on %s woke at %s and the register accepted its write under token %d over a newer one",
				w.Client, w.Node, w.Woke, w.Token))
		default:
			v.FrozenWrites.AcceptedFresh++
		}
	}

	v.Availability = check.MeasureAvailability(in.History, in.Majority, in.Probe)
	v.SettledAvailability = check.MeasureAvailability(in.History, in.Settled, in.Probe)

	var faults []check.Fault
	for _, e := range in.Events {
		if strings.HasPrefix(e.Err, "skipped") {
			v.Skipped = append(v.Skipped, fmt.Sprintf("%s: %s", e.Kind, e.Err))
			continue
		}
		v.Faults++
		f := check.Fault{At: e.At, Kind: string(e.Kind), Resource: e.Resource}
		if len(e.Nodes) == 1 {
			f.Node = e.Nodes[0]
		}
		switch e.Kind {
		case nemesis.KillHolder, nemesis.PauseHolder, nemesis.PartHolder:
			// The struck holder's lock must move: a witness asked for
			// it just before the fault. Without a holder found, the
			// fault struck at random and measures nothing of that.
			if e.Resource == "" {
				v.Unaimed++
				continue
			}
		default:
			f.Resource = ""
		}
		faults = append(faults, f)
	}
	v.Recoveries = check.TimeToGrant(in.History, faults)
	byKind := make(map[string][]check.GrantAfter)
	for _, g := range v.Recoveries {
		byKind[g.Kind] = append(byKind[g.Kind], g)
	}
	for k, gs := range byKind {
		v.ByKind[k] = summarize(gs)
	}
	v.OK = len(v.Violations) == 0 && len(v.Inconclusive) == 0
	return v
}

func summarize(gs []check.GrantAfter) RecoveryStats {
	var ds []time.Duration
	s := RecoveryStats{Count: len(gs)}
	for _, g := range gs {
		if g.Took == check.Infinity {
			s.Never++
			continue
		}
		ds = append(ds, g.Took)
	}
	if len(ds) == 0 {
		return s
	}
	slices.Sort(ds)
	s.Median, s.P99, s.Max = Percentile(ds, 50), Percentile(ds, 99), ds[len(ds)-1]
	return s
}

// Percentile returns the p-th percentile (nearest rank) of sorted ds.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(ds))+0.999999) - 1
	return ds[min(max(rank, 0), len(ds)-1)]
}
