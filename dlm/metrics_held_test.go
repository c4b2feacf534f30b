package dlm

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/modes"
)

// histogramSum returns the count and sum of the histogram name with the
// given labels in reg.
func histogramSum(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) && m.Histogram != nil {
				return m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum()
			}
		}
	}
	return 0, 0
}

// TestMetricsHeldAndContended: dlm_lock_held_seconds observes each hold on
// the holder's node, from the grant to the unlock or the loss;
// dlm_lock_contended_total counts, on the master, the requests that had to
// wait, by lockspace (a try that fails, or a request granted at once, does
// not count); permits have their own.
func TestMetricsHeldAndContended(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		regs, mut := registries(3, nil)
		c := startMem(t, 3, mut)
		defer c.close()
		res := c.resourceOn(1, "held")
		lk := mustLock(t, c.ls[0], res, modes.EX)
		if _, err := c.ls[2].TryLock(bg, res, modes.PR); err == nil {
			t.Fatal("TryLock of a held lock")
		}
		waiting := make(chan *Lock, 1)
		go func() { waiting <- mustLock(t, c.ls[2], res, modes.PR) }()
		c.settle(c.queued(res, 1))
		time.Sleep(2 * time.Second)
		mustUnlock(t, lk)
		r := <-waiting
		time.Sleep(time.Second)
		mustUnlock(t, r)

		if n, sum := histogramSum(t, regs[0], "dlm_lock_held_seconds", map[string]string{"mode": "EX"}); n != 1 || sum < 1.9 || sum > 2.1 {
			t.Errorf("EX held: %d observations, %.3f s; want one of about 2 s", n, sum)
		}
		if n, sum := histogramSum(t, regs[2], "dlm_lock_held_seconds", map[string]string{"mode": "PR"}); n != 1 || sum < 0.9 || sum > 1.1 {
			t.Errorf("PR held: %d observations, %.3f s; want one of about 1 s", n, sum)
		}
		if v := metricValue(t, regs[1], "dlm_lock_contended_total", map[string]string{"lockspace": "test"}); v != 1 {
			t.Errorf("contended at the master: %v, want 1", v)
		}
		for _, k := range []int{0, 2} {
			if v := metricValue(t, regs[k], "dlm_lock_contended_total", map[string]string{"lockspace": "test"}); v > 0 {
				t.Errorf("contended on n%d, which masters nothing contended: %v", k+1, v)
			}
		}

		// A lock lost (its TTL runs out) is observed once, at the loss.
		ttl := mustLock(t, c.ls[0], c.resourceOn(2, "ttl"), modes.PW, WithTTL(3*time.Second))
		<-ttl.Lost()
		_ = ttl.Unlock()
		if n, sum := histogramSum(t, regs[0], "dlm_lock_held_seconds", map[string]string{"mode": "PW"}); n != 1 || sum > 3 {
			t.Errorf("PW lost after its TTL: %d observations, %.3f s", n, sum)
		}

		p := mustPermits(t, mustSemaphore(t, c.ls[0], c.resourceOn(1, "sem"), 2), 1)
		time.Sleep(500 * time.Millisecond)
		if err := p.Release(); err != nil {
			t.Fatal(err)
		}
		if n, sum := histogramSum(t, regs[0], "dlm_permits_held_seconds", nil); n != 1 || sum < 0.45 || sum > 0.6 {
			t.Errorf("permits held: %d observations, %.3f s", n, sum)
		}
		if n, _ := histogramSum(t, regs[0], "dlm_lock_held_seconds", map[string]string{"mode": "NL"}); n != 0 {
			t.Errorf("permits observed as NL locks: %d", n)
		}
		for op, want := range map[string]float64{"acquire": 1, "release": 1} {
			if v := metricValue(t, regs[0], "dlm_permit_requests_total", map[string]string{"op": op, "result": "ok"}); v != want {
				t.Errorf("dlm_permit_requests_total{op=%q}: %v, want %v", op, v, want)
			}
		}
	})
}
