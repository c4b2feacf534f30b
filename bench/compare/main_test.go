package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed-a6839e30/dlm/bench/report"
	"github.com/seed-a6839e30/dlm/bench/workload"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHelpDescribesEveryFlag(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"--help"}, &out, &out); code != 0 {
		t.Fatalf("exit %d", code)
	}
	_, fs, _ := parse(nil, &bytes.Buffer{})
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(out.String(), "-"+f.Name) {
			t.Errorf("--help does not mention -%s", f.Name)
		}
	})
	for _, want := range []string{"uncontended", "hot", "readers", "coupon", "bench/install-peers.sh", "redis, redlock, zookeeper, etcd"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help does not mention %q", want)
		}
	}
	// The defaults --help shows are the brief's.
	for _, want := range []string{`clients int` + "\n" + `    	concurrent clients per run, each with its own connections (default 64)`,
		"(default 10s)", "(default 100000)", "(default 1000)", "(default 50000)", `(default "docs/")`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

func TestBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"--systems", "consul"}, {"--workload", "cold"}, {"--clients", "0"},
		{"--duration", "1s", "--warmup", "2s"}, {"extra"},
	} {
		var out bytes.Buffer
		if code := run(args, &out, &out); code != 2 {
			t.Errorf("%v: exit %d, output %s", args, code, out.String())
		}
	}
}

// With no server binary on PATH every peer is skipped with one clear line
// (dlm runs in-process and needs none, so it is left out here).
func TestMissingServersAreSkipped(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var stdout, stderr bytes.Buffer
	code := run([]string{"--systems", "redis,redlock,etcd,zookeeper", "--duration", "200ms", "--warmup", "50ms", "--out", ""}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{
		"skipped redis: redis-server not found; run bench/install-peers.sh",
		"skipped redlock: redis-server not found; run bench/install-peers.sh",
		"skipped etcd: etcd not found; run bench/install-peers.sh",
		"skipped zookeeper: java not found; run bench/install-peers.sh",
		"no system ran",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

// A short real run against Redis writes the JSON, the table and the files.
func TestEndToEndRedis(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("skipped: redis-server not found; run bench/install-peers.sh")
	}
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run([]string{"--systems", "redis", "--workload", "hot,coupon", "--clients", "2",
		"--duration", "600ms", "--warmup", "100ms", "--rate", "1000", "--coupons", "10",
		"--json", "--out", dir, "--reference", "redis"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rep report.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
	}
	if len(rep.Results) != 2 || rep.Results[1].Workload != workload.Coupon || rep.Flags["clients"] != "2" || rep.Machine.CPUs == 0 {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains(stderr.String(), "cycles/s") {
		t.Errorf("no table on stderr with --json:\n%s", stderr.String())
	}
	for _, f := range []string{"compare.md", "compare.svg"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || len(b) == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestProgressPlainPrintsPhaseChanges(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, false)
	now := time.Unix(0, 0)
	p.now = func() time.Time { return now }
	p.start(1, 2)
	s := workload.Progress{System: "redis", Workload: workload.Hot, Phase: "warmup", Duration: 10 * time.Second}
	for i := range 10 {
		s.Elapsed = time.Duration(i) * 500 * time.Millisecond
		s.Cycles = uint64(i) * 100
		if i >= 2 {
			s.Phase = "measure"
		}
		p.update(s)
		now = now.Add(500 * time.Millisecond)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// warmup, measure, and one more after plainEvery (5 s) of measuring.
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "[1/2] redis hot: warmup") || !strings.Contains(lines[1], "measure 1.0s/10s, 200 cycles (200/s)") {
		t.Fatalf("lines:\n%s", out.String())
	}
}

func TestProgressTerminalRewritesOneLine(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, true)
	p.start(3, 4)
	p.update(workload.Progress{System: "etcd", Workload: workload.Readers, Phase: "measure", Elapsed: time.Second, Duration: 10 * time.Second, Cycles: 10})
	p.update(workload.Progress{System: "etcd", Workload: workload.Readers, Phase: "measure", Elapsed: 2 * time.Second, Duration: 10 * time.Second, Cycles: 30})
	p.println("skipped x: y")
	p.done()
	s := out.String()
	if strings.Count(s, "\n") != 1 || !strings.HasPrefix(s, "\r[3/4] etcd readers: measure 1.0s/10s") || !strings.Contains(s, "30 cycles (20/s)") || !strings.HasSuffix(s, "\rskipped x: y\n") {
		t.Fatalf("output %q", s)
	}
}

func TestCommandLineQuotes(t *testing.T) {
	_, fs, err := parse([]string{"--out", "", "--clients", "8", "--systems", "redis,etcd"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := commandLine(fs), "cd bench && go run ./compare --clients=8 --out='' --systems=redis,etcd"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
