package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/dlm/dlmtest"
	"github.com/seed-a6839e30/dlm/modes"
)

var errUsage = errors.New("usage")

// demoConfig is what the demo's flags set.
type demoConfig struct {
	nodes    int
	clients  int
	rate     int
	coupons  int
	duration time.Duration
	ttl      time.Duration
	workers  int
	json     bool
	killAt   time.Duration
}

func parseDemo(args []string, stderr io.Writer) (demoConfig, error) {
	c := demoConfig{}
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.nodes, "nodes", 3, "nodes in the local cluster")
	fs.IntVar(&c.clients, "clients", 10, "client servers, spread over the nodes")
	fs.IntVar(&c.rate, "rate", 50000, "requests per second offered, in total")
	fs.IntVar(&c.coupons, "coupons", 1000, "coupons to issue")
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "how long requests keep arriving")
	fs.DurationVar(&c.ttl, "ttl", 100*time.Millisecond, "TTL of the coupon lock (the seed's 100 ms)")
	fs.IntVar(&c.workers, "workers", 64, "concurrent requests each client server handles")
	fs.BoolVar(&c.json, "json", false, "print one JSON object instead of the summary")
	fs.DurationVar(&c.killAt, "kill-node-at", 0, "halt the node mastering the coupon lock this long into the run, as if it crashed; its clients stop with it (0: no). At the default rate the coupons sell out within tens of milliseconds: halt it earlier, or lower --rate, to halt it mid-sale")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: dlmnode demo [flags]

Starts a local cluster over loopback TCP and runs the coupon scenario of the
seed document: client servers spread over the nodes receive requests at a
fixed total rate; each request that may still win a coupon takes the EX lock
of the event, re-reads the remaining count and issues a coupon into a store
that refuses writes carrying a fencing token older than one it has seen.
When the last coupon goes, requests still queued for the lock give up at
once (sold out) instead of each taking the lock to find none left.

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, errUsage // the flag package has printed what was wrong
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "demo: unexpected argument %q\n", fs.Arg(0))
		return c, errUsage
	}
	switch {
	case c.nodes < 1, c.clients < 1, c.rate < 1, c.coupons < 0, c.duration <= 0, c.ttl <= 0, c.workers < 1, c.killAt < 0:
		fmt.Fprintln(stderr, "demo: --nodes, --clients, --rate, --workers, --duration and --ttl must be positive, --coupons and --kill-node-at not negative")
		return c, errUsage
	case c.killAt > 0 && c.nodes < 3:
		fmt.Fprintln(stderr, "demo: --kill-node-at needs at least 3 nodes, so that a majority survives")
		return c, errUsage
	}
	return c, nil
}

// report is the demo's result; its JSON field names are the interface of
// `dlmnode demo --json`.
type report struct {
	Nodes         int     `json:"nodes"`
	Clients       int     `json:"clients"`
	OfferedRPS    int     `json:"offered_rps"`
	Requests      int64   `json:"requests"`
	Coupons       int     `json:"coupons"`
	Issued        int64   `json:"issued"`
	Overissued    int64   `json:"overissued"`
	SoldOut       int64   `json:"sold_out"`
	RejectedStale int64   `json:"rejected_stale"`
	Errors        int64   `json:"errors"`
	LockAcquired  int64   `json:"locks_acquired"`
	ThroughputRPS float64 `json:"throughput_rps"`
	P50ms         float64 `json:"p50_ms"`
	P99ms         float64 `json:"p99_ms"`
	P999ms        float64 `json:"p999_ms"`
	MaxMs         float64 `json:"max_ms"`
	DurationS     float64 `json:"duration_s"`
	SoldOutAtS    float64 `json:"sold_out_at_s,omitempty"`
	KilledNode    string  `json:"killed_node,omitempty"`
	KilledAtS     float64 `json:"killed_at_s,omitempty"`
	// RecoveredAfterS is how long after the halt a lock request made after
	// it was first granted: failure detection, recovery and lock-delay, end
	// to end. Absent if no request took the lock after the halt.
	RecoveredAfterS float64 `json:"recovered_after_s,omitempty"`
}

func demoMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseDemo(args, stderr)
	if err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	cluster, err := dlmtest.New(startCtx, cfg.nodes, dlmtest.TCP())
	cancel()
	if err != nil {
		return fmt.Errorf("starting the cluster: %w", err)
	}
	defer cluster.Close()
	nodes := cluster.Nodes()
	if !cfg.json {
		fmt.Fprintf(stdout, "cluster of %d nodes up: %v\n", cfg.nodes, nodes[0].Members())
	}
	rep, err := runCoupons(ctx, cfg, nodes, stderr)
	if err != nil {
		return err
	}
	if cfg.json {
		enc := json.NewEncoder(stdout)
		return enc.Encode(rep)
	}
	printSummary(stdout, rep)
	return nil
}

// store is the coupon store: the remaining count and the issued coupons.
// Like a database guarded by a fencing check, it refuses a write whose
// token is lower than the highest it has accepted.
type store struct {
	mu        sync.Mutex
	remaining int
	issued    int64
	highest   uint64
	stale     int64
	start     time.Time
	soldOutAt time.Duration // when the last coupon went; 0 while any is left
	// endSale is called once, when the last coupon goes: requests still
	// queued for the lock then give up at once (sold out) instead of
	// each taking the lock in turn to find the count at zero.
	endSale func()
}

func (s *store) left() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remaining
}

// issue takes one coupon with the caller's token; false if sold out or
// the token is stale.
func (s *store) issue(token uint64) (ok, stale bool) {
	s.mu.Lock()
	ok, stale = s.issueLocked(token)
	last := ok && s.remaining == 0
	s.mu.Unlock()
	if last && s.endSale != nil {
		s.endSale()
	}
	return ok, stale
}

func (s *store) issueLocked(token uint64) (ok, stale bool) {
	if token < s.highest {
		s.stale++
		return false, true
	}
	s.highest = token
	if s.remaining <= 0 {
		return false, false
	}
	s.remaining--
	s.issued++
	if s.remaining == 0 {
		s.soldOutAt = time.Since(s.start)
	}
	return true, false
}

const eventLock = "coupon:event_12345:lock"

func runCoupons(ctx context.Context, cfg demoConfig, nodes []*dlm.Node, stderr io.Writer) (report, error) {
	sale, endSale := context.WithCancel(ctx)
	defer endSale()
	st := &store{remaining: cfg.coupons, endSale: endSale}
	var lss []*dlm.Lockspace
	for _, n := range nodes {
		ls, err := n.Lockspace("coupons")
		if err != nil {
			return report{}, err
		}
		lss = append(lss, ls)
	}
	var requests, soldOut, errs, acquired atomic.Int64
	lat := newLatencies(cfg.rate, cfg.duration)
	dead := make([]atomic.Bool, len(nodes))
	var killedAt, recoveredAt atomic.Int64 // nanoseconds since start; 0: not yet
	var start time.Time
	handle := func(ls *dlm.Lockspace, scheduled time.Time) {
		node := nodeIndex(lss, ls)
		if dead[node].Load() {
			return // this client server died with its node
		}
		defer func() { lat.add(time.Since(scheduled)); requests.Add(1) }()
		if st.left() <= 0 { // a sold-out event needs no lock: the count only falls
			soldOut.Add(1)
			return
		}
		began := time.Since(start)
		lctx, cancel := context.WithTimeout(sale, 5*time.Second) // outlasts a recovery
		lk, err := ls.Lock(lctx, eventLock, modes.EX, dlm.WithTTL(cfg.ttl))
		cancel()
		if err != nil {
			if sale.Err() != nil && ctx.Err() == nil { // sold out while queued
				soldOut.Add(1)
				return
			}
			if !dead[node].Load() { // a dead node's clients died with it
				errs.Add(1)
			}
			return
		}
		acquired.Add(1)
		if k := killedAt.Load(); k != 0 && int64(began) > k {
			recoveredAt.CompareAndSwap(0, int64(time.Since(start)))
		}
		if ok, stale := st.issue(lk.Token()); !ok && !stale {
			soldOut.Add(1)
		}
		_ = lk.Unlock()
	}
	start = time.Now()
	st.mu.Lock()
	st.start = start
	st.mu.Unlock()
	stopProgress := progress(stderr, cfg, start, &requests, st)
	var killed string
	if cfg.killAt > 0 {
		victim := nodeIndexByName(nodes, lss[0].MasterOf(eventLock))
		killed = nodes[victim].Name()
		t := time.AfterFunc(cfg.killAt, func() {
			dead[victim].Store(true)
			killedAt.Store(int64(time.Since(start)))
			nodes[victim].Halt()
		})
		defer t.Stop()
	}
	var wg sync.WaitGroup
	perClient := float64(cfg.rate) / float64(cfg.clients)
	for i := range cfg.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client(ctx, lss[i%len(lss)], perClient, start, cfg, handle)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()
	issued := st.issued
	r := report{
		Nodes: cfg.nodes, Clients: cfg.clients, OfferedRPS: cfg.rate, Requests: requests.Load(),
		Coupons: cfg.coupons, Issued: issued, Overissued: max(0, issued-int64(cfg.coupons)),
		SoldOut: soldOut.Load(), RejectedStale: st.stale, Errors: errs.Load(), LockAcquired: acquired.Load(),
		ThroughputRPS: float64(requests.Load()) / elapsed.Seconds(),
		DurationS:     elapsed.Seconds(),
		KilledNode:    killed,
	}
	st.mu.Lock()
	r.SoldOutAtS = st.soldOutAt.Seconds()
	st.mu.Unlock()
	if killed != "" {
		r.KilledAtS = time.Duration(killedAt.Load()).Seconds()
		if rec := recoveredAt.Load(); rec != 0 {
			r.RecoveredAfterS = time.Duration(rec - killedAt.Load()).Seconds()
		}
	}
	r.P50ms, r.P99ms, r.P999ms, r.MaxMs = lat.quantile(0.50), lat.quantile(0.99), lat.quantile(0.999), lat.quantile(1)
	return r, ctx.Err()
}

// client is one client server: requests arrive at a fixed rate (an open
// loop: arrivals do not wait for earlier requests to finish) and a pool of
// workers serves them. Latency counts from the scheduled arrival, so a
// request delayed behind a slow one pays for the wait.
func client(ctx context.Context, ls *dlm.Lockspace, rate float64, start time.Time, cfg demoConfig, handle func(*dlm.Lockspace, time.Time)) {
	arrivals := make(chan time.Time, cfg.workers*4)
	var wg sync.WaitGroup
	for range cfg.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for at := range arrivals {
				handle(ls, at)
			}
		}()
	}
	interval := time.Duration(float64(time.Second) / rate)
	end := start.Add(cfg.duration)
	for at := start; at.Before(end) && ctx.Err() == nil; at = at.Add(interval) {
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		arrivals <- at
	}
	close(arrivals)
	wg.Wait()
}

// progress prints a status line every 250 ms until stopped.
func progress(w io.Writer, cfg demoConfig, start time.Time, requests *atomic.Int64, st *store) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprintln(w)
				return
			case <-t.C:
				el := time.Since(start)
				fmt.Fprintf(w, "\r%5.1fs  requests %8d  coupons left %5d/%d  %7.0f req/s ",
					el.Seconds(), requests.Load(), st.left(), cfg.coupons, float64(requests.Load())/el.Seconds())
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// latencies records request latencies for percentiles.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func newLatencies(rate int, d time.Duration) *latencies {
	return &latencies{d: make([]time.Duration, 0, int(float64(rate)*d.Seconds()*1.1))}
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// quantile returns the q-th quantile in milliseconds (q=1 is the maximum).
func (l *latencies) quantile(q float64) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	slices.Sort(l.d)
	i := int(math.Ceil(q*float64(len(l.d)))) - 1
	i = min(max(i, 0), len(l.d)-1)
	return float64(l.d[i]) / float64(time.Millisecond)
}

func printSummary(w io.Writer, r report) {
	verdict := "OK: every coupon issued once, none over"
	if r.Issued != int64(r.Coupons) || r.Overissued > 0 {
		verdict = "PROBLEM: issued count differs from the coupons on offer"
	}
	if r.KilledNode != "" {
		fmt.Fprintf(w, "\n%s (master of the coupon lock) was halted %.3fs into the run\n", r.KilledNode, r.KilledAtS)
		switch {
		case r.RecoveredAfterS > 0:
			fmt.Fprintf(w, "the coupon lock was granted again %.3fs after the halt (detection, recovery and lock-delay)\n", r.RecoveredAfterS)
		case r.SoldOutAtS > 0 && r.SoldOutAtS < r.KilledAtS:
			fmt.Fprintf(w, "the coupons had sold out before the halt, so no request needed the lock after it\n")
		}
	}
	if r.SoldOutAtS > 0 {
		fmt.Fprintf(w, "the last coupon went %.3fs into the run\n", r.SoldOutAtS)
	}
	fmt.Fprintf(w, `
coupon scenario: %d nodes, %d client servers, %d requests/s offered for %.1fs
  requests        %d (%.0f/s served)
  coupons issued  %d of %d   over-issued %d   stale writes refused %d
  sold-out replies %d   lock errors %d   locks taken %d
  latency         p50 %.3f ms   p99 %.3f ms   p99.9 %.3f ms   max %.3f ms
%s
`, r.Nodes, r.Clients, r.OfferedRPS, r.DurationS, r.Requests, r.ThroughputRPS,
		r.Issued, r.Coupons, r.Overissued, r.RejectedStale, r.SoldOut, r.Errors, r.LockAcquired,
		r.P50ms, r.P99ms, r.P999ms, r.MaxMs, verdict)
}

func nodeIndex(lss []*dlm.Lockspace, ls *dlm.Lockspace) int {
	for i, x := range lss {
		if x == ls {
			return i
		}
	}
	return 0
}

func nodeIndexByName(nodes []*dlm.Node, name string) int {
	for i, n := range nodes {
		if n.Name() == name {
			return i
		}
	}
	return len(nodes) - 1
}
