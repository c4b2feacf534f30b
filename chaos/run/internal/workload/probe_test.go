package workload

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/check"
)

// TestProbesSpreadOverResources: a service runs ProbeResources probes,
// each on a resource of its own, called at staggered times.
func TestProbesSpreadOverResources(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster member")
	}
	ls := soloLockspace(t)
	cfg := DefaultConfig()
	cfg.Clients, cfg.Candidates, cfg.Readers, cfg.Keeper = 0, 0, 0, false
	cfg.ProbeResources = 4
	h := check.NewHistory(time.Now)
	r := New(h, NewStore(), []Service{{Node: "m1", Agent: -1, LS: Embedded(ls)}}, cfg, Hooks{})
	// Two seconds are twenty periods: every probe has started by then,
	// however loaded the machine.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	wg.Wait()
	want := []string{"probe/m1/0", "probe/m1/1", "probe/m1/2", "probe/m1/3"}
	calls := map[string][]time.Duration{}
	for _, rec := range h.Records() {
		if rec.Kind == check.Acquire {
			calls[rec.Resource] = append(calls[rec.Resource], rec.Call)
		}
	}
	if len(calls) != len(want) {
		t.Fatalf("probed %d resources, want %v: %v", len(calls), want, calls)
	}
	for _, res := range want {
		if len(calls[res]) == 0 {
			t.Fatalf("no probe of %s: %v", res, calls)
		}
	}
	// Staggered: the first calls of the four are a quarter period apart,
	// not at one instant.
	if d := calls[want[3]][0] - calls[want[0]][0]; d < cfg.ProbeEvery/2 {
		t.Fatalf("the last probe started %v after the first, want about %v", d, cfg.ProbeEvery*3/4)
	}
}
