package main

import (
	"slices"
)

// Statuses of a target, a benchmark and a ratio.
const (
	statusMet      = "met"
	statusNotMet   = "not met"
	statusMissing  = "missing"  // not in the output, or without the target's unit
	statusReported = "reported" // ran; no target to judge
)

// Metric summarises the runs of one benchmark in one unit.
type Metric struct {
	Unit   string    `json:"unit"`
	Values []float64 `json:"values"` // in run order
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
}

// Verdict is a target judged against the median of its unit.
type Verdict struct {
	Target
	Median float64 `json:"median"`
	Status string  `json:"status"` // met, not met or missing
}

// BenchSummary is one benchmark of the catalogue and what its runs gave.
type BenchSummary struct {
	Package string    `json:"package"`
	Name    string    `json:"name"`
	Runs    int       `json:"runs"`
	Metrics []Metric  `json:"metrics,omitempty"` // in the order go test printed the units
	Targets []Verdict `json:"targets,omitempty"`
	Status  string    `json:"status"`
}

// RatioSummary is Num's figure over Den's, in Metric.Unit "×" of Of.
type RatioSummary struct {
	Package string `json:"package"`
	Num     string `json:"numerator"`
	Den     string `json:"denominator"`
	Of      string `json:"of"` // the unit divided, ns/op
	Metric  Metric `json:"ratio"`
	// PerRun is true when run i was divided by run i; false when the run
	// counts differ (a run failed) and the medians were divided instead.
	PerRun bool    `json:"per_run"`
	Target Verdict `json:"target"`
	Status string  `json:"status"`
}

// median of xs; the mean of the two middle values when there is an even
// number of them, so that two runs give their midpoint rather than either.
// It is 0 for no values.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func newMetric(unit string, xs []float64) Metric {
	m := Metric{Unit: unit, Values: xs, Median: median(xs)}
	if len(xs) > 0 {
		m.Min, m.Max = slices.Min(xs), slices.Max(xs)
	}
	return m
}

// summarise matches the results of a run against the selected catalogue:
// module is the module path, which with a package's Dir gives the import path
// go test prints. A selected benchmark with no result is reported missing;
// results that match nothing selected are ignored.
func summarise(sel []pkgSpec, module string, results []result) ([]BenchSummary, []RatioSummary) {
	var benches []BenchSummary
	var ratios []RatioSummary
	for _, p := range sel {
		importPath := module + "/" + p.Dir
		byName := map[string]BenchSummary{}
		for _, spec := range p.Benches {
			var runs []result
			for _, r := range results {
				if r.Pkg == importPath && sameBenchmark(r.Name, spec.Name) {
					runs = append(runs, r)
				}
			}
			s := summariseBench(p.Dir, spec, runs)
			byName[spec.Name] = s
			benches = append(benches, s)
		}
		for _, spec := range p.Ratios {
			ratios = append(ratios, ratio(p.Dir, spec, byName[spec.Num], byName[spec.Den]))
		}
	}
	return benches, ratios
}

func summariseBench(dir string, spec benchSpec, runs []result) BenchSummary {
	s := BenchSummary{Package: dir, Name: spec.Name, Runs: len(runs)}
	var units []string
	byUnit := map[string][]float64{}
	for _, r := range runs {
		for _, v := range r.Values {
			if _, ok := byUnit[v.Unit]; !ok {
				units = append(units, v.Unit)
			}
			byUnit[v.Unit] = append(byUnit[v.Unit], v.Value)
		}
	}
	for _, u := range units {
		s.Metrics = append(s.Metrics, newMetric(u, byUnit[u]))
	}
	for _, t := range spec.Targets {
		s.Targets = append(s.Targets, judge(t, s.metric(t.Unit)))
	}
	s.Status = overall(len(runs) > 0, s.Targets)
	return s
}

// metric returns the summary of unit, or nil if no run reported it.
func (s BenchSummary) metric(unit string) *Metric {
	for i := range s.Metrics {
		if s.Metrics[i].Unit == unit {
			return &s.Metrics[i]
		}
	}
	return nil
}

// judge compares the median of m (nil: never reported) with t.
func judge(t Target, m *Metric) Verdict {
	if m == nil || len(m.Values) == 0 {
		return Verdict{Target: t, Status: statusMissing}
	}
	v := Verdict{Target: t, Median: m.Median, Status: statusNotMet}
	if t.Met(m.Median) {
		v.Status = statusMet
	}
	return v
}

// overall is a benchmark's status: missing if it did not run or lacks a
// target's unit, not met if it misses any target, met if it meets all,
// reported if it has none.
func overall(ran bool, vs []Verdict) string {
	if !ran {
		return statusMissing
	}
	status := statusReported
	for _, v := range vs {
		switch {
		case v.Status == statusMissing:
			return statusMissing
		case v.Status == statusNotMet:
			status = statusNotMet
		case status == statusReported:
			status = statusMet
		}
	}
	return status
}

// ratio divides num's figures in spec.Unit by den's. Run i of one is paired
// with run i of the other where both have the same number of runs: each pair
// then comes from the same stretch of the same invocation, and the spread of
// the ratios shows how steady the comparison is. Otherwise the medians are
// divided, which still uses only this invocation's figures.
func ratio(dir string, spec ratioSpec, num, den BenchSummary) RatioSummary {
	r := RatioSummary{Package: dir, Num: spec.Num, Den: spec.Den, Of: spec.Unit, Metric: Metric{Unit: "×"}}
	n, d := num.metric(spec.Unit), den.metric(spec.Unit)
	var xs []float64
	switch {
	case n == nil || d == nil || len(n.Values) == 0 || len(d.Values) == 0:
	case len(n.Values) == len(d.Values):
		r.PerRun = true
		for i := range n.Values {
			if d.Values[i] > 0 {
				xs = append(xs, n.Values[i]/d.Values[i])
			}
		}
	case d.Median > 0:
		xs = []float64{n.Median / d.Median}
	}
	if len(xs) > 0 {
		r.Metric = newMetric("×", xs)
		r.Target = judge(spec.Target, &r.Metric)
	} else {
		r.PerRun = false
		r.Target = judge(spec.Target, nil)
	}
	r.Status = r.Target.Status
	return r
}

// tally counts the targets of benchmarks and ratios by status.
func tally(benches []BenchSummary, ratios []RatioSummary) (met, notMet, missing int) {
	count := func(v Verdict) {
		switch v.Status {
		case statusMet:
			met++
		case statusNotMet:
			notMet++
		default:
			missing++
		}
	}
	for _, b := range benches {
		for _, v := range b.Targets {
			count(v)
		}
	}
	for _, r := range ratios {
		count(r.Target)
	}
	return met, notMet, missing
}
