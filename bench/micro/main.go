package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seed-a6839e30/dlm/bench/host"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// env is what a run takes from outside the flags, so that tests can put a
// fake go command in place of the real one.
type env struct {
	goBin string // the go command, looked up in PATH if it has no slash
	tty   bool   // stderr is a terminal
	now   func() time.Time
}

func run(args []string, stdout, stderr io.Writer) int {
	return runWith(env{goBin: "go", tty: host.IsTerminal(stderr), now: time.Now}, args, stdout, stderr)
}

// options are the parsed flags.
type options struct {
	count         int
	benchtime     string
	slowBenchtime string
	packages      string
	filter        string
	slow          bool
	jsonOut       bool
	out           string

	filterRE *regexp.Regexp
}

// parse reads and checks the flags; --help prints usage and returns
// flag.ErrHelp.
func parse(args []string, stderr io.Writer) (*options, *flag.FlagSet, error) {
	o := &options{}
	fs := flag.NewFlagSet("micro", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(fs) }
	fs.IntVar(&o.count, "count", 3, "runs of each benchmark (go test -count); medians and ranges are over these")
	fs.StringVar(&o.benchtime, "benchtime", "1s", "go test -benchtime of each run: a duration (1s, 200ms) or an iteration count (100x)")
	fs.StringVar(&o.packages, "packages", "all", "comma-separated packages to run: all, or some of "+strings.Join(packageDirs(catalogue()), ", "))
	fs.StringVar(&o.filter, "filter", "", "regexp: run only the benchmarks whose name it matches (e.g. 'PingPong|RoundTrip'); a ratio's other side runs too")
	fs.BoolVar(&o.slow, "slow", false, "also run BenchmarkRecovery and BenchmarkFailoverTCP (./dlm/), which take tens of seconds each")
	fs.StringVar(&o.slowBenchtime, "slow-benchtime", "1x", "go test -benchtime of each run of the --slow benchmarks")
	fs.BoolVar(&o.jsonOut, "json", false, "print one JSON object to stdout (the table then goes to stderr)")
	fs.StringVar(&o.out, "out", "", `path of a markdown file to write the summary to; "" writes none`)
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	if fs.NArg() > 0 {
		return nil, fs, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if o.count < 1 {
		return nil, fs, fmt.Errorf("--count must be at least 1, got %d", o.count)
	}
	for _, bt := range []struct{ flag, value string }{{"benchtime", o.benchtime}, {"slow-benchtime", o.slowBenchtime}} {
		if err := checkBenchtime(bt.value); err != nil {
			return nil, fs, fmt.Errorf("--%s: %w", bt.flag, err)
		}
	}
	if o.filter != "" {
		re, err := regexp.Compile(o.filter)
		if err != nil {
			return nil, fs, fmt.Errorf("--filter: %w", err)
		}
		o.filterRE = re
	}
	return o, fs, nil
}

// checkBenchtime accepts what go test's -benchtime does, so that a typo is
// caught before the first package compiles rather than after.
func checkBenchtime(s string) error {
	if n, ok := strings.CutSuffix(s, "x"); ok {
		if i, err := strconv.Atoi(n); err == nil && i > 0 {
			return nil
		}
	} else if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return nil
	}
	return fmt.Errorf("want a positive duration such as 1s or an iteration count such as 100x, got %q", s)
}

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, `Usage (in bench/, its own Go module): go run ./micro [flags]

Runs the microbenchmarks of the lower layers (./master/, ./transport/,
./transport/wire/, ./dlm/), one go test per package, and prints one summary:
for each benchmark and unit the median and range of the runs, its target and
whether the median meets it. Ratios (LinkRoundTrip / TCPPingPong,
RemoteLockUnlock / TCPPingPong) divide figures of the same go test run, run i
by run i, because the TCP floor moves with the machine's load.

Exit status: 0 when every selected benchmark ran (targets not met are in the
summary, not the status), 1 when a go test failed or a benchmark is missing
from its output, 2 for bad flags, 130 when interrupted.

Flags:
`)
	fs.PrintDefaults()
}

func runWith(e env, args []string, stdout, stderr io.Writer) int {
	o, fs, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "micro: %v\n", err)
		return 2
	}
	sel, err := selectBenchmarks(catalogue(), o.packages, o.filterRE, o.slow)
	if err != nil {
		fmt.Fprintf(stderr, "micro: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal kills micro at once; on Linux the kernel then kills the go command (Pdeathsig)
	}()
	p := newProgress(stderr, e.tty)
	r := &runner{goBin: e.goBin, p: p}
	goVersion, err := r.locate(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "micro: %v\n", err)
		return 1
	}
	rep := &Report{
		Command:   commandLine(fs),
		Started:   e.now(),
		Machine:   host.Describe(),
		LoadStart: host.LoadAverage(),
		Count:     o.count,
		Benchtime: o.benchtime,
	}
	if o.slow {
		rep.SlowBenchtime = o.slowBenchtime
	}
	if goVersion != "" {
		rep.Machine.GoVersion = goVersion
	}
	cmds := plan(sel, o.count, o.benchtime, o.slowBenchtime)
	var results []result
	failed := false
	for i, c := range cmds {
		if ctx.Err() != nil {
			break
		}
		rep.Commands = append(rep.Commands, c.String())
		res, problems, err := r.run(ctx, fmt.Sprintf("[%d/%d] ./%s/", i+1, len(cmds), c.Dir), c, o.count)
		results = append(results, res...)
		rep.Problems = append(rep.Problems, problems...)
		if err != nil && ctx.Err() == nil {
			failed = true
			rep.Problems = append(rep.Problems, err.Error())
		}
	}
	p.Done()
	rep.LoadEnd = host.LoadAverage()
	rep.Benchmarks, rep.Ratios = summarise(sel, r.module, results)
	code := 0
	switch {
	case ctx.Err() != nil:
		rep.Problems = append(rep.Problems, "interrupted: the benchmarks that had not run are missing")
		code = 130
	case failed || len(missingBenchmarks(rep)) > 0:
		code = 1
	}
	if err := write(rep, o, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "micro: %v\n", err)
		code = max(code, 1)
	}
	return code
}

// write prints the table, and the JSON and the markdown file if asked for.
func write(rep *Report, o *options, stdout, stderr io.Writer) error {
	table := stdout
	if o.jsonOut {
		table = stderr
		if err := WriteJSON(stdout, rep); err != nil {
			return err
		}
	}
	if err := WriteText(table, rep); err != nil {
		return err
	}
	if o.out == "" {
		return nil
	}
	if dir := filepath.Dir(o.out); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	var md strings.Builder
	if err := WriteMarkdown(&md, rep); err != nil {
		return err
	}
	return os.WriteFile(o.out, []byte(md.String()), 0o644)
}

// commandLine reconstructs the command for the report, with every flag that
// was set.
func commandLine(fs *flag.FlagSet) string {
	parts := []string{"cd bench && go run ./micro"}
	fs.Visit(func(f *flag.Flag) {
		parts = append(parts, "--"+f.Name+"="+shellJoin([]string{f.Value.String()}))
	})
	return strings.Join(parts, " ")
}
