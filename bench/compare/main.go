package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/seed-a6839e30/dlm/bench/host"
	"github.com/seed-a6839e30/dlm/bench/lockbench"
	"github.com/seed-a6839e30/dlm/bench/report"
	"github.com/seed-a6839e30/dlm/bench/systems"
	"github.com/seed-a6839e30/dlm/bench/workload"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the parsed flags.
type options struct {
	systems   string
	workloads string
	jsonOut   bool
	out       string
	reference string
	logLevel  string
	tmpDir    string
	cpuProf   string
	ready     time.Duration
	wl        workload.Config
}

// parse reads the flags; --help prints usage and returns flag.ErrHelp.
func parse(args []string, stderr io.Writer) (*options, *flag.FlagSet, error) {
	o := &options{wl: workload.DefaultConfig()}
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(fs) }
	fs.StringVar(&o.systems, "systems", "all", "comma-separated systems to run: all, or some of "+strings.Join(systems.Names(), ", "))
	fs.StringVar(&o.workloads, "workload", "all", "comma-separated workloads: all, or some of uncontended, hot, readers, coupon")
	fs.IntVar(&o.wl.Clients, "clients", o.wl.Clients, "concurrent clients per run, each with its own connections")
	fs.DurationVar(&o.wl.Duration, "duration", o.wl.Duration, "length of each system×workload run, warm-up included")
	fs.DurationVar(&o.wl.Warmup, "warmup", o.wl.Warmup, "unmeasured start of each run; must be shorter than --duration")
	fs.BoolVar(&o.jsonOut, "json", false, "print one JSON object to stdout (the table then goes to stderr)")
	fs.StringVar(&o.out, "out", "docs/", `directory for compare.md and compare.svg; "" writes neither`)
	fs.StringVar(&o.reference, "reference", "", `system to compute ratios against (default "dlm" when it runs, else none)`)
	fs.IntVar(&o.wl.Resources, "resources", o.wl.Resources, "uncontended: number of resources picked from at random")
	fs.IntVar(&o.wl.SharedResources, "shared-resources", o.wl.SharedResources, "readers: number of resources")
	fs.Float64Var(&o.wl.SharedFraction, "shared-fraction", o.wl.SharedFraction, "readers: fraction of requests that are shared")
	fs.IntVar(&o.wl.Coupons, "coupons", o.wl.Coupons, "coupon: coupons in the event")
	fs.Float64Var(&o.wl.Rate, "rate", o.wl.Rate, "coupon: requests per second offered, in total over all clients")
	fs.DurationVar(&o.wl.CouponWait, "coupon-wait", o.wl.CouponWait, "coupon: how long a request waits for the lock before answering busy")
	fs.DurationVar(&o.wl.TTL, "ttl", o.wl.TTL, "grant lifetime of lease-based systems (redis, redlock) in uncontended, hot, readers")
	fs.DurationVar(&o.wl.CouponTTL, "coupon-ttl", o.wl.CouponTTL, "grant lifetime of lease-based systems in coupon; short, as in the seed")
	fs.DurationVar(&o.wl.HoldPause, "hold-pause", 0, "fault injection, coupon: how long a holder stalls between its read and its write")
	fs.Float64Var(&o.wl.HoldPauseProb, "hold-pause-prob", 0, "fault injection, coupon: probability that a request stalls (0: never)")
	fs.Uint64Var(&o.wl.Seed, "seed", o.wl.Seed, "seed for resource and mode choices")
	fs.IntVar(&o.wl.MaxOpsPerClient, "max-ops", o.wl.MaxOpsPerClient, "bound on cycles (or coupon requests) per client per run")
	fs.DurationVar(&o.wl.DrainTimeout, "drain-timeout", o.wl.DrainTimeout, "how long to wait for clients after a run's deadline before closing them")
	fs.DurationVar(&o.ready, "ready-timeout", lockbench.DefaultEnv().ReadyTimeout, "how long to wait for a system's servers to serve")
	fs.StringVar(&o.tmpDir, "tmpdir", "", "parent of the servers' temporary directories (default: the OS's)")
	fs.StringVar(&o.logLevel, "log-level", "warn", "harness log level on stderr: debug, info, warn, error")
	fs.StringVar(&o.cpuProf, "cpuprofile", "", "write a CPU profile of the harness process (clients, and the dlm nodes it embeds) to this file")
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	if fs.NArg() > 0 {
		return nil, fs, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return o, fs, o.wl.Validate()
}

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, `Usage (in bench/, its own Go module): go run ./compare [flags]

Measures lock services side by side on this machine: for each system it
starts the servers on 127.0.0.1 (free ports, temporary directories), runs
each workload for --duration with --clients clients, then stops them.

Workloads:
  uncontended  exclusive lock+unlock on a random one of --resources resources
  hot          every client locks and unlocks one resource
  readers      --shared-fraction shared, the rest exclusive, on
               --shared-resources resources (systems without a shared mode
               serve shared requests as exclusive, and the output says so)
  coupon       --coupons coupons, --rate requests/s offered open-loop; each
               request locks the event, reads the count, issues one if any
               is left; the store refuses stale fencing tokens

Peers are installed with bench/install-peers.sh (Debian packages); a system
whose server is missing is skipped with a message.

Flags:
`)
	fs.PrintDefaults()
}

func run(args []string, stdout, stderr io.Writer) int {
	o, fs, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return 2
	}
	entries, kinds, err := o.selection()
	if err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.cpuProf != "" {
		stopProf, err := startCPUProfile(o.cpuProf)
		if err != nil {
			fmt.Fprintf(stderr, "compare: %v\n", err)
			return 2
		}
		defer stopProf()
	}
	h := newHarness(o, fs, stderr)
	go func() {
		<-ctx.Done()
		stop() // a second signal now kills the harness; Pdeathsig takes the servers
	}()
	code := h.runAll(ctx, entries, kinds)
	if err := h.write(stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "compare: %v\n", err)
		code = max(code, 1)
	}
	return code
}

// startCPUProfile starts profiling into path; the returned func stops it.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// selection resolves --systems and --workload.
func (o *options) selection() ([]systems.Entry, []workload.Kind, error) {
	entries, err := systems.Select(o.systems)
	if err != nil {
		return nil, nil, err
	}
	kinds, err := workload.ParseKinds(o.workloads)
	if err != nil {
		return nil, nil, err
	}
	return entries, kinds, nil
}

// harness runs the selected systems and collects the report.
type harness struct {
	o        *options
	logger   *slog.Logger
	progress *progress
	rep      report.Report
	failed   bool
}

func newHarness(o *options, fs *flag.FlagSet, stderr io.Writer) *harness {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		level = slog.LevelWarn
	}
	h := &harness{
		o:        o,
		logger:   slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
		progress: newProgress(stderr, host.IsTerminal(stderr)),
	}
	h.rep = report.Report{
		Command: commandLine(fs),
		Started: time.Now(),
		Machine: host.Describe(),
		Flags:   flagValues(fs),
	}
	h.o.wl.Logger = h.logger
	h.o.wl.Progress = h.progress.update
	return h
}

// runAll runs every system in turn and returns the exit code.
func (h *harness) runAll(ctx context.Context, entries []systems.Entry, kinds []workload.Kind) int {
	total := len(entries) * len(kinds)
	step := 0
	for _, e := range entries {
		if ctx.Err() != nil {
			break
		}
		h.runSystem(ctx, e, kinds, &step, total)
	}
	h.progress.done()
	var names []string
	for _, s := range h.rep.Systems {
		names = append(names, s.Name)
	}
	h.rep.Reference = h.o.reference
	if h.rep.Reference == "" {
		h.rep.Reference = report.DefaultReference(names)
	}
	h.rep.Ratios = report.ComputeRatios(h.rep.Results, h.rep.Reference)
	switch {
	case ctx.Err() != nil:
		h.progress.println("compare: interrupted; servers stopped")
		return 130
	case h.failed:
		return 1
	case len(h.rep.Results) == 0:
		h.progress.println("compare: no system ran")
		return 1
	}
	return 0
}

// runSystem starts one system, runs the workloads and always stops it.
func (h *harness) runSystem(ctx context.Context, e systems.Entry, kinds []workload.Kind, step *int, total int) {
	env := lockbench.DefaultEnv()
	env.Logger, env.TempDir, env.ReadyTimeout = h.logger.With("system", e.Name), h.o.tmpDir, h.o.ready
	sys, err := e.New(env)
	if err != nil {
		h.fail(e.Name, "", err)
		return
	}
	defer func() {
		if err := sys.Close(); err != nil {
			h.logger.Warn("stopping servers", "system", e.Name, "err", err)
		}
	}()
	h.progress.println(fmt.Sprintf("starting %s…", e.Name))
	if err := sys.Start(ctx); err != nil {
		if errors.Is(err, lockbench.ErrUnavailable) {
			h.progress.println(fmt.Sprintf("skipped %s: %v", e.Name, err))
			h.rep.Skipped = append(h.rep.Skipped, report.Skipped{System: e.Name, Reason: err.Error()})
			*step += len(kinds)
			return
		}
		h.fail(e.Name, "", err)
		return
	}
	h.rep.Systems = append(h.rep.Systems, sys.Info())
	for _, k := range kinds {
		*step++
		if ctx.Err() != nil {
			return
		}
		h.progress.start(*step, total)
		res, err := workload.Run(ctx, sys, k, h.o.wl)
		if err != nil && ctx.Err() == nil {
			h.fail(e.Name, k, err)
		}
		if err == nil || errors.Is(err, workload.ErrDrain) {
			h.rep.Results = append(h.rep.Results, res)
		}
	}
}

func (h *harness) fail(system string, k workload.Kind, err error) {
	h.failed = true
	msg := fmt.Sprintf("compare: %s", system)
	if k != "" {
		msg += " " + string(k)
	}
	h.progress.println(fmt.Sprintf("%s: %v", msg, err))
}

// write prints the table and JSON and writes the files.
func (h *harness) write(stdout, stderr io.Writer) error {
	table := stdout
	if h.o.jsonOut {
		table = stderr
		if err := report.JSON(stdout, &h.rep); err != nil {
			return err
		}
	}
	if len(h.rep.Results) == 0 {
		return nil
	}
	if err := report.Text(table, &h.rep); err != nil {
		return err
	}
	if h.o.out == "" {
		return nil
	}
	return writeFiles(h.o.out, &h.rep)
}

// writeFiles writes compare.md and compare.svg into dir.
func writeFiles(dir string, rep *report.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var md, svg strings.Builder
	if err := report.Markdown(&md, rep, "compare.svg"); err != nil {
		return err
	}
	if err := report.SVG(&svg, rep); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "compare.md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "compare.svg"), []byte(svg.String()), 0o644)
}

// commandLine reconstructs the command for the report, quoting arguments
// that need it.
func commandLine(fs *flag.FlagSet) string {
	parts := []string{"cd bench && go run ./compare"}
	fs.Visit(func(f *flag.Flag) {
		parts = append(parts, "--"+f.Name+"="+shellQuote(f.Value.String()))
	})
	return strings.Join(parts, " ")
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// flagValues records every flag's effective value.
func flagValues(fs *flag.FlagSet) map[string]string {
	m := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { m[f.Name] = f.Value.String() })
	return m
}
