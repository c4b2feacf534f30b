// Command run is the chaos harness: it builds dlmnode, starts a cluster of
// agents as processes, runs workload clients against it while nemeses kill,
// pause, restart and partition the agents, and checks what the clients saw.
//
//	go -C chaos/run run . [flags]
//
// As root it gives every agent its own network namespace on a bridge
// (inside a private network namespace of its own, which the kernel removes
// with it) and strikes the network nemeses too; otherwise it says so and
// runs the process nemeses only. It kills only the processes it started,
// by their handles, and removes what it made on exit, Ctrl-C or failure.
// It writes result.json, report.md, timeline.svg, the history's journal
// and the agents' logs into the output directory, and exits 1 on any
// violation or inconclusive check.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/nemesis"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/netlab"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/proc"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/report"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/verdict"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/workload"
	"github.com/seed-a6839e30/dlm/dlm"
)

type options struct {
	nodes, clients, embedded int
	duration                 time.Duration
	nemeses                  string
	seed                     uint64
	out                      string
	dlmnode                  string
	network                  string
	control                  bool
	settle                   time.Duration
}

func main() {
	if netlab.Inside() {
		if err := netlab.Enter(); err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			os.Exit(1)
		}
	}
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.nodes, "nodes", 5, "agents to start (3..9)")
	fs.IntVar(&o.clients, "clients", 10, "workload clients (register writers, mode mixers, counter incrementers by turns); election candidates, a reader and a probe per entry point come on top")
	fs.IntVar(&o.embedded, "embedded", 1, "cluster members embedded in the harness that clients also lock through")
	fs.DurationVar(&o.duration, "duration", 2*time.Minute, "how long to strike faults; the first round (every nemesis once) always completes")
	fs.StringVar(&o.nemeses, "nemesis", "all", "nemeses: all, process, network, or a comma-separated list of "+strings.Join(kindNames(), ", "))
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the schedule and the workloads (0: a random one, printed)")
	fs.StringVar(&o.out, "out", "", "output directory (default chaos-out/<UTC time> under the current directory)")
	fs.StringVar(&o.dlmnode, "dlmnode", "", "a dlmnode binary to use instead of building one from this repository")
	fs.StringVar(&o.network, "network", "auto", "network namespaces: auto (when root), on (fail without), off")
	fs.BoolVar(&o.control, "control", false, "the control experiment: agents run with their lock-delay off (an unsafe setting only the harness uses); the checkers must report violations")
	fs.DurationVar(&o.settle, "settle", 6*time.Second, "the recovery after each fault or heal left out of the settled availability")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go -C chaos/run run . [flags]\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.nodes < 3 || o.nodes > 9:
		return o, fmt.Errorf("-nodes %d: want 3..9", o.nodes)
	case o.clients < 1 || o.clients > 200:
		return o, fmt.Errorf("-clients %d: want 1..200", o.clients)
	case o.embedded < 0 || o.embedded >= o.nodes:
		return o, fmt.Errorf("-embedded %d: want 0..%d (fewer than the agents)", o.embedded, o.nodes-1)
	case o.duration < 0 || o.duration > 24*time.Hour:
		return o, fmt.Errorf("-duration %v: want 0..24h", o.duration)
	case o.network != "auto" && o.network != "on" && o.network != "off":
		return o, fmt.Errorf("-network %q: want auto, on or off", o.network)
	}
	if _, err := nemesis.ParseKinds(o.nemeses); err != nil {
		return o, fmt.Errorf("-nemesis: %w", err)
	}
	return o, nil
}

func kindNames() []string {
	var s []string
	for _, k := range nemesis.All() {
		s = append(s, string(k))
	}
	return s
}

func runMain(args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	}
	kinds, _ := nemesis.ParseKinds(o.nemeses)
	wantNet := false
	for _, k := range kinds {
		wantNet = wantNet || k.Network()
	}
	if o.network != "off" && !netlab.Inside() {
		avail := netlab.Available()
		switch {
		case avail == nil:
			code, err := netlab.Reexec()
			if err != nil {
				fmt.Fprintln(stderr, "chaos:", err)
			}
			return code
		case o.network == "on":
			fmt.Fprintln(stderr, "chaos: -network on:", avail)
			return 2
		case wantNet:
			fmt.Fprintf(stderr, "chaos: skipping the network nemeses (%s): %v\n", strings.Join(networkNames(kinds), ", "), avail)
		}
	}
	if o.seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		o.seed = binary.LittleEndian.Uint64(b[:]) >> 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, o, kinds, args, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 1
	}
	if !ok {
		return 1
	}
	return 0
}

func networkNames(kinds []nemesis.Kind) []string {
	var s []string
	for _, k := range kinds {
		if k.Network() {
			s = append(s, string(k))
		}
	}
	return s
}

// run is one chaos run; it reports whether the verdict is OK.
func run(ctx context.Context, o options, kinds []nemesis.Kind, args []string, stdout, stderr io.Writer) (bool, error) {
	started := time.Now()
	if o.out == "" {
		o.out = filepath.Join("chaos-out", started.UTC().Format("20060102T150405Z"))
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return false, err
	}
	logf, err := os.Create(filepath.Join(o.out, "harness.log"))
	if err != nil {
		return false, err
	}
	defer logf.Close()
	log := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	fmt.Fprintf(stdout, "chaos: seed %d, %d agents, output in %s\n", o.seed, o.nodes, o.out)

	bin := o.dlmnode
	if bin == "" {
		if bin, err = buildDlmnode(ctx, o.out); err != nil {
			return false, err
		}
	}
	if out, err := exec.Command(bin, "agent", "-h").CombinedOutput(); err != nil && !strings.Contains(string(out), "usage: dlmnode agent") {
		return false, fmt.Errorf("%s has no agent command (%v): the harness needs `dlmnode agent`", bin, err)
	}

	var idb [3]byte
	_, _ = rand.Read(idb[:])
	runID := "c" + hex.EncodeToString(idb[:])
	var lab *netlab.Lab
	if netlab.Inside() {
		if lab, err = netlab.New(runID, o.nodes, log); err != nil {
			return false, err
		}
	}
	sup := proc.NewSupervisor(log)
	var embedded []*dlm.Node
	cleanup := func() {
		for _, n := range embedded {
			_ = n.Close()
		}
		if err := sup.Close(); err != nil {
			fmt.Fprintln(stderr, "chaos: cleanup:", err)
		}
		if lab != nil {
			if err := lab.Close(); err != nil {
				fmt.Fprintln(stderr, "chaos: cleanup:", err)
			}
		}
	}
	defer cleanup()

	// Names and addresses: the agents n1..nN, the embedded members h1..hK.
	gossip, link, admin, err := agentAddrs(lab, o.nodes)
	if err != nil {
		return false, err
	}
	members := make([]string, 0, o.nodes+o.embedded)
	for i := range o.nodes {
		members = append(members, fmt.Sprintf("n%d", i+1))
	}
	host := "127.0.0.1"
	if lab != nil {
		host = lab.HubIP()
	}
	var embGossip []string
	for i := range o.embedded {
		members = append(members, fmt.Sprintf("h%d", i+1))
		ports, err := freePorts(1)
		if err != nil {
			return false, err
		}
		embGossip = append(embGossip, fmt.Sprintf("%s:%d", host, ports[0]))
	}
	seeds := append(append([]string(nil), gossip...), embGossip...)
	var extra []string
	if o.control {
		extra = append(extra, "--unsafe-no-lock-delay")
	}
	ag, err := startAgents(sup, agentSpec{bin: bin, n: o.nodes, members: members, seeds: seeds, dir: o.out, lab: lab, extra: extra},
		gossip, link, admin)
	if err != nil {
		return false, err
	}
	// The embedded members start with the agents: Start waits for a quorum.
	var emu sync.Mutex
	errc := make(chan error, o.embedded)
	for i := range o.embedded {
		go func() {
			cfg := dlm.DefaultConfig()
			cfg.Name, cfg.Members, cfg.Seeds = members[o.nodes+i], members, seeds
			cfg.GossipAddr, cfg.LinkAddr = embGossip[i], host+":0"
			cfg.Logger = log.With("member", cfg.Name)
			sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			n, err := dlm.Start(sctx, cfg)
			if err == nil {
				emu.Lock()
				embedded = append(embedded, n)
				emu.Unlock()
			}
			errc <- err
		}()
	}
	for range o.embedded {
		if err := <-errc; err != nil {
			return false, fmt.Errorf("embedded member: %w", err)
		}
	}
	if err := ag.waitReady(ctx); err != nil {
		return false, err
	}
	fmt.Fprintf(stdout, "chaos: %d agents ready%s\n", o.nodes, map[bool]string{true: " (each in its own network namespace)", false: " (loopback)"}[lab != nil])

	// The history, its journal, the workloads.
	jf, err := os.Create(filepath.Join(o.out, "history.jsonl"))
	if err != nil {
		return false, err
	}
	defer jf.Close()
	jw := &syncWriter{w: bufio.NewWriterSize(jf, 1<<20)}
	h := check.NewHistory(nil)
	h.Journal(jw)
	var svcs []workload.Service
	var lsOf0 *dlm.Lockspace
	for i, n := range embedded {
		ls, err := n.Lockspace("chaos")
		if err != nil {
			return false, err
		}
		if i == 0 {
			lsOf0 = ls
		}
		svcs = append(svcs, workload.Service{Node: n.Name(), Agent: -1, LS: workload.Embedded(ls)})
	}
	if len(svcs) == 0 {
		return false, errors.New("no way for clients into the cluster: the client protocol is not there yet, and -embedded is 0")
	}
	wcfg := workload.DefaultConfig()
	wcfg.Clients, wcfg.Seed = o.clients, o.seed
	if lsOf0 != nil {
		wcfg.MasterOf = func(res string) int {
			m := lsOf0.MasterOf(res)
			for i := range o.nodes {
				if members[i] == m {
					return i
				}
			}
			return -1
		}
	}
	wl := workload.New(h, svcs, wcfg)
	wctx, wstop := context.WithCancel(ctx)
	var wwg sync.WaitGroup
	wwg.Go(func() { wl.Run(wctx) })
	rec := newRecorder(h, ag.names, o.embedded)

	// Warm up, then the schedule.
	sleepCtx(ctx, 2*time.Second)
	steps := nemesis.Schedule(o.seed, kinds, o.duration, nemesis.DefaultTiming())
	var events []nemesis.Event
	deadline := started.Add(o.duration)
	for i, s := range steps {
		if ctx.Err() != nil || (i >= len(kinds) && time.Now().After(deadline)) {
			break
		}
		ev := nemesis.Strike(ctx, s, ag, wl, rec)
		events = append(events, ev)
		fmt.Fprintf(stdout, "chaos: %6.1fs %-19s %s %s\n", ev.At.Seconds(), ev.Kind, ev.Text, ev.Err)
		sleepCtx(ctx, s.Quiet)
	}
	// Let the last recovery finish, then stop the clients and read the
	// counter.
	sleepCtx(ctx, 5*time.Second)
	wstop()
	wwg.Wait()
	if err := wl.Finish(context.Background()); err != nil {
		fmt.Fprintln(stderr, "chaos: final counter read:", err)
	}
	end := h.Elapsed()
	jw.Flush()
	if err := h.JournalErr(); err != nil {
		return false, fmt.Errorf("journal: %w", err)
	}

	majority, settled := rec.Windows(end, o.settle)
	fmt.Fprintln(stdout, "chaos: checking")
	v := verdict.Judge(verdict.Input{History: h, Results: wl.Results(), Events: events, Majority: majority, Settled: settled,
		Probe:        check.AvailabilityOptions{Prefix: workload.ProbePrefix, Slot: 100 * time.Millisecond, Within: wcfg.ProbeWithin},
		CheckTimeout: 2 * time.Minute, Dir: o.out})
	journal, err := os.ReadFile(filepath.Join(o.out, "history.jsonl"))
	if err != nil {
		return false, err
	}
	self, err := verdict.SelfTest(journal, check.Options{Timeout: time.Minute})
	if err != nil {
		v.OK = false
		v.Violations = append(v.Violations, "[self-test] "+err.Error())
		self = "FAILED: " + err.Error()
	} else {
		self = "caught a planted overlap: " + self
	}
	var grants []time.Duration
	for _, r := range h.Records() {
		if r.Outcome == check.OK && (r.Kind == check.Acquire || r.Kind == check.Convert) && r.Return != check.Infinity {
			grants = append(grants, r.Return)
		}
	}
	rep := report.Run{Command: "go -C chaos/run run . " + strings.Join(args, " "), Seed: o.seed, Nodes: o.nodes,
		Clients: wl.Results().Clients, Network: lab != nil, Control: o.control, Started: started, Duration: end,
		Events: events, Verdict: v, SelfTest: self, Majority: majority, Grants: grants}
	if lab == nil {
		rep.Notes = append(rep.Notes, "network nemeses skipped: not root (or -network off)")
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("clients lock through %d embedded member(s) of the cluster: the client protocol is not in this tree yet", o.embedded))
	if err := report.Write(o.out, rep); err != nil {
		return false, err
	}
	fmt.Fprintln(stdout, "chaos: "+v.Summary())
	for _, x := range v.Violations {
		fmt.Fprintln(stdout, "  violation:", strings.ReplaceAll(x, "\n", "\n    "))
	}
	for _, x := range v.Inconclusive {
		fmt.Fprintln(stdout, "  inconclusive:", x)
	}
	fmt.Fprintf(stdout, "chaos: report in %s\n", filepath.Join(o.out, "report.md"))
	if o.control {
		// The control passes when the checkers caught it.
		if len(v.Violations) > 0 {
			fmt.Fprintln(stdout, "chaos: control caught")
			return true, nil
		}
		fmt.Fprintln(stdout, "chaos: control NOT caught")
		return false, nil
	}
	return v.OK, nil
}

// buildDlmnode builds cmd/dlmnode of this repository into dir.
func buildDlmnode(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/seed-a6839e30/dlm").Output()
	if err != nil {
		return "", fmt.Errorf("find the repository: %w", err)
	}
	root := strings.TrimSpace(string(out))
	bin, err := filepath.Abs(filepath.Join(dir, "dlmnode"))
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/dlmnode")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build dlmnode: %w\n%s", err, b)
	}
	return bin, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// syncWriter serializes writes and flushes to a buffered writer.
type syncWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

func (s *syncWriter) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.w.Flush()
}
