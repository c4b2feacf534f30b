package systems

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/bench/lockbench"
	"github.com/seed-a6839e30/dlm/bench/workload"
	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/dlm/dlmtest"
)

func TestMain(m *testing.M) { dlmtest.VerifyTestMain(m) }

func TestCatalog(t *testing.T) {
	typ := reflect.TypeFor[catalog]()
	for i := range typ.NumMethod() {
		m := typ.Method(i)
		if m.Type.NumIn() != 1 || m.Type.NumOut() != 1 || m.Type.Out(0) != entryType {
			t.Errorf("catalog method %s is not func() Entry", m.Name)
		}
	}
	// The peers, in rank order; other systems (dlm) may sit anywhere.
	names := Names()
	peers := slices.DeleteFunc(slices.Clone(names), func(n string) bool {
		return !slices.Contains([]string{"redis", "redlock", "zookeeper", "etcd"}, n)
	})
	if want := []string{"redis", "redlock", "zookeeper", "etcd"}; !slices.Equal(peers, want) {
		t.Fatalf("names %v, want the peers in the order %v", names, want)
	}
	all := All()
	for i := 1; i < len(all); i++ {
		if all[i-1].Rank > all[i].Rank || all[i-1].Name == all[i].Name {
			t.Fatalf("entries not ordered by rank or names repeated: %+v", all)
		}
	}
	got, err := Select("etcd, redis,etcd")
	if err != nil || len(got) != 2 || got[0].Name != "etcd" || got[1].Name != "redis" {
		t.Fatalf("Select: %v %v", got, err)
	}
	if all, _ := Select("all"); len(all) != len(names) {
		t.Fatalf("all: %v", all)
	}
	if _, err := Select("redis,consul"); !errors.Is(err, ErrUnknownSystem) {
		t.Fatalf("unknown: %v", err)
	}
}

// A missing binary is reported as unavailable, with the install hint.
func TestMissingBinaryIsUnavailable(t *testing.T) {
	env := lockbench.DefaultEnv()
	env.LookPath = func(string) (string, error) { return "", errors.New("not in PATH") }
	for _, e := range All() {
		if e.Name == "dlm" {
			continue // runs in this process: no binary to miss
		}
		sys, err := e.New(env)
		if err != nil {
			t.Fatal(err)
		}
		err = sys.Start(context.Background())
		hint := "bench/install-peers.sh"
		if e.Name == "dlm-client" {
			hint = "go build" // its agents come from this tree
		}
		if !errors.Is(err, lockbench.ErrUnavailable) || !strings.Contains(err.Error(), hint) {
			t.Errorf("%s: %v", e.Name, err)
		}
		if _, err := sys.NewClient(context.Background(), lockbench.ClientConfig{}); !errors.Is(err, lockbench.ErrNotStarted) {
			t.Errorf("%s: NewClient before Start: %v", e.Name, err)
		}
		if err := sys.Close(); err != nil {
			t.Errorf("%s: Close: %v", e.Name, err)
		}
	}
}

// startSystem starts a system against the real server, or skips the test
// when the server is not installed.
func startSystem(t *testing.T, e Entry) lockbench.System {
	t.Helper()
	env := lockbench.DefaultEnv()
	env.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	if e.Name == "dlm" {
		// The test checks the harness's mechanics. CI runs it beside other
		// packages' tests on two cores, where a 1.5 s lease can run out
		// while the process waits for CPU, and a node without quorum
		// refuses locks, as it must.
		e.New = func(env lockbench.Env) (lockbench.System, error) {
			cfg := DefaultDLMConfig()
			cfg.Node = func(c *dlm.Config) { c.Lease, c.HeartbeatInterval = 10*time.Second, time.Second }
			return NewDLM(env, cfg)
		}
	}
	if e.Name == "dlm-client" {
		e.New = func(env lockbench.Env) (lockbench.System, error) {
			cfg := DefaultDLMClientConfig()
			cfg.Args = []string{"--lease", "10s", "--heartbeat", "1s"} // as for dlm above
			return NewDLMClient(env, cfg)
		}
	}
	sys, err := e.New(env)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := sys.Start(ctx); err != nil {
		if errors.Is(err, lockbench.ErrUnavailable) {
			t.Skipf("skipped %s: %v", e.Name, err)
		}
		t.Fatalf("start %s: %v", e.Name, err)
	}
	t.Cleanup(func() {
		if err := sys.Close(); err != nil {
			t.Errorf("close %s: %v", e.Name, err)
		}
	})
	return sys
}

// TestSystems runs every workload briefly against every installed peer.
func TestSystems(t *testing.T) {
	for _, e := range All() {
		t.Run(e.Name, func(t *testing.T) {
			sys := startSystem(t, e)
			info := sys.Info()
			if info.Name != e.Name || info.Version == "" {
				t.Errorf("info %+v", info)
			}
			checkFencing(t, sys)
			for _, kind := range workload.Kinds() {
				runShort(t, sys, kind)
			}
		})
	}
}

func runShort(t *testing.T, sys lockbench.System, kind workload.Kind) {
	t.Helper()
	cfg := workload.DefaultConfig()
	cfg.Clients, cfg.Duration, cfg.Warmup = 4, time.Second, 200*time.Millisecond
	// A generous wait: this checks the mechanics, not how a system copes with
	// the seed's 50 ms (etcd and redlock livelock there; see BENCHMARKS.md).
	cfg.Rate, cfg.Coupons, cfg.CouponWait = 2000, 100, time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := workload.Run(ctx, sys, kind, cfg)
	if err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	t.Logf("%s: %.0f cycles/s, acquire p50 %v p99 %v, errors %d, overlaps %d",
		kind, res.OpsPerSec, res.Acquire.P50, res.Acquire.P99, res.Errors, res.Overlaps)
	if res.Cycles == 0 {
		t.Errorf("%s: no cycle completed", kind)
	}
	leased := sys.Info().Fencing != lockbench.FencingMonotonic && sys.Info().Name != "zookeeper"
	if kind != workload.Coupon || !leased {
		// Only a lease that expired under a holder (100 ms in coupon) may
		// legitimately show an overlap or a lost unlock.
		if res.Errors != 0 || res.Overlaps != 0 {
			t.Errorf("%s: %d errors %v, %d overlaps", kind, res.Errors, res.ErrorSamples, res.Overlaps)
		}
	}
	if c := res.Coupon; c != nil {
		answered := c.Issued + c.SoldOut + c.RejectedStale + c.Busy + c.Expired + c.Failed + c.Unanswered
		if c.Issued == 0 || answered != c.Offered || (c.OverIssued != 0 && !leased) {
			t.Errorf("coupon: %+v", *c)
		}
		t.Logf("coupon: %+v", *c)
	}
	if kind == workload.Readers && res.SharedAsExclusive == sys.Info().Shared {
		t.Errorf("readers: shared-as-exclusive %v for a system with shared=%v", res.SharedAsExclusive, sys.Info().Shared)
	}
}

// checkFencing takes one resource in turn from two clients and checks that
// a system claiming monotonic tokens hands out increasing ones.
func checkFencing(t *testing.T, sys lockbench.System) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var clients []lockbench.Client
	for i := range 2 {
		c, err := sys.NewClient(ctx, lockbench.ClientConfig{ID: i, TTL: 8 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	var last uint64
	for i := range 6 {
		h, err := clients[i%2].Lock(ctx, "fence-check", lockbench.Exclusive)
		if err != nil {
			t.Fatal(err)
		}
		f := h.Fence()
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if f.Monotonic != (sys.Info().Fencing == lockbench.FencingMonotonic) {
			t.Fatalf("grant %d: fence %+v but info says %s", i, f, sys.Info().Fencing)
		}
		if f.Monotonic && f.Token <= last {
			t.Fatalf("grant %d: token %d after %d", i, f.Token, last)
		}
		last = f.Token
	}
}
