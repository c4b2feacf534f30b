// Command rejoin measures, on real processes over loopback, how soon a
// cluster serves again after agents are killed and restarted under the same
// names and addresses (a new boot each): the chaos harness's quorum-loss
// and restart nemeses, without the harness.
//
//	go run ./rejoin -dlmnode PATH [flags]   # in bench/, a Go module of its own
//
// It starts five `dlmnode agent` processes (n1..n5, on -ip prefix .1 to
// .5, ports 7946-7949) and, in this process, three embedded members (h1,
// w1, w2, on .101 to .103) as the chaos harness has: eight voters, quorum
// five. Each embedded member takes its own lock probe/NAME every 100 ms
// with a 1 s deadline. Each round waits until h1 serves a view of all
// eight, SIGKILLs -kill agents, waits for them to exit, leaves them down
// between -down-min and -down-max, starts them again, and reports, from
// the restart: h1's first view committed, h1's first "recovery done", the
// first grant of h1's probe and of any probe, and the longest stretch
// without any probe grant from a second before the kill to three seconds
// after the restart. The agents' logs (JSON) and the members' are kept in
// -out.
//
// It kills only the processes it started, by their handles, also on SIGINT
// and SIGTERM; every wait is bounded.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/modes"
)

type options struct {
	dlmnode, out, ip    string
	rounds, kill        int
	downMin, downMax    time.Duration
	seed                uint64
	debug               bool
	agents, embedded    []string
	probeEvery, probeIn time.Duration
}

func main() {
	var o options
	fs := flag.NewFlagSet("rejoin", flag.ExitOnError)
	fs.StringVar(&o.dlmnode, "dlmnode", "", "the dlmnode binary to run as agents (go build -o /tmp/dlmnode ./cmd/dlmnode) (required)")
	fs.StringVar(&o.out, "out", "", "directory for the logs (default: a new temporary directory)")
	fs.StringVar(&o.ip, "ip", "127.0.19.", "loopback address prefix: agents on .1 to .5, members on .101 to .103")
	fs.IntVar(&o.rounds, "rounds", 10, "kill-and-restart rounds")
	fs.IntVar(&o.kill, "kill", 4, "agents killed per round (4 of 5 leaves 4 of 8 voters: no quorum)")
	fs.DurationVar(&o.downMin, "down-min", 2*time.Second, "shortest time the killed agents stay down")
	fs.DurationVar(&o.downMax, "down-max", 4*time.Second, "longest time the killed agents stay down")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of which agents are killed and how long they stay down")
	fs.BoolVar(&o.debug, "debug", false, "log at debug level (proposals, links, membership events)")
	_ = fs.Parse(os.Args[1:])
	o.agents, o.embedded = []string{"n1", "n2", "n3", "n4", "n5"}, []string{"h1", "w1", "w2"}
	o.probeEvery, o.probeIn = 100*time.Millisecond, time.Second
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "rejoin:", err)
		os.Exit(64)
	}
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "rejoin:", err)
		os.Exit(1)
	}
}

func (o *options) validate() error {
	switch {
	case o.dlmnode == "":
		return errors.New("-dlmnode is required")
	case o.rounds < 1:
		return errors.New("-rounds must be at least 1")
	case o.kill < 1 || o.kill > len(o.agents):
		return fmt.Errorf("-kill must be 1 to %d", len(o.agents))
	case o.downMin < 0 || o.downMax < o.downMin:
		return errors.New("need 0 ≤ -down-min ≤ -down-max")
	}
	return nil
}

// agents are the dlmnode processes, by name.
type agents struct {
	o      options
	seeds  []string
	mu     sync.Mutex
	procs  map[string]*exec.Cmd
	exited map[string]chan struct{}
}

func (a *agents) start(name string) error {
	i := slices.Index(a.o.agents, name)
	ip := fmt.Sprintf("%s%d", a.o.ip, i+1)
	members := append(slices.Clone(a.o.agents), a.o.embedded...)
	args := []string{"agent", "--name", name, "--members", strings.Join(members, ","),
		"--seeds", strings.Join(a.seeds, ","), "--gossip-addr", ip + ":7946", "--link-addr", ip + ":7947",
		"--admin-addr", ip + ":7948", "--client-addr", ip + ":7949", "--log-format", "json"}
	if a.o.debug {
		args = append(args, "--log-level", "debug")
	}
	f, err := os.OpenFile(filepath.Join(a.o.out, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(a.o.dlmnode, args...)
	cmd.Stdout, cmd.Stderr = f, f
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.procs == nil {
		return errors.New("stopping")
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	done := make(chan struct{})
	a.procs[name], a.exited[name] = cmd, done
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	return nil
}

// kill SIGKILLs the named agents and waits (bounded) until they exited, so
// that their ports are free for the restart.
func (a *agents) kill(names []string) error {
	a.mu.Lock()
	var waits []chan struct{}
	for _, n := range names {
		_ = a.procs[n].Process.Kill()
		waits = append(waits, a.exited[n])
	}
	a.mu.Unlock()
	for i, w := range waits {
		select {
		case <-w:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("%s did not exit within 10 s of SIGKILL", names[i])
		}
	}
	return nil
}

// stopAll kills every agent still running; no agent starts afterwards.
func (a *agents) stopAll() {
	a.mu.Lock()
	procs := a.procs
	a.procs = nil
	a.mu.Unlock()
	for _, c := range procs {
		_ = c.Process.Kill()
	}
}

// probes records the embedded members' events and probe grants.
type probes struct {
	mu      sync.Mutex
	commits map[string][]time.Time // "view committed", per member
	dones   map[string][]time.Time // "recovery done", per member
	grants  map[string][]time.Time
}

// recorder is a slog handler that notes the times of the messages probes
// keeps, for one member, and passes every record on.
type recorder struct {
	slog.Handler
	p    *probes
	name string
}

func (r recorder) Handle(ctx context.Context, rec slog.Record) error {
	var into map[string][]time.Time
	switch rec.Message {
	case "view committed":
		into = r.p.commits
	case "recovery done":
		into = r.p.dones
	}
	if into != nil {
		r.p.mu.Lock()
		into[r.name] = append(into[r.name], rec.Time)
		r.p.mu.Unlock()
	}
	return r.Handler.Handle(ctx, rec)
}

func (r recorder) WithAttrs(as []slog.Attr) slog.Handler {
	return recorder{r.Handler.WithAttrs(as), r.p, r.name}
}
func (r recorder) WithGroup(g string) slog.Handler {
	return recorder{r.Handler.WithGroup(g), r.p, r.name}
}

// first returns the first time in ts after t, as a duration from t (0: none).
func first(ts []time.Time, t time.Time) time.Duration {
	for _, x := range ts {
		if x.After(t) {
			return x.Sub(t)
		}
	}
	return 0
}

func run(o options, stdout io.Writer) error {
	if o.out == "" {
		d, err := os.MkdirTemp("", "rejoin-")
		if err != nil {
			return err
		}
		o.out = d
	} else if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rejoin: logs in %s\n", o.out)
	ag := &agents{o: o, procs: map[string]*exec.Cmd{}, exited: map[string]chan struct{}{}}
	for i := range o.agents {
		ag.seeds = append(ag.seeds, fmt.Sprintf("%s%d:7946", o.ip, i+1))
	}
	defer ag.stopAll()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-sigs:
			ag.stopAll()
			cancel()
		case <-ctx.Done():
		}
	}()
	for _, n := range o.agents {
		if err := ag.start(n); err != nil {
			return err
		}
	}

	pr := &probes{commits: map[string][]time.Time{}, dones: map[string][]time.Time{}, grants: map[string][]time.Time{}}
	lf, err := os.Create(filepath.Join(o.out, "members.log"))
	if err != nil {
		return err
	}
	defer lf.Close()
	lvl := slog.LevelInfo
	if o.debug {
		lvl = slog.LevelDebug
	}
	jh := slog.NewJSONHandler(lf, &slog.HandlerOptions{Level: lvl})
	members := append(slices.Clone(o.agents), o.embedded...)
	nodes := make([]*dlm.Node, len(o.embedded))
	errc := make(chan error, len(o.embedded))
	for i, name := range o.embedded {
		go func() {
			cfg := dlm.DefaultConfig()
			cfg.Name, cfg.Members, cfg.Seeds = name, members, ag.seeds
			cfg.GossipAddr, cfg.LinkAddr = fmt.Sprintf("%s%d:7946", o.ip, 101+i), fmt.Sprintf("%s%d:0", o.ip, 101+i)
			cfg.Logger = slog.New(recorder{jh, pr, name}).With("member", name)
			sctx, c := context.WithTimeout(ctx, time.Minute)
			defer c()
			var err error
			nodes[i], err = dlm.Start(sctx, cfg)
			errc <- err
		}()
	}
	var startErr error
	for range o.embedded {
		startErr = errors.Join(startErr, <-errc)
	}
	defer func() {
		for _, n := range nodes {
			if n != nil {
				n.Halt()
			}
		}
	}()
	if startErr != nil {
		return fmt.Errorf("members: %w", startErr)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i, name := range o.embedded {
		ls, err := nodes[i].Lockspace("default")
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			probe(ctx, ls, "probe/"+name, o.probeEvery, o.probeIn, func(t time.Time) {
				pr.mu.Lock()
				pr.grants[name] = append(pr.grants[name], t)
				pr.mu.Unlock()
			})
		}()
	}
	h1 := nodes[0]
	fmt.Fprintf(stdout, "rejoin: %d agents and %d members up\n", len(o.agents), len(o.embedded))

	rng := rand.New(rand.NewPCG(o.seed, 0))
	var rows []row
	for r := range o.rounds {
		if err := waitFor(ctx, time.Minute, func() bool {
			return len(h1.Members()) == len(members) && h1.State() == dlm.StateServing
		}); err != nil {
			return fmt.Errorf("round %d: h1 serving a view of all %d: %w", r, len(members), err)
		}
		if err := sleep(ctx, 3*time.Second); err != nil { // a steady state first
			return err
		}
		var victims []string
		for _, i := range rng.Perm(len(o.agents))[:o.kill] {
			victims = append(victims, o.agents[i])
		}
		down := o.downMin + time.Duration(rng.Int64N(int64(o.downMax-o.downMin)+1))
		killed := time.Now()
		if err := ag.kill(victims); err != nil {
			return err
		}
		if err := sleep(ctx, down); err != nil {
			return err
		}
		restart := time.Now()
		for _, n := range victims {
			if err := ag.start(n); err != nil {
				return err
			}
		}
		// The results, once h1 committed a view and its probe was granted
		// (or 30 s passed), and three seconds more for the stretch.
		_ = waitFor(ctx, 30*time.Second, func() bool {
			pr.mu.Lock()
			defer pr.mu.Unlock()
			return first(pr.commits["h1"], restart) > 0 && first(pr.grants["h1"], restart) > 0
		})
		if err := sleep(ctx, 3*time.Second); err != nil {
			return err
		}
		pr.mu.Lock()
		x := row{
			commit: first(pr.commits["h1"], restart), done: first(pr.dones["h1"], restart),
			grant: first(pr.grants["h1"], restart),
		}
		var all []time.Time
		for _, g := range pr.grants {
			all = append(all, g...)
		}
		pr.mu.Unlock()
		x.anyGrant, x.stretch = grantsAround(all, killed.Add(-time.Second), restart, restart.Add(3*time.Second))
		fmt.Fprintf(stdout, "round %d: killed %v, down %v: %v\n", r, victims, down.Round(time.Millisecond), x)
		rows = append(rows, x)
	}
	fmt.Fprintf(stdout, "over %d rounds (median / p90 / max):\n", len(rows))
	for _, c := range columns {
		var ds []time.Duration
		for _, x := range rows {
			ds = append(ds, c.get(x))
		}
		s := summarize(ds)
		fmt.Fprintf(stdout, "  %-40s %v / %v / %v\n", c.name, s.median, s.p90, s.max)
	}
	return nil
}

// probe takes lock res in EX every interval, each request with a deadline
// of within, and reports each grant; it returns when ctx ends.
func probe(ctx context.Context, ls *dlm.Lockspace, res string, interval, within time.Duration, granted func(time.Time)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lctx, cancel := context.WithTimeout(ctx, within)
		lk, err := ls.Lock(lctx, res, modes.EX)
		cancel()
		if err == nil {
			granted(time.Now())
			lk.Unlock()
		}
	}
}

// row is one round's figures, each from the restart (0: did not happen).
type row struct {
	commit, done, grant, anyGrant time.Duration
	stretch                       time.Duration // longest without any grant
}

var columns = []struct {
	name string
	get  func(row) time.Duration
}{
	{"h1: view committed", func(x row) time.Duration { return x.commit }},
	{"h1: recovery done", func(x row) time.Duration { return x.done }},
	{"h1: probe granted", func(x row) time.Duration { return x.grant }},
	{"any probe granted", func(x row) time.Duration { return x.anyGrant }},
	{"longest stretch without any grant", func(x row) time.Duration { return x.stretch }},
}

func (x row) String() string {
	var b strings.Builder
	for i, c := range columns {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s +%v", c.name, c.get(x).Round(time.Millisecond))
	}
	return b.String()
}

// grantsAround returns, of the grant times ts, how long after restart the
// first one came, and the longest stretch without a grant between from and
// to (counting from from to the first grant, and from the last to to).
func grantsAround(ts []time.Time, from, restart, to time.Time) (first, stretch time.Duration) {
	ts = slices.Clone(ts)
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	last := from
	for _, t := range ts {
		if t.Before(from) || t.After(to) {
			continue
		}
		if first == 0 && t.After(restart) {
			first = t.Sub(restart)
		}
		stretch = max(stretch, t.Sub(last))
		last = t
	}
	return first, max(stretch, to.Sub(last))
}

type summary struct{ median, p90, max time.Duration }

// summarize returns the median (the lower middle of an even count), the
// 90th percentile (nearest rank) and the maximum of ds.
func summarize(ds []time.Duration) summary {
	if len(ds) == 0 {
		return summary{}
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	rank := func(p float64) time.Duration {
		k := int(p*float64(len(ds))+0.999999) - 1
		return ds[min(max(k, 0), len(ds)-1)]
	}
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return summary{median: r(ds[(len(ds)-1)/2]), p90: r(rank(0.9)), max: r(ds[len(ds)-1])}
}

// waitFor polls cond every 10 ms until it holds (nil), limit passes or
// ctx ends.
func waitFor(ctx context.Context, limit time.Duration, cond func() bool) error {
	end := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(end) {
			return fmt.Errorf("not within %v", limit)
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
