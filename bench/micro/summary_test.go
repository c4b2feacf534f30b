package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/bench/host"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{7}, 7},
		{[]float64{3, 1, 2}, 2},
		{[]float64{5, 1, 4, 2, 3}, 3},
		{[]float64{1, 3}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{2, 2, 9, 2}, 2},
	} {
		in := append([]float64(nil), tc.xs...)
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.xs[i] {
				t.Fatalf("median reordered its input: %v", tc.xs)
			}
		}
	}
}

func TestTarget(t *testing.T) {
	for _, tc := range []struct {
		t    Target
		v    float64
		want bool
		s    string
	}{
		{atMost(250, "ns/op"), 249.9, true, "≤ 250"},
		{atMost(250, "ns/op"), 250, true, "≤ 250"},
		{atMost(250, "ns/op"), 250.1, false, "≤ 250"},
		{below(500, "ms/recovery"), 500, false, "< 500"},
		{below(500, "ms/recovery"), 499, true, "< 500"},
		{atLeast(250_000, "pairs/s"), 250_000, true, "≥ 250,000"},
		{atLeast(250_000, "pairs/s"), 249_999, false, "≥ 250,000"},
		{atMost(1.3, "×"), 2.29, false, "≤ 1.3"},
		{Target{Unit: "x", Op: "?", Limit: 1}, 0, false, "? 1"},
	} {
		if got := tc.t.Met(tc.v); got != tc.want {
			t.Errorf("%+v.Met(%v) = %v", tc.t, tc.v, got)
		}
		if got := tc.t.String(); got != tc.s && tc.t.Op != "?" {
			t.Errorf("%+v.String() = %q, want %q", tc.t, got, tc.s)
		}
	}
}

func TestJudgeAndOverall(t *testing.T) {
	m := newMetric("ns/op", []float64{120, 300, 100})
	if v := judge(atMost(250, "ns/op"), &m); v.Status != statusMet || v.Median != 120 {
		t.Errorf("judge: %+v", v)
	}
	if v := judge(atMost(100, "ns/op"), &m); v.Status != statusNotMet {
		t.Errorf("judge: %+v", v)
	}
	if v := judge(atMost(1, "allocs/op"), nil); v.Status != statusMissing {
		t.Errorf("judge of an absent unit: %+v", v)
	}
	met, notMet, missing := Verdict{Status: statusMet}, Verdict{Status: statusNotMet}, Verdict{Status: statusMissing}
	for _, tc := range []struct {
		ran  bool
		vs   []Verdict
		want string
	}{
		{false, nil, statusMissing},
		{false, []Verdict{met}, statusMissing},
		{true, nil, statusReported},
		{true, []Verdict{met, met}, statusMet},
		{true, []Verdict{met, notMet}, statusNotMet},
		{true, []Verdict{notMet, missing}, statusMissing},
	} {
		if got := overall(tc.ran, tc.vs); got != tc.want {
			t.Errorf("overall(%v, %v) = %q, want %q", tc.ran, tc.vs, got, tc.want)
		}
	}
}

func TestRatio(t *testing.T) {
	bench := func(ns ...float64) BenchSummary {
		s := BenchSummary{Runs: len(ns)}
		if len(ns) > 0 {
			s.Metrics = []Metric{newMetric("ns/op", ns)}
		}
		return s
	}
	spec := ratioSpec{Num: "N", Den: "D", Unit: "ns/op", Target: atMost(2, "×")}
	for _, tc := range []struct {
		name     string
		num, den BenchSummary
		values   []float64
		perRun   bool
		status   string
	}{
		// Run i by run i: 3, 1.5, 2 — median 2, met at the bound.
		{"per run", bench(300, 300, 100), bench(100, 200, 50), []float64{3, 1.5, 2}, true, statusMet},
		{"per run, not met", bench(30, 31), bench(10, 10), []float64{3, 3.1}, true, statusNotMet},
		// Counts differ: median 200 over median 100.
		{"medians", bench(100, 200, 300), bench(100, 100), []float64{2}, false, statusMet},
		{"numerator missing", bench(), bench(100), nil, false, statusMissing},
		{"denominator missing", bench(100), bench(), nil, false, statusMissing},
		{"zero floor", bench(100), bench(0), nil, true, statusMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ratio("transport", spec, tc.num, tc.den)
			if len(r.Metric.Values) != len(tc.values) || r.PerRun != (tc.perRun && len(tc.values) > 0) || r.Status != tc.status {
				t.Fatalf("%+v", r)
			}
			for i, v := range tc.values {
				if math.Abs(r.Metric.Values[i]-v) > 1e-12 {
					t.Errorf("value %d = %v, want %v", i, r.Metric.Values[i], v)
				}
			}
			if r.Metric.Unit != "×" || r.Target.Unit != "×" {
				t.Errorf("units %q, %q", r.Metric.Unit, r.Target.Unit)
			}
		})
	}
}

func all(t *testing.T) []pkgSpec {
	t.Helper()
	sel, err := selectBenchmarks(catalogue(), "all", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

func TestSummariseSample(t *testing.T) {
	benches, ratios := summarise(all(t), module, readSample(t, "sample.txt"))
	status := map[string]string{}
	for _, b := range benches {
		if b.Runs != 3 {
			t.Errorf("%s %s: %d runs", b.Package, b.Name, b.Runs)
		}
		status[b.Package+" "+b.Name] = b.Status
	}
	for name, want := range map[string]string{
		"master BenchmarkUncontendedLockUnlock": statusMet,
		"master BenchmarkContendedHandoff":      statusReported,
		"master BenchmarkMillionLocks":          statusMet,
		"transport BenchmarkLinkPipelined":      statusMet, // median 1,296,712 although one run gave 387,733
		"transport BenchmarkLockRequestCodec":   statusMet,
		"dlm BenchmarkLocalLockUnlock":          statusMet,
		"dlm BenchmarkTCPPingPong":              statusReported,
	} {
		if status[name] != want {
			t.Errorf("%s: %q, want %q", name, status[name], want)
		}
	}
	if len(ratios) != 2 {
		t.Fatalf("ratios %+v", ratios)
	}
	// LinkRoundTrip / TCPPingPong run by run: 11456/5020, 11549/4908, 11727/5690.
	if r := ratios[0]; !r.PerRun || r.Status != statusNotMet || math.Abs(r.Metric.Median-11456.0/5020) > 1e-9 ||
		math.Abs(r.Metric.Min-11727.0/5690) > 1e-9 || math.Abs(r.Metric.Max-11549.0/4908) > 1e-9 {
		t.Errorf("transport ratio %+v", r)
	}
	// RemoteLockUnlock / dlm's TCPPingPong: 13604/5112, 13311/4977, 14802/5380; median 2.675.
	if r := ratios[1]; r.Package != "dlm" || r.Status != statusNotMet || math.Abs(r.Metric.Median-13311.0/4977) > 1e-9 {
		t.Errorf("dlm ratio %+v", r)
	}
	if met, notMet, missing := tally(benches, ratios); met != 7 || notMet != 2 || missing != 0 {
		t.Errorf("tally %d met, %d not met, %d missing", met, notMet, missing)
	}
}

// testReport is a report with a fixed header, so the writers' output can be
// compared with golden files.
func testReport(t *testing.T, sample string, sel []pkgSpec) *Report {
	t.Helper()
	r := &Report{
		Command:   "cd bench && go run ./micro --count=3",
		Started:   time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		Machine:   host.Machine{OS: "linux", Arch: "amd64", CPUs: 2, CPUModel: "Test CPU", Kernel: "6.1.0", GoVersion: "go1.26.8", MemoryMB: 24000},
		LoadStart: "2.51 2.10 1.90",
		LoadEnd:   "3.02 2.31 1.97",
		Count:     3,
		Benchtime: "1s",
	}
	for _, c := range plan(sel, 3, "1s", "1x") {
		r.Commands = append(r.Commands, c.String())
	}
	r.Benchmarks, r.Ratios = summarise(sel, module, readSample(t, sample))
	return r
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run cd bench && go test ./micro -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file; rerun with -update and review the diff.\ngot:\n%s", name, got)
	}
}

func TestWritersSample(t *testing.T) {
	r := testReport(t, "sample.txt", all(t))
	var txt, md, js bytes.Buffer
	if err := WriteText(&txt, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdown(&md, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "sample.golden.txt", txt.String())
	golden(t, "sample.golden.md", md.String())
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Benchmarks) != 12 || len(back.Ratios) != 2 || back.Ratios[0].Target.Limit != 1.3 || back.Benchmarks[2].Metrics[1].Unit != "bytes/lock" {
		t.Errorf("JSON round trip: %+v", back)
	}
	for _, want := range []string{
		"go test -run '^$' -bench '^(BenchmarkUncontendedLockUnlock|BenchmarkContendedHandoff|BenchmarkMillionLocks)$' -benchtime 1s -count 3 -benchmem ./master/",
		"Load average (1, 5, 15 min): 2.51 2.10 1.90 at start, 3.02 2.31 1.97 at end",
		"go1.26.8, linux/amd64", "CPUs: 2",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	// Every line of the text table is as wide as its cells need, no more.
	for _, line := range strings.Split(txt.String(), "\n") {
		if strings.HasSuffix(line, " ") {
			t.Errorf("trailing space in %q", line)
		}
	}
}

// A benchmark that failed or did not run is reported missing, and so is a
// target whose unit no run reported; nothing panics.
func TestWritersBroken(t *testing.T) {
	sel, err := selectBenchmarks(catalogue(), "transport,dlm,master", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	r := testReport(t, "broken.txt", sel)
	r.SlowBenchtime = "1x"
	status := map[string]string{}
	for _, b := range r.Benchmarks {
		status[b.Package+" "+b.Name] = b.Status
	}
	for name, want := range map[string]string{
		"master BenchmarkUncontendedLockUnlock": statusMissing, // its package's output is absent
		"transport BenchmarkLinkRoundTrip":      statusReported,
		"transport BenchmarkLinkPipelined":      statusMissing, // ran, without pairs/s
		"transport BenchmarkLockRequestCodec":   statusMet,
		"dlm BenchmarkRemoteLockUnlock":         statusMissing,
		"dlm BenchmarkClusterThroughput":        statusReported,
	} {
		if status[name] != want {
			t.Errorf("%s: %q, want %q", name, status[name], want)
		}
	}
	if q := r.Ratios[0]; q.PerRun || len(q.Metric.Values) != 1 || math.Abs(q.Metric.Median-11502.5/5020) > 1e-9 {
		t.Errorf("transport ratio with 2 runs over 3: %+v", q)
	}
	if q := r.Ratios[1]; q.Status != statusMissing {
		t.Errorf("dlm ratio without RemoteLockUnlock: %+v", q)
	}
	if got := missingBenchmarks(r); len(got) != 4 || got[3] != "./dlm/ BenchmarkRemoteLockUnlock" {
		t.Errorf("missing %q", got)
	}
	var txt bytes.Buffer
	if err := WriteText(&txt, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdown(&bytes.Buffer{}, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "broken.golden.txt", txt.String())
	if !regexp.MustCompile(`BenchmarkRemoteLockUnlock\s+0\s+missing`).MatchString(txt.String()) {
		t.Errorf("no missing row for RemoteLockUnlock:\n%s", txt.String())
	}
}

func TestFormatNumber(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {1, "1"}, {1005, "1005"}, {120.3, "120.3"}, {11.69, "11.69"}, {2.2821, "2.282"},
		{2.29, "2.29"}, {106.0, "106"}, {9999.4, "9999"}, {387733, "387,733"}, {1296712.4, "1,296,712"},
		{1_523_987_601, "1,523,987,601"}, {0.1234, "0.123"}, {-12345, "-12,345"}, {math.Inf(1), "+Inf"},
	} {
		if got := formatNumber(tc.v); got != tc.want {
			t.Errorf("formatNumber(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
