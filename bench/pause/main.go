// Command pause measures, on real processes over loopback, the longest
// wait a client sees on resources a failure did not touch, in the shape a
// cluster is deployed in: one node per process.
//
//	go run ./pause -dlmnode PATH [flags]   # in bench/, a Go module of its own
//
// Each run starts five `dlmnode agent` processes (n1..n5) and a loader
// process (this command again, as `pause loader`) that takes -locks EX
// locks, each on its own resource, through one client session per agent
// (lock i through agent i mod 5), and then holds them and allocates
// nothing more. This process is the prober: through its own session on
// n1 it locks and unlocks in a loop resources that n2 masters (which the
// failure does not move), first for -base without a failure, then from
// the SIGKILL of n5 until -after past n1's "recovery done" of the view
// without n5. It prints, for each run: the longest lock+unlock and the
// 99th percentile across the failure and in the base window before it;
// when the five longest began, from n1's commit of the new view; the
// commit and the recovery's end (after the lock-delay, which -lease
// sets) from the kill; the survivors' CPU from the kill to the
// recovery's end beyond their idle rate; and the collections each
// survivor ran from the kill to the window's end, with its heap before
// (from its /metrics). On a machine of few cores the agents share them,
// as the nodes of one process share its processors: what it shows that
// one process cannot is each node's heap, collected on its own.
//
// With -trace, n1's and n2's execution traces of the failure are kept in
// -out too (trace-n1.out, trace-n2.out; `go tool trace`), and the five
// longest pairs are printed with their start as Unix time in
// nanoseconds, which the traces' clock snapshots give too.
//
// The agents' logs (JSON) and the loader's are kept in -out. It kills
// only the processes it started, by their process groups, also on SIGINT
// and SIGTERM; every wait is bounded.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

type options struct {
	dlmnode, out string
	locks, runs  int
	base, after  time.Duration
	lease        time.Duration
	probes       int
	gctrace      bool
	gomaxprocs   int
	trace        time.Duration
}

const usage = `usage: pause -dlmnode PATH [flags]

Five dlmnode agents as processes, -locks locks held through their client
ports by a loader process, one agent killed: the longest lock+unlock a
client of n1 sees on resources n2 masters, across the failure.

flags:
`

func main() {
	if len(os.Args) > 1 && os.Args[1] == "loader" {
		if err := runLoader(os.Args[2:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "pause loader:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	fs := flag.NewFlagSet("pause", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.dlmnode, "dlmnode", "", "the dlmnode binary to run as agents (go build -o /tmp/dlmnode ./cmd/dlmnode) (required)")
	fs.StringVar(&o.out, "out", "", "directory for the logs (default: a new temporary directory)")
	fs.IntVar(&o.locks, "locks", 1_000_000, "locks the loader holds, spread over the five agents")
	fs.IntVar(&o.runs, "runs", 1, "runs, each on a new cluster")
	fs.IntVar(&o.probes, "probes", 256, "resources mastered by n2 that the prober cycles through")
	fs.DurationVar(&o.base, "base", 3*time.Second, "how long the prober runs before the kill (the base window)")
	fs.DurationVar(&o.after, "after", 500*time.Millisecond, "how long the prober runs on after n1's recovery is done")
	// As the in-process recovery benchmarks have it: five agents and the
	// loader taking a million locks saturate two cores, and with the
	// default 1.5 s lease an agent starved that long stops serving (which
	// would start views this command does not measure). The lock-delay
	// grows with it; the prober's resources never wait for it.
	fs.DurationVar(&o.lease, "lease", 10*time.Second, "the agents' quorum lease (--lease; the heartbeat is a tenth of it)")
	fs.IntVar(&o.gomaxprocs, "gomaxprocs", 0, "run the agents with GOMAXPROCS set to this (0: the runtime's default, the machine's cores)")
	fs.BoolVar(&o.gctrace, "gctrace", false, "run the agents with GODEBUG=gctrace=1 (each collection in their logs)")
	fs.DurationVar(&o.trace, "trace", 0, "record an execution trace this long of n1 and n2 from just before the kill (their /debug/pprof/trace, into -out; 0: none)")
	_ = fs.Parse(os.Args[1:])
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "pause:", err)
		os.Exit(64)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pause:", err)
		os.Exit(1)
	}
}

func (o *options) validate() error {
	switch {
	case o.dlmnode == "":
		return errors.New("-dlmnode is required")
	case o.locks < 0:
		return errors.New("-locks must not be negative")
	case o.runs < 1:
		return errors.New("-runs must be at least 1")
	case o.probes < 1:
		return errors.New("-probes must be at least 1")
	case o.base <= 0 || o.after < 0:
		return errors.New("-base must be positive and -after not negative")
	case o.gomaxprocs < 0:
		return errors.New("-gomaxprocs must not be negative")
	case o.lease < time.Second:
		return errors.New("-lease must be at least 1s")
	case o.trace < 0:
		return errors.New("-trace must not be negative")
	}
	return nil
}

func run(ctx context.Context, o options, stdout io.Writer) error {
	if o.out == "" {
		d, err := os.MkdirTemp("", "pause-")
		if err != nil {
			return err
		}
		o.out = d
	} else if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "pause: logs in %s\n", o.out)
	var rows []result
	for r := range o.runs {
		x, err := runOnce(ctx, o, r)
		if err != nil {
			return fmt.Errorf("run %d: %w", r, err)
		}
		fmt.Fprintf(stdout, "run %d: %v\n", r, x)
		rows = append(rows, x)
	}
	if len(rows) > 1 {
		fmt.Fprintf(stdout, "over %d runs (median / max):\n", len(rows))
		for _, c := range columns {
			var vs []float64
			for _, x := range rows {
				vs = append(vs, c.get(x))
			}
			med, hi := medianMax(vs)
			fmt.Fprintf(stdout, "  %-32s %.1f / %.1f\n", c.name, med, hi)
		}
	}
	return nil
}
