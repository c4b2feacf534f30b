package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/bench/lockbench"
	"github.com/seed-a6839e30/dlm/bench/measure"
	"github.com/seed-a6839e30/dlm/bench/workload"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fixture is a fixed report: three systems, two workloads, one coupon run.
// The "dlm" rows are made-up numbers to exercise the ratio code.
func fixture() *Report {
	res := func(sys string, k workload.Kind, ops float64, p99 time.Duration) workload.Result {
		return workload.Result{
			System: sys, Workload: k, Clients: 4, Window: 9 * time.Second,
			Cycles: uint64(ops * 9), OpsPerSec: ops,
			Acquire:    measure.Summary{Count: uint64(ops * 9), P50: p99 / 10, P99: p99, P999: p99 * 2},
			Cycle:      measure.Summary{Count: uint64(ops * 9), P99: p99 + time.Millisecond},
			Fairness:   measure.Fairness{Clients: 4, Min: 10, Max: 20, Jain: 0.95},
			HarnessCPU: 0.5, ServerCPU: 1.25, LoadAvg: 1,
		}
	}
	dlmHot := res("dlm", workload.Hot, 5000, 2*time.Millisecond)
	dlmHot.ServerCPU = -1
	redisHot := res("redis", workload.Hot, 2500, 300*time.Millisecond)
	redisCoupon := res("redis", workload.Coupon, 2000, 50*time.Millisecond)
	redisCoupon.Coupon = &workload.CouponResult{Total: 1000, Offered: 450000, Issued: 1001, OverIssued: 1,
		SoldOut: 17000, Busy: 30000, Expired: 400000, Unanswered: 1999, SoldOutAfter: 480 * time.Millisecond}
	redisCoupon.Notes = []string{"no monotonic fencing token: the store could not refuse stale writers"}
	redisCoupon.Overlaps = 1
	etcdReaders := res("etcd", workload.Readers, 95.5, 1500*time.Millisecond)
	etcdReaders.Errors, etcdReaders.ErrorSamples = 2, []string{"lock: etcdserver: request timed out"}
	zkReaders := res("zookeeper", workload.Readers, 4200, 10*time.Millisecond)
	zkReaders.SharedAsExclusive = true
	results := []workload.Result{
		dlmHot, res("dlm", workload.Readers, 20000, time.Millisecond),
		redisHot, redisCoupon, etcdReaders, zkReaders,
	}
	return &Report{
		Command: "cd bench && go run ./compare --clients=4",
		Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Machine: Machine{OS: "linux", Arch: "amd64", CPUs: 2, CPUModel: "Test CPU", Kernel: "6.1.0", GoVersion: "go1.26.0", MemoryMB: 24000},
		Flags:   map[string]string{"clients": "4", "duration": "10s", "warmup": "1s", "rate": "50000", "coupon-wait": "50ms"},
		Systems: []lockbench.Info{
			{Name: "dlm", Summary: "made up", Servers: 3, Shared: true, Fencing: lockbench.FencingMonotonic, Cancelable: true},
			{Name: "redis", Version: "redis 7.0.15", Summary: "SET NX PX", Servers: 1, Fencing: lockbench.FencingOpaque, Cancelable: true, Notes: []string{"no fsync"}},
			{Name: "etcd", Version: "etcd 3.4.23", Summary: "Mutex", Servers: 3, Shared: true, Fencing: lockbench.FencingMonotonic, Cancelable: true},
			{Name: "zookeeper", Version: "zookeeper 3.8.0", Summary: "zk.Lock", Servers: 1, Fencing: lockbench.FencingNone},
		},
		Skipped:   []Skipped{{System: "redlock", Reason: "redis-server not found; run bench/install-peers.sh"}},
		Results:   results,
		Reference: "dlm",
		Ratios:    ComputeRatios(results, "dlm"),
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run cd bench && go test ./report -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; rerun with -update and review the diff.\ngot:\n%s", name, got)
	}
}

func TestText(t *testing.T) {
	var b bytes.Buffer
	if err := Text(&b, fixture()); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.txt", b.Bytes())
}

func TestMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := Markdown(&b, fixture(), "compare.svg"); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.md", b.Bytes())
}

func TestSVG(t *testing.T) {
	var b bytes.Buffer
	if err := SVG(&b, fixture()); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.svg", b.Bytes())
	// It must be well-formed XML with one bar per result.
	if n := strings.Count(b.String(), "<title>"); n != len(fixture().Results) {
		t.Fatalf("%d bars for %d results", n, len(fixture().Results))
	}
	var empty bytes.Buffer
	if err := SVG(&empty, &Report{}); err != nil || !strings.Contains(empty.String(), "no results") {
		t.Fatalf("empty chart: %v %s", err, empty.String())
	}
}

func TestJSONRoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := JSON(&b, fixture()); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.json", b.Bytes())
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != 6 || back.Results[3].Coupon.OverIssued != 1 || back.Ratios[0].Peer != "redis" {
		t.Fatalf("round trip lost data: %+v", back)
	}
}

func TestComputeRatios(t *testing.T) {
	got := ComputeRatios(fixture().Results, "dlm")
	want := []Ratio{
		{Workload: workload.Hot, Reference: "dlm", Peer: "redis", Throughput: 2, P99: 150},
		{Workload: workload.Readers, Reference: "dlm", Peer: "etcd", Throughput: 20000 / 95.5, P99: 1500},
		{Workload: workload.Readers, Reference: "dlm", Peer: "zookeeper", Throughput: 20000.0 / 4200, P99: 10},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Workload != w.Workload || g.Peer != w.Peer || !near(g.Throughput, w.Throughput) || !near(g.P99, w.P99) {
			t.Errorf("ratio %d: got %+v, want %+v", i, g, w)
		}
	}
	// Any system can be the reference; the coupon row has no counterpart.
	if r := ComputeRatios(fixture().Results, "redis"); len(r) != 1 || r[0].Peer != "dlm" || !near(r[0].Throughput, 0.5) {
		t.Fatalf("redis as reference: %+v", r)
	}
	if ComputeRatios(fixture().Results, "") != nil || ComputeRatios(fixture().Results, "consul") != nil {
		t.Fatal("ratios without a reference")
	}
	zero := []workload.Result{{System: "dlm", Workload: workload.Hot, OpsPerSec: 10}, {System: "x", Workload: workload.Hot}}
	if r := ComputeRatios(zero, "dlm"); r[0].Throughput != 0 || r[0].P99 != 0 {
		t.Fatalf("division by zero not guarded: %+v", r)
	}
	if DefaultReference([]string{"redis", "dlm"}) != "dlm" || DefaultReference([]string{"redis"}) != "" {
		t.Fatal("DefaultReference")
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestFormatting(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{fmtOps(31622.4), "31,622"}, {fmtOps(1234567), "1,234,567"}, {fmtOps(95.54), "95.5"}, {fmtOps(100), "100"},
		{fmtShort(31622), "32k"}, {fmtShort(3300), "3.3k"}, {fmtShort(1000), "1k"}, {fmtShort(2.5e6), "2.5M"}, {fmtShort(95), "95"}, {fmtShort(1), "1"},
		{fmtDur(0), "–"}, {fmtDur(54271 * time.Nanosecond), "54µs"}, {fmtDur(4259839 * time.Nanosecond), "4.26ms"},
		{fmtDur(26476543 * time.Nanosecond), "26.5ms"}, {fmtDur(310 * time.Millisecond), "310ms"}, {fmtDur(1500 * time.Millisecond), "1.50s"}, {fmtDur(12 * time.Second), "12.0s"},
		{fmtInt(450000), "450,000"}, {fmtInt(7), "7"},
		{fmtRatio(0), "–"}, {fmtRatio(2), "2.00×"}, {fmtRatio(209.4), "209×"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
