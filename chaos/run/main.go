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
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
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
	"github.com/seed-a6839e30/dlm/internal/seam"
)

type options struct {
	nodes, clients, embedded int
	workers, rounds          int
	// clientWorkers run clientClients workload clients through the
	// agents' client ports, in sessions sessions each.
	clientWorkers, clientClients, sessions int
	clientDrift                            float64
	duration                               time.Duration
	nemeses                                string
	seed                                   uint64
	out                                    string
	dlmnode                                string
	network                                string
	control                                bool
	settle, lease                          time.Duration
	pace                                   string
	// recheck is an output directory to judge again, without a run.
	recheck string
}

func main() {
	if spec := os.Getenv(workerEnv); spec != "" {
		os.Exit(runWorker(spec))
	}
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
	fs.IntVar(&o.clients, "clients", 10, "workload clients (register writers, mode mixers, counter incrementers by turns); election candidates, a reader and four probes per entry point come on top")
	fs.IntVar(&o.workers, "workers", 2, "worker processes that run the clients, each through a cluster member of its own (in its own network namespace as root)")
	fs.IntVar(&o.clientWorkers, "client-workers", 0, "worker processes whose clients lock through the agents' client ports (package client), not through a member of their own (0 by default: see docs/NEMESIS.md for what they find)")
	fs.IntVar(&o.clientClients, "client-clients", 10, "workload clients of the client workers, spread over them like -clients (register writers, long holders and mode mixers: the counter stays with the member workers); each client worker runs an election candidate and four probes per session on top")
	fs.IntVar(&o.sessions, "sessions", 2, "client sessions per client worker: session k of worker j dials every agent, starting with a home agent of its own")
	fs.Float64Var(&o.clientDrift, "client-drift", 0.05, "the client workers' assumed clock drift (client.Config.ClockDrift): they stop trusting their locks a drift's share of the session TTL (twice over) before their agent ends the session, a margin also against the scheduling delays of a loaded machine")
	fs.IntVar(&o.embedded, "embedded", 1, "cluster members in the harness itself (never faulted): one keeps the counter's value alive and reads it at the end, and each probes")
	fs.IntVar(&o.rounds, "rounds", 1, "rounds (every nemesis once, in a shuffled order) struck at least, however short -duration")
	fs.DurationVar(&o.duration, "duration", 2*time.Minute, "how long to strike faults; the first round (every nemesis once) always completes")
	fs.StringVar(&o.nemeses, "nemesis", "all", "nemeses: all, process, network, or a comma-separated list of "+strings.Join(kindNames(), ", "))
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the schedule and the workloads (0: a random one, printed)")
	fs.StringVar(&o.out, "out", "", "output directory (default chaos-out/<UTC time> under the current directory)")
	fs.StringVar(&o.dlmnode, "dlmnode", "", "a dlmnode binary to use instead of building one from this repository")
	fs.StringVar(&o.network, "network", "auto", "network namespaces: auto (when root), on (fail without), off")
	fs.BoolVar(&o.control, "control", false, "the control experiment: agents run with their lock-delay off (an unsafe setting only the harness uses); the checkers must report violations")
	fs.DurationVar(&o.settle, "settle", 6*time.Second, "the recovery after each fault or heal left out of the settled availability")
	fs.StringVar(&o.pace, "pace", "normal", "the schedule's pace: normal (2-4 s quiet after each heal, partitions of 4-10 s), fast (1-2 s quiet, partitions of 2-5 s: more faults an hour), rapid (0.5-1 s quiet, partitions of 1.5-3 s: about 1,000 faults an hour with every nemesis) or calm (10-20 s quiet, partitions of 8-25 s: long settled stretches, for availability)")
	fs.StringVar(&o.recheck, "check", "", "judge a recorded output directory again (its history.jsonl, results and recording.json) without running anything: rewrites its result.json, report.md and timeline.svg; -settle applies, the other flags are ignored")
	fs.DurationVar(&o.lease, "lease", 0, "the members' quorum lease (dlmnode agent --lease); pauses and long holds scale with it (default 1.5s, the agents' own; 6s with -control)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go -C chaos/run run . [flags]\n       go -C chaos/run run . -check DIR [-settle D]\n\nflags:\n")
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
	case o.embedded < 1 || o.embedded >= o.nodes:
		return o, fmt.Errorf("-embedded %d: want 1..%d (fewer than the agents)", o.embedded, o.nodes-1)
	case o.workers < 1 || o.workers > 4:
		return o, fmt.Errorf("-workers %d: want 1..4", o.workers)
	case o.clientWorkers < 0 || o.clientWorkers > 4:
		return o, fmt.Errorf("-client-workers %d: want 0..4", o.clientWorkers)
	case o.clientClients < 0 || o.clientClients > 200 || (o.clientWorkers > 0 && o.clientClients < 1):
		return o, fmt.Errorf("-client-clients %d: want 1..200 (0 only without client workers)", o.clientClients)
	case o.clientDrift < 0 || o.clientDrift >= 0.5:
		return o, fmt.Errorf("-client-drift %v: want [0, 0.5)", o.clientDrift)
	case o.sessions < 1 || o.sessions > 8:
		return o, fmt.Errorf("-sessions %d: want 1..8", o.sessions)
	case o.rounds < 1 || o.rounds > 1000:
		return o, fmt.Errorf("-rounds %d: want 1..1000", o.rounds)
	case o.duration < 0 || o.duration > 24*time.Hour:
		return o, fmt.Errorf("-duration %v: want 0..24h", o.duration)
	case o.pace != "normal" && o.pace != "fast" && o.pace != "rapid" && o.pace != "calm":
		return o, fmt.Errorf("-pace %q: want normal, fast, rapid or calm", o.pace)
	case o.network != "auto" && o.network != "on" && o.network != "off":
		return o, fmt.Errorf("-network %q: want auto, on or off", o.network)
	}
	if o.lease == 0 {
		// The control needs failure detection to finish within the
		// lease, or a cut-off holder's lease runs out before anyone
		// could re-grant its lock, with the lock-delay or without: on
		// this machine a cut-off member is declared dead in 3-5 s.
		o.lease = dlm.DefaultConfig().Lease
		if o.control {
			o.lease = 6 * time.Second
		}
	}
	if o.lease < 500*time.Millisecond || o.lease > time.Minute {
		return o, fmt.Errorf("-lease %v: want 500ms..1m", o.lease)
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
	if o.recheck != "" {
		ok, err := recheck(o.recheck, o.settle, stdout)
		if err != nil {
			fmt.Fprintln(stderr, "chaos:", err)
			return 1
		}
		if !ok {
			return 1
		}
		return 0
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
	if !netlab.Inside() {
		if wantNet && o.network == "off" {
			fmt.Fprintf(stderr, "chaos: skipping the network nemeses (%s): -network off\n", strings.Join(networkNames(kinds), ", "))
		}
		kinds = slices.DeleteFunc(kinds, nemesis.Kind.Network)
		if len(kinds) == 0 {
			fmt.Fprintln(stderr, "chaos: no nemesis left to strike without the network namespaces")
			return 2
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
	var err error
	if o.out, err = filepath.Abs(o.out); err != nil {
		return false, err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return false, err
	}
	if old, _ := filepath.Glob(filepath.Join(o.out, "journal-*.jsonl")); len(old) > 0 {
		return false, fmt.Errorf("%s holds the journals of an earlier run: give each run its own -out", o.out)
	}
	logf, err := os.Create(filepath.Join(o.out, "harness.log"))
	if err != nil {
		return false, err
	}
	defer logf.Close()
	log := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	fmt.Fprintf(stdout, "chaos: seed %d, %d agents, %d member workers, %d client workers, output in %s\n", o.seed, o.nodes, o.workers, o.clientWorkers, o.out)

	bin := o.dlmnode
	if bin == "" {
		if bin, err = buildDlmnode(ctx, o.out); err != nil {
			return false, err
		}
	}
	if out, err := exec.Command(bin, "agent", "-h").CombinedOutput(); err != nil && !strings.Contains(string(out), "usage: dlmnode agent") {
		return false, fmt.Errorf("%s has no agent command (%v): the harness needs `dlmnode agent`", bin, err)
	}
	self, err := os.Executable()
	if err != nil {
		return false, err
	}

	var idb [3]byte
	_, _ = rand.Read(idb[:])
	runID := "c" + hex.EncodeToString(idb[:])
	var lab *netlab.Lab
	if netlab.Inside() {
		if lab, err = netlab.New(runID, o.nodes+o.workers+o.clientWorkers, log); err != nil {
			return false, err
		}
	}
	// The sockets the workers reach the harness by: its control server
	// and the fenced register.
	sockDir, err := os.MkdirTemp("", "chaos-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(sockDir)
	ctlLn, err := net.Listen("unix", filepath.Join(sockDir, "control"))
	if err != nil {
		return false, err
	}
	storeLn, err := net.Listen("unix", filepath.Join(sockDir, "store"))
	if err != nil {
		ctlLn.Close()
		return false, err
	}
	store := workload.NewStore()
	var storeWG sync.WaitGroup
	storeWG.Go(func() { store.Serve(storeLn) })
	sup := proc.NewSupervisor(log)
	ws := newWorkers(ctlLn, o.nodes, log)
	var embedded []*dlm.Node
	cleanup := func() {
		ws.close()
		for _, n := range embedded {
			_ = n.Close()
		}
		if err := sup.Close(); err != nil {
			fmt.Fprintln(stderr, "chaos: cleanup:", err)
		}
		storeLn.Close()
		storeWG.Wait()
		if lab != nil {
			if err := lab.Close(); err != nil {
				fmt.Fprintln(stderr, "chaos: cleanup:", err)
			}
		}
	}
	defer cleanup()

	// Names and addresses: the agents n1..nN, the workers' members
	// w1..wW, the harness's members h1..hK; the client workers c1..cC
	// are no members.
	gossip, link, admin, clientAddr, err := agentAddrs(lab, o.nodes+o.workers)
	if err != nil {
		return false, err
	}
	var members []string
	for i := range o.nodes {
		members = append(members, fmt.Sprintf("n%d", i+1))
	}
	for i := range o.workers {
		members = append(members, fmt.Sprintf("w%d", i+1))
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
	extra := []string{"--lease", o.lease.String()}
	if o.control {
		extra = append(extra, "--unsafe-no-lock-delay")
	}
	ag, err := startAgents(sup, agentSpec{bin: bin, n: o.nodes, members: members, seeds: seeds, dir: o.out, lab: lab, extra: extra},
		gossip[:o.nodes], link[:o.nodes], admin[:o.nodes], clientAddr[:o.nodes])
	if err != nil {
		return false, err
	}

	// Every history of the run (the harness's, each worker boot's) starts
	// at origin, on CLOCK_MONOTONIC.
	origin := monoNow()
	wcfg := workload.DefaultConfig()
	wcfg.Seed = o.seed
	wcfg.LongHoldMin, wcfg.LongHoldMax = o.lease*2/3, 2*o.lease
	for k := range o.workers {
		wl := wcfg
		wl.Clients = o.clients / o.workers
		if k < o.clients%o.workers {
			wl.Clients++
		}
		wl.Keeper, wl.Candidates, wl.Readers = false, 1, 0
		if k == 0 {
			wl.Readers = 1
		}
		wl.FirstID, wl.Seed = 100000*(k+1), o.seed+uint64(k+1)
		spec := workerSpec{Name: members[o.nodes+k], Origin: origin.UnixNano(), Dir: o.out,
			Control: ctlLn.Addr().String(), Store: storeLn.Addr().String(), Workload: wl,
			Member: memberSpec{Members: members, Seeds: seeds, GossipAddr: gossip[o.nodes+k], LinkAddr: link[o.nodes+k],
				UnsafeNoLockDelay: o.control, Lease: o.lease}}
		path, err := writeSpec(o.out, spec)
		if err != nil {
			return false, err
		}
		ps := proc.Spec{Name: spec.Name, Path: self, Env: append(os.Environ(), workerEnv+"="+path),
			Log: filepath.Join(o.out, spec.Name+".log")}
		if lab != nil {
			ps.Netns = lab.Nodes()[o.nodes+k].Netns
		}
		if err := ws.add(sup, ps); err != nil {
			return false, err
		}
	}
	// The client workers: their sessions spread over the agents.
	// A session lives two leases at the agent without a renewal: its
	// renewals reach every master of its locks, which on this loaded
	// machine, under delay and loss, takes more than one lease now and
	// then; a pause of the holder (2-3 leases) still outlives it, so the
	// lock is another's by the time the paused holder writes.
	sessionTTL := max(time.Second, 2*o.lease)
	var clientNodes [][]string
	for j := range o.clientWorkers {
		k := o.workers + j
		wl := wcfg
		wl.Clients = o.clientClients / o.clientWorkers
		if j < o.clientClients%o.clientWorkers {
			wl.Clients++
		}
		wl.Keeper, wl.Candidates, wl.Readers, wl.NoCounter = false, 1, 0, true
		wl.FirstID, wl.Seed = 100000*(k+1), o.seed+uint64(k+1)
		name := fmt.Sprintf("c%d", j+1)
		spec := workerSpec{Name: name, Origin: origin.UnixNano(), Dir: o.out,
			Control: ctlLn.Addr().String(), Store: storeLn.Addr().String(), Workload: wl,
			Client: &clientSpec{Addrs: clientAddr[:o.nodes], Agents: members[:o.nodes], Home: j * o.sessions,
				Sessions: o.sessions, SessionTTL: sessionTTL, ClockDrift: o.clientDrift}}
		var nodes []string
		for s := range o.sessions {
			nodes = append(nodes, fmt.Sprintf("%s-%d", name, s+1))
		}
		clientNodes = append(clientNodes, nodes)
		path, err := writeSpec(o.out, spec)
		if err != nil {
			return false, err
		}
		ps := proc.Spec{Name: name, Path: self, Env: append(os.Environ(), workerEnv+"="+path),
			Log: filepath.Join(o.out, name+".log")}
		if lab != nil {
			ps.Netns = lab.Nodes()[o.nodes+k].Netns
		}
		if err := ws.add(sup, ps); err != nil {
			return false, err
		}
	}
	// The harness's members start with the agents and the workers: Start
	// waits for a quorum.
	var emu sync.Mutex
	errc := make(chan error, o.embedded)
	for i := range o.embedded {
		go func() {
			cfg := dlm.DefaultConfig()
			cfg.Name, cfg.Members, cfg.Seeds = members[o.nodes+o.workers+i], members, seeds
			cfg.GossipAddr, cfg.LinkAddr = embGossip[i], host+":0"
			cfg.Lease = o.lease
			cfg.Logger = log.With("member", cfg.Name)
			sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			if o.control {
				sctx = seam.WithoutLockDelay(sctx)
			}
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
			return false, fmt.Errorf("member in the harness: %w", err)
		}
	}
	if err := ag.waitReady(ctx); err != nil {
		return false, err
	}
	for k := range o.workers + o.clientWorkers {
		if err := ws.waitReady(ctx, k); err != nil {
			return false, err
		}
	}
	fmt.Fprintf(stdout, "chaos: %d agents, %d member workers and %d client workers ready%s\n", o.nodes, o.workers, o.clientWorkers,
		map[bool]string{true: " (each in its own network namespace)", false: " (loopback)"}[lab != nil])

	// The harness's own history (the nemeses, the counter's keeper, a
	// probe), journaled next to the workers'.
	jf, err := os.Create(filepath.Join(o.out, "harness-journal.jsonl"))
	if err != nil {
		return false, err
	}
	defer jf.Close()
	jw := &syncWriter{w: bufio.NewWriterSize(jf, 1<<20)}
	h := check.NewHistory(monoNow)
	h.StartAt(origin)
	h.Journal(jw)
	ls, err := embedded[0].Lockspace("chaos")
	if err != nil {
		return false, err
	}
	hcfg := wcfg
	hcfg.Clients, hcfg.Candidates, hcfg.Readers, hcfg.FirstID = 0, 0, 0, 1
	hr := workload.New(h, store, []workload.Service{{Node: embedded[0].Name(), Agent: -1, LS: workload.Embedded(ls)}}, hcfg, workload.Hooks{})
	hctx, hstop := context.WithCancel(ctx)
	var hwg sync.WaitGroup
	hwg.Go(func() { hr.Run(hctx) })
	cl := &cluster{a: ag, w: ws, voters: len(members), oracle: ls,
		hot: []string{workload.RegisterPrefix + "0", workload.RegisterPrefix + "1", workload.MixPrefix + "0",
			workload.MixPrefix + "1", workload.MixPrefix + "2", workload.CounterRes, workload.ElectionRes},
		witness: func(res string) <-chan struct{} { return hr.Witness(hctx, res, 30*time.Second) }}
	var procNames []string
	for i := range cl.Procs() {
		procNames = append(procNames, cl.Name(i))
	}
	rec := newRecorder(h, procNames, o.nodes+o.workers, o.embedded)
	for j, nodes := range clientNodes {
		rec.sessions(o.nodes+o.workers+j, nodes)
	}

	// Warm up, then the schedule.
	sleepCtx(ctx, 2*time.Second)
	tm := paceTiming(o.pace, o.lease)
	steps := nemesis.Schedule(o.seed, kinds, o.duration, o.rounds, tm)
	var events []nemesis.Event
	var exits []string // processes that exited on their own
	deadline := started.Add(o.duration)
	for i, s := range steps {
		if ctx.Err() != nil || (i >= len(kinds)*o.rounds && time.Now().After(deadline)) {
			break
		}
		died, err := cl.restartDown()
		exits = append(exits, died...)
		if err != nil {
			fmt.Fprintln(stderr, "chaos:", err)
		}
		ev := nemesis.Strike(ctx, s, cl, cl, rec)
		events = append(events, ev)
		fmt.Fprintf(stdout, "chaos: %6.1fs %-19s %s %s\n", ev.At.Seconds(), ev.Kind, ev.Text, ev.Err)
		sleepCtx(ctx, s.Quiet)
	}
	// Let the last recovery finish, then stop the workers (their clients
	// stop with them) and read the counter.
	sleepCtx(ctx, 5*time.Second)
	for i := range cl.Procs() {
		if p := cl.proc(i); !cl.Up(i) {
			if exit, killed := p.ExitErr(); !killed {
				exits = append(exits, fmt.Sprintf("%s exited by itself (%v); see %s", cl.Name(i), exit, p.Spec().Log))
			}
		}
	}
	if err := ws.quiesce(30 * time.Second); err != nil {
		fmt.Fprintln(stderr, "chaos: stopping the clients:", err)
	}
	hstop()
	hwg.Wait()
	// The read goes to the counter's master while every member is still
	// there: one that left could take the value with it.
	if err := hr.Finish(context.Background()); err != nil {
		fmt.Fprintln(stderr, "chaos: final counter read:", err)
	}
	if err := ws.stop(25 * time.Second); err != nil {
		fmt.Fprintln(stderr, "chaos: stopping the workers:", err)
	}
	end := h.Elapsed()
	jw.Flush()
	if err := h.JournalErr(); err != nil {
		return false, fmt.Errorf("journal: %w", err)
	}

	// One history from every journal.
	h, err = gather(o.out)
	if err != nil {
		return false, err
	}
	states, changes := rec.snapshot()
	notes := []string{fmt.Sprintf("clients run in %d worker processes, each through a cluster member of its own, and in %d client workers through the agents' client ports (package client, %d sessions each, session TTL %v); %d more member(s) in the harness keep the counter and probe", o.workers, o.clientWorkers, o.sessions, sessionTTL, o.embedded)}
	if lab == nil {
		notes = append([]string{"network nemeses skipped: not root (or -network off)"}, notes...)
	}
	rc := recording{Command: "go -C chaos/run run . " + strings.Join(args, " "), Seed: o.seed, Nodes: o.nodes,
		Network: lab != nil, Control: o.control, Started: started, End: end, Kinds: kinds, Events: events,
		Exits: exits, States: states, Changes: changes, Members: o.nodes + o.workers, Embedded: o.embedded,
		Probe: probeSpec{Within: wcfg.ProbeWithin}, Notes: notes, Result: hr.Results(), Client: ws.clientKinds()}
	if err := writeRecording(o.out, rc); err != nil {
		return false, err
	}
	fmt.Fprintln(stdout, "chaos: checking")
	return judge(o.out, rc, h, o.settle, stdout)
}

// judge runs the checks over a run's history and recording, writes the
// report into dir, prints the verdict, and reports whether the run passed
// (for the control: whether it was caught).
func judge(dir string, rc recording, h *check.History, settle time.Duration, stdout io.Writer) (bool, error) {
	results, err := readResults(dir, rc.Result)
	if err != nil {
		return false, err
	}
	results.Clients = rc.Client
	end := rc.End
	majority, settled := windows(rc.States, rc.Changes, rc.Members, rc.Embedded, end, settle)
	v := verdict.Judge(verdict.Input{History: h, Results: results, Events: rc.Events, Majority: majority, Settled: settled,
		Probe: check.AvailabilityOptions{Prefix: workload.ProbePrefix, Slot: 100 * time.Millisecond, Within: rc.Probe.Within},
		// porcupine's work grows with the history: about 3 s per 100 s
		// of run here, so the bounds grow with it, far above need.
		CheckTimeout: max(2*time.Minute, end/4), MaxSteps: max(5_000_000, 100*int64(len(h.Records()))),
		Dir: dir})
	// A nemesis asked for and never struck leaves its part of the run
	// unchecked: the run is inconclusive, not passed.
	for _, k := range notStruck(rc.Kinds, rc.Events) {
		v.OK = false
		v.Inconclusive = append(v.Inconclusive, fmt.Sprintf("[coverage] nemesis %s was asked for and never struck (skipped each time)", k))
	}
	for _, x := range rc.Exits {
		v.OK = false
		v.Violations = append(v.Violations, "[process] "+x)
	}
	selfTest, err := selfTestFile(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		v.OK = false
		v.Violations = append(v.Violations, "[self-test] "+err.Error())
		selfTest = "FAILED: " + err.Error()
	} else {
		selfTest = "caught a planted overlap: " + selfTest
	}
	var grants []time.Duration
	for _, r := range h.Records() {
		if r.Outcome == check.OK && (r.Kind == check.Acquire || r.Kind == check.Convert) && r.Return != check.Infinity {
			grants = append(grants, r.Return)
		}
	}
	rep := report.Run{Command: rc.Command, Seed: rc.Seed, Nodes: rc.Nodes,
		Clients: results.Clients, Network: rc.Network, Control: rc.Control, Started: rc.Started, Duration: end,
		Events: rc.Events, Verdict: v, SelfTest: selfTest, Majority: majority, Settle: settle, Grants: grants, Notes: rc.Notes}
	if err := report.Write(dir, rep); err != nil {
		return false, err
	}
	fmt.Fprintln(stdout, "chaos: "+v.Summary())
	for _, x := range v.Violations {
		fmt.Fprintln(stdout, "  violation:", strings.ReplaceAll(x, "\n", "\n    "))
	}
	for _, x := range v.Inconclusive {
		fmt.Fprintln(stdout, "  inconclusive:", x)
	}
	fmt.Fprintf(stdout, "chaos: report in %s\n", filepath.Join(dir, "report.md"))
	if rc.Control {
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

// recheck judges the recorded output directory dir again.
func recheck(dir string, settle time.Duration, stdout io.Writer) (bool, error) {
	rc, err := readRecording(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("%s has no %s: not a run's output, or a run that ended before its checks (or recorded before -check existed)", dir, recordingFile)
	}
	if err != nil {
		return false, err
	}
	f, err := os.Open(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return false, err
	}
	defer f.Close()
	h, err := check.ReadJournal(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return false, fmt.Errorf("%s: %w", f.Name(), err)
	}
	fmt.Fprintf(stdout, "chaos: checking %s again (%d records)\n", dir, len(h.Records()))
	return judge(dir, rc, h, settle, stdout)
}

// selfTestFile plants an overlap in the journal at path and requires the
// checker to flag it.
func selfTestFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return verdict.SelfTest(bufio.NewReaderSize(f, 1<<20), check.Options{Timeout: time.Minute})
}

// notStruck lists the kinds with no event that struck (one not skipped).
func notStruck(kinds []nemesis.Kind, events []nemesis.Event) []nemesis.Kind {
	struck := make(map[nemesis.Kind]bool)
	for _, e := range events {
		if !strings.HasPrefix(e.Err, "skipped") {
			struck[e.Kind] = true
		}
	}
	var out []nemesis.Kind
	for _, k := range kinds {
		if !struck[k] {
			out = append(out, k)
		}
	}
	return out
}

// gather merges the harness's journal and every worker boot's into one
// history, written to history.jsonl.
func gather(dir string) (*check.History, error) {
	journals, _, err := workerFiles(dir)
	if err != nil {
		return nil, err
	}
	var rs []io.Reader
	for _, p := range append(journals, filepath.Join(dir, "harness-journal.jsonl")) {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		rs = append(rs, bufio.NewReaderSize(f, 1<<20))
	}
	out, err := os.Create(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	bw := bufio.NewWriterSize(out, 1<<20)
	h, cut, err := check.MergeJournals(bw, rs...)
	if err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	if cut > 0 {
		h.Note("harness", fmt.Sprintf("%d journal lines cut short by a kill left out", cut))
	}
	return h, nil
}

// readResults adds the workers' results files in dir to the harness's own.
func readResults(dir string, res workload.Results) (workload.Results, error) {
	_, results, err := workerFiles(dir)
	if err != nil {
		return res, err
	}
	for _, p := range results {
		b, err := os.ReadFile(p)
		if err != nil {
			return res, err
		}
		for i, line := range bytes.Split(b, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			var l resultLine
			if err := json.Unmarshal(line, &l); err != nil {
				if i == bytes.Count(b, []byte("\n")) {
					continue // the last line, cut short by a kill
				}
				return res, fmt.Errorf("%s line %d: %w", p, i+1, err)
			}
			switch {
			case l.Increment != nil:
				res.Increments = append(res.Increments, *l.Increment)
			case l.Observation != nil:
				res.Observations = append(res.Observations, *l.Observation)
			case l.Frozen != nil:
				res.FrozenWrites = append(res.FrozenWrites, *l.Frozen)
			}
		}
	}
	return res, nil
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

// paceTiming is the schedule's timing for a -pace.
func paceTiming(pace string, lease time.Duration) nemesis.Timing {
	tm := nemesis.DefaultTiming()
	tm.Lease = lease
	switch pace {
	case "fast":
		tm.QuietMin, tm.QuietMax, tm.PartitionMin, tm.PartitionMax = time.Second, 2*time.Second, 2*time.Second, 5*time.Second
	case "rapid":
		tm.QuietMin, tm.QuietMax, tm.PartitionMin, tm.PartitionMax = 500*time.Millisecond, time.Second, 1500*time.Millisecond, 3*time.Second
	case "calm":
		tm.QuietMin, tm.QuietMax, tm.PartitionMin, tm.PartitionMax = 10*time.Second, 20*time.Second, 8*time.Second, 25*time.Second
	}
	return tm
}
