package main

import (
	"io"
	"strings"

	"golang.org/x/perf/benchfmt"
)

// result is one line of benchmark output: one run of one benchmark.
type result struct {
	Pkg    string // import path, from the "pkg:" line
	Name   string // as printed, with "Benchmark" and any -GOMAXPROCS suffix
	Iters  int
	Values []value
}

// value is one measurement in the unit go test printed it in: benchfmt
// converts ns/op to sec/op, MB/s to B/s and ns/lock to sec/lock, but the
// targets and the people reading the table think in the printed units.
type value struct {
	Unit  string  `json:"unit"`
	Value float64 `json:"value"`
}

// parseOutput reads go test -bench output (the format of
// golang.org/design/14313-benchmark-format). pkg is the package to assume
// until a "pkg:" line names one. Lines that are not results (build output,
// PASS, ok, test logs) are skipped; a line that starts like a result but does
// not parse, such as a benchmark's "--- FAIL", is returned as a problem, not
// an error, so one broken benchmark leaves the others' figures usable.
func parseOutput(r io.Reader, file, pkg string) (results []result, problems []string, err error) {
	var initial []string
	if pkg != "" {
		initial = []string{"pkg", pkg}
	}
	br := new(benchfmt.Reader)
	br.Reset(r, file, initial...)
	for br.Scan() {
		switch rec := br.Result().(type) {
		case *benchfmt.Result:
			res := result{Name: "Benchmark" + rec.Name.String(), Iters: rec.Iters}
			res.Pkg = rec.GetConfig("pkg")
			for _, v := range rec.Values {
				if v.OrigUnit != "" {
					res.Values = append(res.Values, value{Unit: v.OrigUnit, Value: v.OrigValue})
				} else {
					res.Values = append(res.Values, value{Unit: v.Unit, Value: v.Value})
				}
			}
			results = append(results, res)
		case *benchfmt.SyntaxError:
			problems = append(problems, rec.Error())
		}
	}
	return results, problems, br.Err()
}

// sameBenchmark reports whether printed, a name as go test printed it, is
// the benchmark name: name itself, or name and the -GOMAXPROCS suffix go
// test adds when GOMAXPROCS > 1. Comparing against the known name, rather
// than cutting any trailing -digits, keeps a sub-benchmark such as "n-5"
// whole when GOMAXPROCS is 1.
func sameBenchmark(printed, name string) bool {
	rest, ok := strings.CutPrefix(printed, name)
	if !ok {
		return false
	}
	if rest == "" {
		return true
	}
	digits, ok := strings.CutPrefix(rest, "-")
	return ok && digits != "" && strings.Trim(digits, "0123456789") == ""
}
