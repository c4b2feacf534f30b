package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain lets the test binary be the loader too: the end-to-end test
// starts it as `pause loader`, as the command starts itself.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "loader" {
		if err := runLoader(os.Args[2:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "pause loader:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func TestOptionsRefused(t *testing.T) {
	ok := options{dlmnode: "/bin/true", locks: 10, runs: 1, probes: 1, base: time.Second, lease: time.Second}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*options){
		"no binary":      func(o *options) { o.dlmnode = "" },
		"negative locks": func(o *options) { o.locks = -1 },
		"no runs":        func(o *options) { o.runs = 0 },
		"no probes":      func(o *options) { o.probes = 0 },
		"no base":        func(o *options) { o.base = 0 },
		"negative after": func(o *options) { o.after = -time.Second },
		"short lease":    func(o *options) { o.lease = time.Second - 1 },
		"gomaxprocs < 0": func(o *options) { o.gomaxprocs = -1 },
		"negative trace": func(o *options) { o.trace = -time.Second },
	} {
		o := ok
		mut(&o)
		if o.validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseRuntimeStats(t *testing.T) {
	const page = `# HELP go_gc_duration_seconds A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 2.1e-05
go_gc_duration_seconds_sum 0.0123
go_gc_duration_seconds_count 42
go_memstats_heap_alloc_bytes 1.048576e+08
go_memstats_heap_alloc_bytes_total 9e+09
`
	s, err := parseRuntimeStats(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if s.gcs != 42 || s.heap != 1<<20*100 {
		t.Errorf("got %+v, want 42 collections and a 100 MB heap", s)
	}
	for name, bad := range map[string]string{
		"no heap":   "go_gc_duration_seconds_count 1\n",
		"no count":  "go_memstats_heap_alloc_bytes 5\n",
		"bad count": "go_gc_duration_seconds_count x\ngo_memstats_heap_alloc_bytes 5\n",
		"empty":     "",
	} {
		if _, err := parseRuntimeStats(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func logLine(at time.Time, msg string) string {
	return fmt.Sprintf(`{"time":%q,"level":"INFO","msg":%q}`+"\n", at.Format(time.RFC3339Nano), msg)
}

func TestLogTailReadsWholeJSONLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n1.log")
	t0 := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	first := logLine(t0, "view committed")
	second := logLine(t0.Add(time.Second), "recovery done")
	// A whole line, a line of the runtime's, and half of a line.
	if err := os.WriteFile(path, []byte(first+"gc 7 @1.2s 3%: ...\n"+second[:10]), 0o644); err != nil {
		t.Fatal(err)
	}
	tail := &logTail{path: path}
	evs, err := tail.next()
	if err != nil || len(evs) != 1 || evs[0].Msg != "view committed" || !evs[0].Time.Equal(t0) {
		t.Fatalf("first read: %+v, %v", evs, err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(second[10:]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	evs, err = tail.next()
	if err != nil || len(evs) != 1 || evs[0].Msg != "recovery done" {
		t.Fatalf("second read: %+v, %v", evs, err)
	}
	if evs, err := tail.next(); err != nil || len(evs) != 0 {
		t.Fatalf("nothing new: %+v, %v", evs, err)
	}
}

func TestWatchRecovery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n1.log")
	t0 := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// A view and a recovery before the kill at t0 are not this one's; a
	// recovery done before the commit neither.
	log := logLine(at(-500), "view committed") + logLine(at(-400), "recovery done") +
		logLine(at(100), "recovery done") + logLine(at(1200), "view committed") +
		logLine(at(1300), "view committed") + logLine(at(1700), "recovery done") + logLine(at(1800), "recovery done")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := watchRecovery(context.Background(), &logTail{path: path}, t0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !r.commit.Equal(at(1200)) || !r.done.Equal(at(1700)) || r.views != 2 {
		t.Errorf("got commit %v, done %v, %d views; want +1200 ms, +1700 ms, 2", r.commit.Sub(t0), r.done.Sub(t0), r.views)
	}
	if err := os.WriteFile(path, []byte(logLine(at(100), "view committed")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := watchRecovery(context.Background(), &logTail{path: path}, t0, 50*time.Millisecond); err == nil {
		t.Error("a commit without its recovery's end: no error")
	}
}

func TestSummarizeOps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var ops []op
	for i := range 200 {
		ops = append(ops, op{t0.Add(time.Duration(i) * time.Second), time.Duration(i+1) * time.Millisecond})
	}
	ops[50].took = time.Second // the longest, in the middle
	w := summarizeOps(ops, 3)
	if w.ops != 200 || w.failed != 3 || w.max != time.Second || !w.maxAt.Equal(t0.Add(50*time.Second)) {
		t.Errorf("got %+v", w)
	}
	if w.p99 != 200*time.Millisecond || w.p50 != 102*time.Millisecond {
		t.Errorf("p99 %v, p50 %v; want 200ms and 102ms", w.p99, w.p50)
	}
	if w := summarizeOps(nil, 1); w.ops != 0 || w.max != 0 || w.failed != 1 {
		t.Errorf("no pairs: %+v", w)
	}
	if med, hi := medianMax([]float64{4, 1, 3, 2}); med != 2 || hi != 4 {
		t.Errorf("medianMax: %v, %v", med, hi)
	}
}

// TestRunOnRealProcesses runs the whole command, small: five agents built
// from this tree, a loader of 2,000 locks, one agent killed, n1 and n2
// traced across it.
func TestRunOnRealProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds dlmnode and runs five agents: not in -short")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads the agents' CPU from /proc: Linux only")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not found: the test builds dlmnode from this tree")
	}
	dir, err := exec.Command(goBin, "list", "-m", "-f", "{{.Dir}}", "github.com/seed-a6839e30/dlm").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "dlmnode")
	build := exec.Command(goBin, "build", "-o", bin, "./cmd/dlmnode")
	build.Dir = strings.TrimSpace(string(dir))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	o := options{dlmnode: bin, out: t.TempDir(), locks: 2000, runs: 1, probes: 16, base: 500 * time.Millisecond, after: 200 * time.Millisecond, lease: 2 * time.Second, trace: 3 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, o, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(out.String())
	for _, want := range []string{
		`loaded 2000 in `,
		`, [1-9]\d* pairs, 0 failed;`,
		`recovery done \+\d+\.\d ms \(\d+ views\)`,
		`collections per survivor \[\d+ \d+ \d+ \d+\]`,
		`the five longest \(ms, from the commit\): \d+\.\d@[+-]\d+\(unix \d{19}\)`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, name := range []string{"n1.log", "n5.log", "loader.log"} {
		if _, err := os.Stat(filepath.Join(o.out, "run0", name)); err != nil {
			t.Errorf("log kept: %v", err)
		}
	}
	for _, name := range []string{"trace-n1.out", "trace-n2.out"} {
		b, err := os.ReadFile(filepath.Join(o.out, "run0", name))
		if err != nil || !bytes.HasPrefix(b, []byte("go 1.")) || len(b) < 1024 {
			t.Errorf("%s: %d bytes, %v; want an execution trace", name, len(b), err)
		}
	}
}
