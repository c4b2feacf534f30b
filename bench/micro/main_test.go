package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
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
	for _, want := range []string{"(default 3)", `(default "1s")`, `(default "1x")`, `(default "all")`,
		"master, transport, transport/wire, dlm", "same go test run", "Exit status"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--count", "0"}, "--count must be at least 1"},
		{[]string{"--count", "three"}, `invalid value "three" for flag -count`},
		{[]string{"--benchtime", "fast"}, `--benchtime: want a positive duration such as 1s or an iteration count such as 100x, got "fast"`},
		{[]string{"--benchtime", "0x"}, "--benchtime: want a positive duration"},
		{[]string{"--benchtime", "-1s"}, "--benchtime: want a positive duration"},
		{[]string{"--slow-benchtime", "1"}, "--slow-benchtime: want a positive duration"},
		{[]string{"--filter", "("}, "--filter: error parsing regexp"},
		{[]string{"--filter", "NoSuchBenchmark"}, "no benchmark matches --packages and --filter"},
		{[]string{"--filter", "Recovery"}, "only slow benchmarks; add --slow"},
		{[]string{"--packages", "master,kernel"}, `--packages: unknown package "kernel"; choose all, or some of master, transport, transport/wire, dlm`},
		{[]string{"--nope"}, "flag provided but not defined: -nope"},
		{[]string{"extra"}, "unexpected arguments: extra"},
	} {
		var stdout, stderr bytes.Buffer
		code := runWith(env{goBin: "/nonexistent/go", now: time.Now}, tc.args, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.msg) || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q", tc.args, code, stderr.String(), tc.msg)
		}
	}
}

func TestSelectBenchmarks(t *testing.T) {
	names := func(sel []pkgSpec) string {
		var s []string
		for _, p := range sel {
			for _, b := range p.Benches {
				s = append(s, p.Dir+":"+strings.TrimPrefix(b.Name, "Benchmark"))
			}
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		packages, filter string
		slow             bool
		want             string
		ratios           int
	}{
		{"./transport/wire/", "", false, "transport/wire:LockReportCodec", 0},
		// A ratio's numerator brings its floor, and the floor its numerator.
		{"all", "LinkRoundTrip", false, "transport:TCPPingPong transport:LinkRoundTrip", 1},
		{"transport, dlm", "TCPPingPong", false, "transport:TCPPingPong transport:LinkRoundTrip dlm:TCPPingPong dlm:RemoteLockUnlock", 2},
		{"dlm/", "Recovery/locks=100000$|Failover", true, "dlm:Recovery/locks=100000 dlm:FailoverTCP", 0},
		{"master", "", true, "master:UncontendedLockUnlock master:ContendedHandoff master:MillionLocks", 0},
	} {
		var re *regexp.Regexp
		if tc.filter != "" {
			re = regexp.MustCompile(tc.filter)
		}
		sel, err := selectBenchmarks(catalogue(), tc.packages, re, tc.slow)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		ratios := 0
		for _, p := range sel {
			ratios += len(p.Ratios)
		}
		if got := names(sel); got != tc.want || ratios != tc.ratios {
			t.Errorf("%+v: got %q and %d ratios", tc, got, ratios)
		}
	}
	if sel, _ := selectBenchmarks(catalogue(), "all", nil, false); strings.Contains(names(sel), "Recovery") || strings.Contains(names(sel), "Failover") {
		t.Errorf("slow benchmarks selected without --slow: %s", names(sel))
	}
}

func TestPlan(t *testing.T) {
	sel, err := selectBenchmarks(catalogue(), "transport/wire,dlm", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range plan(sel, 5, "200ms", "2x") {
		got = append(got, c.String())
	}
	want := []string{
		`go test -run '^$' -bench '^(BenchmarkLockReportCodec)$' -benchtime 200ms -count 5 -benchmem ./transport/wire/`,
		`go test -run '^$' -bench '^(BenchmarkTCPPingPong|BenchmarkLocalLockUnlock|BenchmarkRemoteLockUnlock|BenchmarkClusterThroughput)$' -benchtime 200ms -count 5 -benchmem ./dlm/`,
		// A two-level pattern would hold FailoverTCP back: go test runs no
		// benchmark that only matches the first level and has no second.
		`go test -run '^$' -bench '^(BenchmarkFailoverTCP)$' -benchtime 2x -count 5 -benchmem ./dlm/`,
		`go test -run '^$' -bench '^(BenchmarkRecovery)$/^(locks=10000|locks=100000|locks=1000000)$' -benchtime 2x -count 5 -benchmem ./dlm/`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"go", "test", "-bench", "^(A|B)$", "", "it's", "./dlm/", "locks=1"})
	if want := `go test -bench '^(A|B)$' '' 'it'\''s' ./dlm/ locks=1`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	_, fs, err := parse([]string{"--count", "1", "--filter", "Ping|Round", "--json"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := commandLine(fs), `cd bench && go run ./micro --count=1 --filter='Ping|Round' --json=true`; got != want {
		t.Errorf("commandLine %q, want %q", got, want)
	}
}

// fakeGo writes a go command that answers go env from gomod and go test by
// printing dir/<package>.txt (./transport/wire/ -> _transport_wire_.txt),
// then, if <package>.sleep exists, starting a child that sleeps (as go test
// starts a test binary) and waiting for it, and exiting with the status in
// <package>.exit, if any. It records each call, and the child's pid in
// dir/child.
func fakeGo(t *testing.T, dir string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the fake go command is a shell script")
	}
	gomod := filepath.Join(dir, "go.mod")
	if err := os.WriteFile(gomod, []byte("module "+module+"\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
if [ "$1" = env ]; then printf '%s\ngo1.99.0\n' '` + gomod + `'; exit 0; fi
echo "$*" >> '` + dir + `/calls'
for a; do last=$a; done
f='` + dir + `'/$(printf %s "$last" | tr -d . | tr / _)
[ -f "$f.txt" ] && cat "$f.txt"
if [ -f "$f.sleep" ]; then sleep 60 & echo $! > '` + dir + `/child'; wait; fi
[ -f "$f.exit" ] && exit "$(cat "$f.exit")"
exit 0
`
	bin := filepath.Join(dir, "go")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// splitSample writes each package's part of a sample as the fake go's
// output for that package.
func splitSample(t *testing.T, sample, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", sample))
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range strings.Split(string(b), "goos:")[1:] {
		part = "goos:" + part
		pkg := regexp.MustCompile(`pkg: \S+/dlm/(\S+)`).FindStringSubmatch(part)[1]
		name := "_" + strings.ReplaceAll(pkg, "/", "_") + "_"
		if err := os.WriteFile(filepath.Join(dir, name+".txt"), []byte(part), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRunWithFakeGo(t *testing.T) {
	dir := t.TempDir()
	goBin := fakeGo(t, dir)
	splitSample(t, "sample.txt", dir)
	out := filepath.Join(dir, "out", "micro.md")
	var stdout, stderr bytes.Buffer
	code := runWith(env{goBin: goBin, now: time.Now}, []string{"--json", "--out", out}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
	}
	if len(rep.Benchmarks) != 12 || len(rep.Commands) != 4 || rep.Machine.GoVersion != "go1.99.0" || rep.Count != 3 || len(rep.Problems) != 0 {
		t.Errorf("report %+v", rep)
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
	if n := strings.Count(string(calls), "\n"); n != 4 || !strings.Contains(string(calls), "test -run ^$ -bench ^(BenchmarkLockReportCodec)$ -benchtime 1s -count 3 -benchmem ./transport/wire/") {
		t.Errorf("go was called %d times:\n%s", n, calls)
	}
	// The table goes to stderr with --json, after a progress line per run.
	for _, want := range []string{
		"[2/4] ./transport/ BenchmarkLinkPipelined-2 run 2/3: 798.0 ns/op",
		"ratio LinkRoundTrip / TCPPingPong", "targets: 7 met, 2 not met, 0 missing",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	md, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(md), "| `./master/` | `BenchmarkMillionLocks` |") || !strings.Contains(string(md), "go1.99.0") {
		t.Errorf("markdown: %v\n%s", err, md)
	}
}

// A failed go test and a benchmark absent from the output make the status
// 1; the summary still covers what ran.
func TestRunWithFakeGoFailure(t *testing.T) {
	dir := t.TempDir()
	goBin := fakeGo(t, dir)
	splitSample(t, "broken.txt", dir)
	if err := os.WriteFile(filepath.Join(dir, "_dlm_.exit"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := runWith(env{goBin: goBin, now: time.Now}, []string{"--packages", "transport,dlm"}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	for _, want := range []string{
		"BenchmarkRemoteLockUnlock                                                          0             missing",
		"targets: 3 met, 1 not met, 2 missing; not in the output: ./dlm/ BenchmarkRemoteLockUnlock",
		"problem: ./transport/:10: parsing iteration count",
		"problem: go test -run '^$' -bench '^(BenchmarkTCPPingPong|BenchmarkLocalLockUnlock|BenchmarkRemoteLockUnlock|BenchmarkClusterThroughput)$' -benchtime 1s -count 3 -benchmem ./dlm/: exit status 1; its last lines:",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "[2/2] ./dlm/ --- FAIL: BenchmarkRemoteLockUnlock") {
		t.Errorf("the failure is not in the progress:\n%s", stderr.String())
	}
}

func TestNotInModule(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "go")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho /dev/null; echo go1.99.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := runWith(env{goBin: bin, now: time.Now}, nil, &bytes.Buffer{}, &stderr); code != 1 || !strings.Contains(stderr.String(), "not inside a Go module") {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
}

// waitForChild returns the pid of the fake go test's child once it runs.
func waitForChild(t *testing.T, dir string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(dir, "child"))
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return pid
		}
	}
	t.Fatal("the fake go test did not start its child")
	return 0
}

// waitGone fails unless pid exits soon. A zombie counts as gone: reaping
// the orphan is up to whichever process adopted it.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if _, after, ok := strings.Cut(string(b), ") "); ok && strings.HasPrefix(after, "Z") {
				return
			}
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("go test's child outlived the cancel")
		}
	}
}

// Cancelling stops go test and what it started: the whole process group.
func TestRunnerCancelStopsTheGroup(t *testing.T) {
	dir := t.TempDir()
	goBin := fakeGo(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "_x_.txt"), []byte("BenchmarkA-2   \t"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "_x_.sleep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var progressOut bytes.Buffer
	r := &runner{goBin: goBin, p: newProgress(&progressOut, true)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := r.locate(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := r.run(ctx, "[1/1] ./x/", command{Dir: "x", Args: []string{"test", "./x/"}}, 1)
		done <- err
	}()
	child := waitForChild(t, dir)
	cancel()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	waitGone(t, child)
	if !strings.Contains(progressOut.String(), "[1/1] ./x/ BenchmarkA-2 run 1/1…") {
		t.Errorf("no status line for the running benchmark: %q", progressOut.String())
	}
}

// Ctrl-C stops the run, kills go test's group, and still prints the summary
// of what had finished, with exit status 130.
func TestInterruptPrintsWhatRan(t *testing.T) {
	dir := t.TempDir()
	goBin := fakeGo(t, dir)
	splitSample(t, "sample.txt", dir)
	if err := os.WriteFile(filepath.Join(dir, "_transport_.sleep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runWith(env{goBin: goBin, now: time.Now}, []string{"--packages", "master,transport,dlm"}, &stdout, &stderr)
	}()
	// The child runs only once runWith is past signal.NotifyContext, so the
	// signal cannot reach the default handler and end the test binary.
	child := waitForChild(t, dir)
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var code int
	select {
	case code = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after SIGINT")
	}
	waitGone(t, child)
	if code != 130 {
		t.Errorf("exit %d, want 130", code)
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
	if strings.Contains(string(calls), "./dlm/") {
		t.Errorf("the package after the interrupted one ran:\n%s", calls)
	}
	// What the interrupted go test printed before the signal still counts.
	for _, want := range []string{"231.4", "ratio LinkRoundTrip / TCPPingPong     × ns/op             2.282", "problem: interrupted",
		"not in the output: ./dlm/ BenchmarkTCPPingPong, ./dlm/ BenchmarkLocalLockUnlock"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestProgressPlainPrintsFinishedRuns(t *testing.T) {
	var out bytes.Buffer
	w := newWatcher("[1/2] ./master/", 2, newProgress(&out, false))
	for _, chunk := range []string{
		"goos: linux\npkg: m/master\nBenchmarkA-2   \t", "  100\t  120.5 ns/op\t 0 B/op\n",
		"BenchmarkA-2   \t  100\t  130.5 ns/op\nBenchmarkB-2 \t--- FAIL: BenchmarkB-2\n    x_test.go:1: boom\nFAIL\n",
	} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	want := "[1/2] ./master/ BenchmarkA-2 run 1/2: 120.5 ns/op\n" +
		"[1/2] ./master/ BenchmarkA-2 run 2/2: 130.5 ns/op\n" +
		"[1/2] ./master/ --- FAIL: BenchmarkB-2\n"
	if out.String() != want {
		t.Errorf("got %q\nwant %q", out.String(), want)
	}
	if !strings.HasPrefix(w.all.String(), "goos: linux\n") || !strings.HasSuffix(w.tail(2), "boom\nFAIL") {
		t.Errorf("output kept: %q", w.all.String())
	}
}

func TestProgressTerminalRewritesOneLine(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, true)
	w := newWatcher("[3/4] ./dlm/", 3, p)
	w.Write([]byte("BenchmarkTCPPingPong-2 \t"))
	w.Write([]byte(" 1000\t 5020 ns/op\nBenchmarkTCPPingPong-2 \t"))
	p.Println("note")
	p.Done()
	s := out.String()
	if strings.Count(s, "\n") != 1 || !strings.HasPrefix(s, "\r[3/4] ./dlm/ BenchmarkTCPPingPong-2 run 1/3…") ||
		!strings.Contains(s, "run 2/3… (last: BenchmarkTCPPingPong-2 5020 ns/op)") || !strings.HasSuffix(s, "\rnote\n") {
		t.Errorf("output %q", s)
	}
}

// From the bench module, locate finds the library's module one directory
// up; a bench module outside the library's directory is an error.
func TestLocateFromBenchModule(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the fake go command is a shell script")
	}
	for _, tc := range []struct {
		name, parent string
		ok           bool
	}{
		{"inside the library", module, true},
		{"elsewhere", "example.com/other", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "bench"), 0o755); err != nil {
				t.Fatal(err)
			}
			write := func(path, content string) {
				if err := os.WriteFile(filepath.Join(dir, path), []byte(content), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			write("go.mod", "module "+tc.parent+"\n")
			write("bench/go.mod", "module "+module+"/bench\n")
			write("go", "#!/bin/sh\nprintf '%s\\ngo1.99.0\\n' '"+filepath.Join(dir, "bench", "go.mod")+"'\n")
			r := runner{goBin: filepath.Join(dir, "go")}
			v, err := r.locate(context.Background())
			if !tc.ok {
				if err == nil {
					t.Fatalf("no error; module %q in %s", r.module, r.dir)
				}
				return
			}
			if err != nil || v != "go1.99.0" || r.module != module || r.dir != dir {
				t.Fatalf("locate: %q, %v; module %q in %s; want %s in %s", v, err, r.module, r.dir, module, dir)
			}
		})
	}
}

func TestModulePath(t *testing.T) {
	got, err := modulePath("../../go.mod")
	if err != nil || got != module {
		t.Errorf("modulePath = %q, %v; want %q", got, err, module)
	}
	if _, err := modulePath(filepath.Join(t.TempDir(), "go.mod")); err == nil {
		t.Error("no error for a missing go.mod")
	}
}

// One real run, as small as go test allows: one package, one benchmark, one
// iteration. It compiles the package's tests, so it stays out of -short.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: builds and runs a real benchmark")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command in PATH")
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"--packages", "transport/wire", "--filter", "LockReportCodec", "--benchtime", "1x", "--count", "1", "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
	}
	if len(rep.Benchmarks) != 1 || rep.Benchmarks[0].Runs != 1 || rep.Benchmarks[0].metric("ns/lock") == nil || rep.Machine.CPUs == 0 {
		t.Errorf("report %+v", rep)
	}
}
