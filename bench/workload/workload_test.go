package workload

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed-a6839e30/dlm/bench/lockbench"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// shortConfig is a run short enough for unit tests.
func shortConfig() Config {
	c := DefaultConfig()
	c.Clients = 4
	c.Duration = 400 * time.Millisecond
	c.Warmup = 50 * time.Millisecond
	c.Resources = 1000
	c.Rate = 2000
	c.Coupons = 100
	return c
}

func startMem(t *testing.T, m *memSystem) *memSystem {
	t.Helper()
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestClosedLoopWorkloads(t *testing.T) {
	for _, kind := range []Kind{Uncontended, Hot, Readers} {
		t.Run(string(kind), func(t *testing.T) {
			sys := startMem(t, &memSystem{})
			var progress int
			cfg := shortConfig()
			cfg.ProgressEvery = 50 * time.Millisecond
			cfg.Progress = func(Progress) { progress++ }
			res, err := Run(context.Background(), sys, kind, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Cycles == 0 || res.Errors != 0 || res.Overlaps != 0 {
				t.Fatalf("cycles=%d errors=%d overlaps=%d (%v)", res.Cycles, res.Errors, res.Overlaps, res.ErrorSamples)
			}
			if res.Acquire.Count != res.Cycles || res.Cycle.Count != res.Cycles || res.Fairness.Clients != 4 {
				t.Fatalf("histogram counts %d/%d for %d cycles, fairness %+v", res.Acquire.Count, res.Cycle.Count, res.Cycles, res.Fairness)
			}
			if res.Window != cfg.Duration-cfg.Warmup || res.OpsPerSec <= 0 || res.Coupon != nil {
				t.Fatalf("window %v ops %v coupon %v", res.Window, res.OpsPerSec, res.Coupon)
			}
			if progress == 0 {
				t.Fatal("no progress reported")
			}
		})
	}
}

func TestReadersOnExclusiveOnlySystemSaysSo(t *testing.T) {
	sys := startMem(t, &memSystem{noShared: true})
	res, err := Run(context.Background(), sys, Readers, shortConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !res.SharedAsExclusive || len(res.Notes) == 0 {
		t.Fatalf("shared-as-exclusive %v notes %v", res.SharedAsExclusive, res.Notes)
	}
}

func TestCouponIssuesExactlyTheTotal(t *testing.T) {
	sys := startMem(t, &memSystem{})
	res, err := Run(context.Background(), sys, Coupon, shortConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := res.Coupon
	if c == nil || c.Issued != 100 || c.OverIssued != 0 || c.Remaining != 0 || c.RejectedStale != 0 || !c.Fenced {
		t.Fatalf("coupon %+v", c)
	}
	// 350 ms at 2000/s.
	if c.Offered != 700 {
		t.Fatalf("offered %d, want 700", c.Offered)
	}
	sum := c.Issued + c.SoldOut + c.RejectedStale + c.Busy + c.Expired + c.Failed + c.Unanswered
	if sum != c.Offered {
		t.Fatalf("outcomes add to %d, offered %d: %+v", sum, c.Offered, c)
	}
	if c.SoldOutAfter <= 0 || c.SoldOutAfter > res.Window {
		t.Fatalf("sold out after %v", c.SoldOutAfter)
	}
}

// A lock that grants everything, with holders that stall mid-update, must
// show up as overlaps and over-issued coupons when there is no fencing, and
// as stale rejections without over-issue when there is.
func TestCouponSeesBrokenLocks(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		sys := startMem(t, &memSystem{leaky: true, opaque: !fenced})
		cfg := shortConfig()
		cfg.HoldPause, cfg.HoldPauseProb = 20*time.Millisecond, 1
		res, err := Run(context.Background(), sys, Coupon, cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := res.Coupon
		if res.Overlaps == 0 || c.Fenced != fenced {
			t.Fatalf("fenced=%v: overlaps %d, coupon %+v", fenced, res.Overlaps, c)
		}
		if fenced && (c.OverIssued != 0 || c.RejectedStale == 0) {
			t.Fatalf("fenced store: %+v", c)
		}
		// Unfenced, overlapping read-modify-writes lose decrements: more
		// coupons handed out than the count went down by.
		if !fenced && c.Issued <= uint64(cfg.Coupons-c.Remaining) {
			t.Fatalf("unfenced store lost no update: %+v", c)
		}
		t.Logf("fenced=%v overlaps=%d %+v", fenced, res.Overlaps, *c)
	}
}

func TestNonCancelableSystemDrains(t *testing.T) {
	sys := startMem(t, &memSystem{noCancel: true})
	res, err := Run(context.Background(), sys, Hot, shortConfig())
	if err != nil {
		t.Fatal(err)
	}
	if res.Cycles == 0 || res.Errors != 0 {
		t.Fatalf("cycles %d errors %d %v", res.Cycles, res.Errors, res.ErrorSamples)
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	sys := startMem(t, &memSystem{})
	ctx, cancel := context.WithCancel(context.Background())
	cfg := shortConfig()
	cfg.Duration = time.Hour
	cfg.Progress = func(p Progress) {
		if p.Phase == "warmup" || p.Phase == "measure" {
			cancel()
		}
	}
	cfg.ProgressEvery = 10 * time.Millisecond
	start := time.Now()
	_, err := Run(ctx, sys, Uncontended, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if time.Since(start) > 30*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
}

func TestRunNeedsStartedSystem(t *testing.T) {
	_, err := Run(context.Background(), &memSystem{}, Hot, shortConfig())
	if !errors.Is(err, lockbench.ErrNotStarted) {
		t.Fatalf("err %v", err)
	}
}

func TestStoreFencing(t *testing.T) {
	tok := func(n uint64) lockbench.Fence { return lockbench.Fence{Token: n, Monotonic: true} }
	s := newStore(10, true)
	now := time.Unix(0, 0)
	if left, err := s.read(tok(5)); err != nil || left != 10 {
		t.Fatal(left, err)
	}
	// A newer holder reads; the older one's write is now stale.
	if _, err := s.read(tok(6)); err != nil {
		t.Fatal(err)
	}
	if err := s.write(tok(5), 9, now); !errors.Is(err, errStale) {
		t.Fatalf("stale write accepted: %v", err)
	}
	if err := s.write(tok(6), 9, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.read(tok(4)); !errors.Is(err, errStale) {
		t.Fatalf("stale read accepted: %v", err)
	}
	if s.remaining != 9 || s.issued != 1 {
		t.Fatalf("remaining %d issued %d", s.remaining, s.issued)
	}
	// Unfenced, the same interleaving issues twice for one decrement.
	u := newStore(10, false)
	a, _ := u.read(tok(5))
	b, _ := u.read(tok(6))
	_ = u.write(tok(5), a-1, now)
	_ = u.write(tok(6), b-1, now)
	if u.remaining != 9 || u.issued != 2 {
		t.Fatalf("unfenced remaining %d issued %d", u.remaining, u.issued)
	}
}

func TestGuard(t *testing.T) {
	g := newGuard(2)
	ex, sh := lockbench.Exclusive, lockbench.Shared
	steps := []struct {
		enter bool
		res   int
		mode  lockbench.Mode
		ok    bool
	}{
		{true, 0, sh, true}, {true, 0, sh, true}, {true, 1, ex, true}, // two readers, another resource
		{true, 0, ex, false}, {false, 0, ex, true}, // a writer among readers
		{false, 0, sh, true}, {false, 0, sh, true}, {true, 0, ex, true},
		{true, 0, sh, false}, {false, 0, sh, true}, // a reader under a writer
		{true, 0, ex, false}, // two writers
	}
	for i, s := range steps {
		if !s.enter {
			g.leave(s.res, s.mode)
			continue
		}
		if got := g.enter(s.res, s.mode); got != s.ok {
			t.Fatalf("step %d: enter(%d,%v)=%v", i, s.res, s.mode, got)
		}
	}
}

func TestConfig(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mut := range []func(*Config){
		func(c *Config) { c.Clients = 0 },
		func(c *Config) { c.Warmup = c.Duration },
		func(c *Config) { c.SharedFraction = 1.5 },
		func(c *Config) { c.Rate = 0 },
		func(c *Config) { c.CouponTTL = 0 },
		func(c *Config) { c.HoldPauseProb = 2 },
		func(c *Config) { c.MaxOpsPerClient = 0 },
		func(c *Config) { c.Logger = nil },
	} {
		c := DefaultConfig()
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%+v validated: %v", c, err)
		}
	}
	kinds, err := ParseKinds(" hot,coupon,hot ")
	if err != nil || len(kinds) != 2 || kinds[0] != Hot || kinds[1] != Coupon {
		t.Fatal(kinds, err)
	}
	if all, _ := ParseKinds("all"); len(all) != 4 {
		t.Fatal(all)
	}
	if _, err := ParseKinds("hot,cold"); !errors.Is(err, ErrUnknownKind) {
		t.Fatal(err)
	}
}

// TestUnlockContext: an Unlock's context outlives the run's, ends within
// UnlockTimeout, and is shared only until half of it has passed.
func TestUnlockContext(t *testing.T) {
	runCtx, cancelRun := context.WithCancel(context.Background())
	r := &run{cfg: DefaultConfig(), ctx: runCtx}
	w := &worker{}
	t0 := time.Now()
	first := r.unlockContext(w, t0)
	cancelRun()
	if first.Err() != nil {
		t.Fatalf("unlock context ended with the run: %v", first.Err())
	}
	dl, ok := first.Deadline()
	if !ok || dl.After(time.Now().Add(r.cfg.UnlockTimeout)) || dl.Before(t0.Add(r.cfg.UnlockTimeout/2)) {
		t.Fatalf("deadline %v (ok %v), want within UnlockTimeout %v of %v", dl, ok, r.cfg.UnlockTimeout, t0)
	}
	if again := r.unlockContext(w, t0.Add(r.cfg.UnlockTimeout/2-time.Millisecond)); again != first {
		t.Fatal("a new context before half the timeout passed")
	}
	renewed := r.unlockContext(w, t0.Add(r.cfg.UnlockTimeout/2))
	if renewed == first || first.Err() == nil {
		t.Fatal("the context was not renewed (and the old one released) at half the timeout")
	}
	w.unlockCancel()
}
