package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-a6839e30/dlm/bench/lockbench"
	"github.com/seed-a6839e30/dlm/bench/measure"
)

// Result is what one run of one workload against one system measured.
type Result struct {
	System   string `json:"system"`
	Workload Kind   `json:"workload"`
	Clients  int    `json:"clients"`
	// Window is the measured time (Duration less Warmup).
	Window time.Duration `json:"window_ns"`
	// Cycles is the number of lock+unlock cycles completed in the window,
	// OpsPerSec that number per second.
	Cycles    uint64  `json:"cycles"`
	OpsPerSec float64 `json:"ops_per_sec"`
	// Acquire is Lock's latency (from the scheduled arrival for coupon);
	// Cycle runs to Unlock's return.
	Acquire measure.Summary `json:"acquire"`
	Cycle   measure.Summary `json:"cycle"`
	// Fairness spreads Cycles over clients.
	Fairness measure.Fairness `json:"fairness"`
	// Errors counts failed Lock and Unlock calls that were not the end of
	// the run; ErrorSamples keeps the first few messages.
	Errors       uint64   `json:"errors"`
	ErrorSamples []string `json:"error_samples,omitempty"`
	// Overlaps counts grants that coexisted with a conflicting grant.
	Overlaps uint64 `json:"overlaps"`
	// SharedAsExclusive is true when readers ran on a system without shared
	// mode, so its shared requests were exclusive.
	SharedAsExclusive bool `json:"shared_as_exclusive,omitempty"`
	// HarnessCPU and ServerCPU are the CPU used during the window, in cores
	// (1.0 = one core busy all the time). ServerCPU is -1 when the system
	// does not report it (in-process systems count as harness).
	HarnessCPU float64 `json:"harness_cpu_cores"`
	ServerCPU  float64 `json:"server_cpu_cores"`
	// LoadAvg is the 1-minute load average just before the run (-1 if
	// unknown): the machine is shared, and this shows how busy it was.
	LoadAvg float64 `json:"load_avg_1m"`
	// Coupon holds the coupon workload's outcome.
	Coupon *CouponResult `json:"coupon,omitempty"`
	// Notes are facts a reader needs to interpret the row.
	Notes []string `json:"notes,omitempty"`
}

// run is the state of one Run call shared by its workers.
type run struct {
	cfg      Config
	kind     Kind
	info     lockbench.Info
	clients  []lockbench.Client
	ctx      context.Context // ends at the deadline or on the caller's cancel
	start    time.Time
	measure0 time.Time // start of the measured window
	end      time.Time
	names    []string
	guard    *guard
	store    *store // coupon only
	sched    measure.Schedule
	live     atomic.Uint64 // cycles completed, for progress
	liveErr  atomic.Uint64
	workers  []*worker
}

// worker is one client's private tally; only its goroutine writes it.
type worker struct {
	id       int
	client   lockbench.Client
	rng      *rand.Rand
	acquire  measure.Histogram
	cycle    measure.Histogram
	cycles   uint64
	errors   uint64
	overlaps uint64
	samples  []string
	coupon   couponTally
	timer    *time.Timer

	// unlockCtx bounds this worker's Unlocks (see run.unlockContext);
	// renewed at unlockRenew.
	unlockCtx    context.Context
	unlockCancel context.CancelFunc
	unlockRenew  time.Time
}

// Run runs kind against sys, which must be started, with cfg.Clients fresh
// clients, and closes them before returning.
func Run(ctx context.Context, sys lockbench.System, kind Kind, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if !kind.valid() {
		return Result{}, fmt.Errorf("%w %q", ErrUnknownKind, kind)
	}
	r := &run{cfg: cfg, kind: kind, info: sys.Info()}
	r.report("connect", 0)
	clients, err := connect(ctx, sys, cfg, kind)
	if err != nil {
		return Result{}, err
	}
	r.clients = clients
	r.prepare()
	if p, ok := sys.(lockbench.Preparer); ok {
		r.report("prepare", 0)
		if err := p.Prepare(ctx, r.names); err != nil {
			closeAll(clients)
			return Result{}, fmt.Errorf("workload: preparing %d resources: %w", len(r.names), err)
		}
	}
	res, runErr := r.execute(ctx, sys)
	closeAll(clients)
	return res, runErr
}

// connect opens cfg.Clients clients, eight at a time (etcd sessions and
// ZooKeeper handshakes take a round trip or two each).
func connect(ctx context.Context, sys lockbench.System, cfg Config, kind Kind) ([]lockbench.Client, error) {
	clients := make([]lockbench.Client, cfg.Clients)
	errs := make([]error, cfg.Clients)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			clients[i], errs[i] = sys.NewClient(ctx, lockbench.ClientConfig{
				ID: i, TTL: cfg.ttl(kind), MixedModes: kind == Readers,
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeAll(clients)
		return nil, fmt.Errorf("workload: connecting clients: %w", err)
	}
	return clients, nil
}

func closeAll(clients []lockbench.Client) {
	var wg sync.WaitGroup
	for _, c := range clients {
		if c != nil {
			wg.Go(func() { _ = c.Close() })
		}
	}
	wg.Wait()
}

// prepare names the resources and builds the workers.
func (r *run) prepare() {
	switch r.kind {
	case Uncontended:
		r.names = resourceNames("uncontended", r.cfg.Resources)
	case Hot:
		r.names = []string{"hot"}
	case Readers:
		r.names = resourceNames("readers", r.cfg.SharedResources)
	case Coupon:
		// The seed's lock key, and one to warm up on before the event opens.
		r.names = []string{"coupon:event_12345:lock", "coupon:warmup"}
		r.store = newStore(r.cfg.Coupons, r.info.Fencing == lockbench.FencingMonotonic)
		r.sched = measure.Schedule{Rate: r.cfg.Rate, Clients: r.cfg.Clients}
	}
	r.guard = newGuard(len(r.names))
	r.workers = make([]*worker, len(r.clients))
	for i, c := range r.clients {
		r.workers[i] = &worker{id: i, client: c, rng: rand.New(rand.NewPCG(r.cfg.Seed, uint64(i)))}
	}
}

func resourceNames(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = prefix + "-" + strconv.Itoa(i)
	}
	return names
}

// execute starts the workers, watches the clock, drains, and assembles the
// result.
func (r *run) execute(parent context.Context, sys lockbench.System) (Result, error) {
	load := loadAvg()
	r.start = time.Now()
	r.measure0 = r.start.Add(r.cfg.Warmup)
	r.end = r.start.Add(r.cfg.Duration)
	ctx, cancel := context.WithDeadline(parent, r.end)
	defer cancel()
	r.ctx = ctx

	var wg sync.WaitGroup
	for _, w := range r.workers {
		wg.Go(func() { r.work(w) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	cpu := r.watch(sys)
	drainErr := r.drain(done)
	res := r.result(cpu)
	res.LoadAvg = load
	if drainErr != nil {
		res.Notes = append(res.Notes, drainErr.Error())
	}
	if err := parent.Err(); err != nil {
		return res, err
	}
	return res, drainErr
}

// cpuWindow is the CPU used during the measured window.
type cpuWindow struct {
	harness, server time.Duration
	reported        bool // the system reports server CPU
}

// watch reports progress until the deadline and samples CPU use at the
// window's edges.
func (r *run) watch(sys lockbench.System) cpuWindow {
	rep, _ := sys.(lockbench.CPUReporter)
	serverCPU := func() time.Duration {
		if rep == nil {
			return 0
		}
		return rep.ServerCPU()
	}
	tick := time.NewTicker(r.cfg.ProgressEvery)
	defer tick.Stop()
	warm := time.NewTimer(time.Until(r.measure0))
	defer warm.Stop()
	var h0, s0 time.Duration
	for {
		select {
		case <-warm.C:
			h0, s0 = selfCPU(), serverCPU()
		case <-tick.C:
			r.report(r.phase(), time.Since(r.start))
		case <-r.ctx.Done():
			h1, s1 := selfCPU(), serverCPU()
			if h0 == 0 { // cancelled before the window opened
				return cpuWindow{}
			}
			return cpuWindow{harness: h1 - h0, server: s1 - s0, reported: rep != nil}
		}
	}
}

func (r *run) phase() string {
	if time.Now().Before(r.measure0) {
		return "warmup"
	}
	return "measure"
}

func (r *run) report(phase string, elapsed time.Duration) {
	if r.cfg.Progress == nil {
		return
	}
	r.cfg.Progress(Progress{
		System: r.info.Name, Workload: r.kind, Phase: phase,
		Elapsed: elapsed, Duration: r.cfg.Duration,
		Cycles: r.live.Load(), Errors: r.liveErr.Load(),
	})
}

// drain waits for the workers after the deadline. Cancelable systems return
// at once; the others empty their queues as holders unlock. If that takes
// longer than DrainTimeout the clients are closed, which fails every wait.
func (r *run) drain(done <-chan struct{}) error {
	r.report("drain", time.Since(r.start))
	t := time.NewTimer(r.cfg.DrainTimeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
	}
	r.cfg.Logger.Warn("clients still busy after the deadline; closing them", "system", r.info.Name, "workload", r.kind)
	closeAll(r.clients)
	t.Reset(r.cfg.DrainTimeout)
	select {
	case <-done:
		return fmt.Errorf("%w (%v); clients were closed under them", ErrDrain, r.cfg.DrainTimeout)
	case <-t.C:
		return fmt.Errorf("%w even after closing the clients; goroutines leaked", ErrDrain)
	}
}

// work is one client's loop.
func (r *run) work(w *worker) {
	defer func() {
		if w.unlockCancel != nil {
			w.unlockCancel()
		}
	}()
	switch r.kind {
	case Uncontended:
		r.closedLoop(r.ctx, w, func(rng *rand.Rand) (int, lockbench.Mode) {
			return rng.IntN(len(r.names)), lockbench.Exclusive
		})
	case Hot:
		r.closedLoop(r.ctx, w, func(*rand.Rand) (int, lockbench.Mode) { return 0, lockbench.Exclusive })
	case Readers:
		r.closedLoop(r.ctx, w, func(rng *rand.Rand) (int, lockbench.Mode) {
			mode := lockbench.Exclusive
			if rng.Float64() < r.cfg.SharedFraction {
				mode = lockbench.Shared
			}
			return rng.IntN(len(r.names)), mode
		})
	case Coupon:
		r.couponLoop(w)
	}
}

// closedLoop runs lock+unlock cycles until ctx ends or the count bound.
func (r *run) closedLoop(ctx context.Context, w *worker, pick func(*rand.Rand) (int, lockbench.Mode)) {
	for range r.cfg.MaxOpsPerClient {
		if ctx.Err() != nil {
			return
		}
		res, mode := pick(w.rng)
		r.cycleOnce(ctx, w, res, mode, true)
	}
}

// cycleOnce locks and unlocks one resource and, if measured, records the
// cycle when it completed inside the window.
func (r *run) cycleOnce(ctx context.Context, w *worker, res int, mode lockbench.Mode, measured bool) {
	t0 := time.Now()
	held, err := w.client.Lock(ctx, r.names[res], mode)
	t1 := time.Now()
	if err != nil {
		r.lockFailed(ctx, w, err)
		return
	}
	if !r.guard.enter(res, mode) {
		w.overlaps++
	}
	r.guard.leave(res, mode)
	r.unlock(w, held)
	t2 := time.Now()
	r.live.Add(1)
	if measured && r.inWindow(t2) {
		w.acquire.Record(t1.Sub(t0))
		w.cycle.Record(t2.Sub(t0))
		w.cycles++
	}
}

func (r *run) inWindow(t time.Time) bool { return !t.Before(r.measure0) && !t.After(r.end) }

// lockFailed counts a failed Lock unless the run is over, and backs off so a
// broken system cannot make the loop spin.
func (r *run) lockFailed(ctx context.Context, w *worker, err error) {
	if ended(ctx) {
		return
	}
	r.noteErr(w, "lock", err)
	r.sleep(w, time.Now().Add(r.cfg.ErrorBackoff))
}

// ended reports whether ctx is over. The clock decides as well as ctx.Err():
// a server enforcing the deadline the client propagated (etcd does) can
// answer "timed out" before the context's own timer has fired.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

func (r *run) noteErr(w *worker, op string, err error) {
	w.errors++
	r.liveErr.Add(1)
	if len(w.samples) < 3 {
		w.samples = append(w.samples, op+": "+err.Error())
	}
}

// unlock releases held with its own deadline, since it must run even after
// the run's context ended.
func (r *run) unlock(w *worker, held lockbench.Held) {
	if err := held.Unlock(r.unlockContext(w, time.Now())); err != nil {
		r.noteErr(w, "unlock", err)
	}
}

// unlockContext returns the context of one Unlock: not cancelled with the
// run, and ending between UnlockTimeout/2 and UnlockTimeout from now. A
// worker makes one every UnlockTimeout/2 rather than one per Unlock: a
// context with a deadline costs a timer, which at 400k cycles a second was
// an eighth of the harness's CPU (the same for every system, but it
// weighed on the fastest most).
func (r *run) unlockContext(w *worker, now time.Time) context.Context {
	if w.unlockCtx == nil || !now.Before(w.unlockRenew) {
		if w.unlockCancel != nil {
			w.unlockCancel()
		}
		w.unlockCtx, w.unlockCancel = context.WithTimeout(context.WithoutCancel(r.ctx), r.cfg.UnlockTimeout)
		w.unlockRenew = now.Add(r.cfg.UnlockTimeout / 2)
	}
	return w.unlockCtx
}

// sleep waits until t or the end of the run; it reports whether the run
// goes on.
func (r *run) sleep(w *worker, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return r.ctx.Err() == nil
	}
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	select {
	case <-r.ctx.Done():
		w.timer.Stop()
		return false
	case <-w.timer.C:
		return true
	}
}

// result merges the workers' tallies.
func (r *run) result(cpu cpuWindow) Result {
	window := r.end.Sub(r.measure0)
	res := Result{
		System: r.info.Name, Workload: r.kind, Clients: len(r.workers), Window: window,
		HarnessCPU: cores(cpu.harness, window), ServerCPU: -1,
	}
	if cpu.reported {
		res.ServerCPU = cores(cpu.server, window)
	}
	var acq, cyc measure.Histogram
	counts := make([]uint64, len(r.workers))
	for i, w := range r.workers {
		acq.Merge(&w.acquire)
		cyc.Merge(&w.cycle)
		counts[i] = w.cycles
		res.Cycles += w.cycles
		res.Errors += w.errors
		res.Overlaps += w.overlaps
		for _, s := range w.samples {
			if len(res.ErrorSamples) < 5 && !slices.Contains(res.ErrorSamples, s) {
				res.ErrorSamples = append(res.ErrorSamples, s)
			}
		}
	}
	res.OpsPerSec = float64(res.Cycles) / window.Seconds()
	res.Acquire, res.Cycle = acq.Summarize(), cyc.Summarize()
	res.Fairness = measure.FairnessOf(counts)
	res.Notes = r.notes()
	if r.kind == Readers && !r.info.Shared {
		res.SharedAsExclusive = true
	}
	if r.kind == Coupon {
		res.Coupon = r.couponResult()
	}
	return res
}

func cores(d, window time.Duration) float64 {
	if window <= 0 {
		return 0
	}
	return d.Seconds() / window.Seconds()
}

// notes states the limitations that bear on this workload's figures.
func (r *run) notes() []string {
	var n []string
	if r.kind == Readers && !r.info.Shared {
		n = append(n, "no shared mode: shared requests were served as exclusive")
	}
	if r.kind == Coupon {
		if r.info.Fencing != lockbench.FencingMonotonic {
			n = append(n, "no monotonic fencing token: the store could not refuse stale writers")
		}
		if !r.info.Cancelable {
			n = append(n, "lock wait cannot be cancelled: requests waited past the coupon deadline")
		}
	}
	return n
}
