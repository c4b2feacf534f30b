package main

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

const module = "github.com/seed-a6839e30/dlm"

func readSample(t *testing.T, name string) []result {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, _, err := parseOutput(f, name, "")
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestParseSample(t *testing.T) {
	res := readSample(t, "sample.txt")
	if len(res) != 36 {
		t.Fatalf("%d results, want 36", len(res))
	}
	byPkg := map[string]int{}
	for _, r := range res {
		byPkg[strings.TrimPrefix(r.Pkg, module+"/")]++
	}
	if want := map[string]int{"master": 9, "transport": 12, "transport/wire": 3, "dlm": 12}; !reflect.DeepEqual(byPkg, want) {
		t.Errorf("results per package %v, want %v", byPkg, want)
	}
	// Custom units keep the unit go test printed: no sec/op, B/s or sec/lock.
	wire := res[21]
	want := result{Pkg: module + "/transport/wire", Name: "BenchmarkLockReportCodec-2", Iters: 9721, Values: []value{
		{"ns/op", 123004}, {"MB/s", 351.43}, {"ns/lock", 123.0}, {"B/op", 16384}, {"allocs/op", 1000},
	}}
	if !reflect.DeepEqual(wire, want) {
		t.Errorf("got  %+v\nwant %+v", wire, want)
	}
	if p := res[16]; p.Name != "BenchmarkLinkPipelined-2" || p.Values[1] != (value{"pairs/s", 387733}) {
		t.Errorf("pipelined run 2: %+v", p)
	}
}

func TestParseLines(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		results  []result
		problems int
	}{
		{"result", "BenchmarkA-2 \t 100\t 12.5 ns/op\n",
			[]result{{Pkg: "m/p", Name: "BenchmarkA-2", Iters: 100, Values: []value{{"ns/op", 12.5}}}}, 0},
		{"custom metric", "BenchmarkA 1 12 ns/op  387733 pairs/s 231.4 bytes/lock",
			[]result{{Pkg: "m/p", Name: "BenchmarkA", Iters: 1, Values: []value{{"ns/op", 12}, {"pairs/s", 387733}, {"bytes/lock", 231.4}}}}, 0},
		{"sub-benchmark", "BenchmarkRecovery/locks=100000-2 1 2.3e+09 ns/op 205.1 ms/recovery",
			[]result{{Pkg: "m/p", Name: "BenchmarkRecovery/locks=100000-2", Iters: 1, Values: []value{{"ns/op", 2.3e9}, {"ms/recovery", 205.1}}}}, 0},
		{"pkg line wins", "pkg: m/q\nBenchmarkA 1 1 ns/op",
			[]result{{Pkg: "m/q", Name: "BenchmarkA", Iters: 1, Values: []value{{"ns/op", 1}}}}, 0},
		{"name alone (go test -v, or a failed run)", "BenchmarkA\n--- FAIL: BenchmarkA\n", nil, 0},
		{"failure after the name", "BenchmarkA-2   \t--- FAIL: BenchmarkA-2\n    x_test.go:9: boom\n", nil, 1},
		{"missing unit", "BenchmarkA 100 12", nil, 1},
		{"not a number", "BenchmarkA 100 fast ns/op", nil, 1},
		{"other lines", "PASS\nok  \tm/p\t1.2s\nFAIL\nexit status 1\n# m/p\n./x.go:1: syntax error\n", nil, 0},
		{"empty", "", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, problems, err := parseOutput(strings.NewReader(tc.in), "test", "m/p")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res, tc.results) {
				t.Errorf("results %+v, want %+v", res, tc.results)
			}
			if len(problems) != tc.problems {
				t.Errorf("problems %q, want %d", problems, tc.problems)
			}
		})
	}
}

func TestSameBenchmark(t *testing.T) {
	for _, tc := range []struct {
		printed, name string
		want          bool
	}{
		{"BenchmarkA", "BenchmarkA", true},
		{"BenchmarkA-2", "BenchmarkA", true},
		{"BenchmarkA-16", "BenchmarkA", true},
		{"BenchmarkAB-2", "BenchmarkA", false},
		{"BenchmarkA-", "BenchmarkA", false},
		{"BenchmarkA-2x", "BenchmarkA", false},
		{"BenchmarkA/b-2", "BenchmarkA", false},
		{"BenchmarkRecovery/locks=100000-2", "BenchmarkRecovery/locks=100000", true},
		{"BenchmarkRecovery/locks=1000000-2", "BenchmarkRecovery/locks=100000", false},
		{"BenchmarkB", "BenchmarkA", false},
	} {
		if got := sameBenchmark(tc.printed, tc.name); got != tc.want {
			t.Errorf("sameBenchmark(%q, %q) = %v", tc.printed, tc.name, got)
		}
	}
}
