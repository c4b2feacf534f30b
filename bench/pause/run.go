package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
)

// The roles of the five agents in a run.
const (
	proberAgent = 0 // n1: the prober's session, and whose log times the recovery
	masterAgent = 1 // n2: masters the prober's resources
	victim      = 4 // n5: killed
)

// result is one run's figures.
type result struct {
	load          string // how long the loader took to take its locks
	across, base  window
	commitAt      time.Time     // n1's commit of the view without the victim
	commit, done  time.Duration // n1's commit of the view without the victim, and its recovery's end, from the kill
	maxFromCommit time.Duration // when the longest pair across the failure began, from that commit
	views         int           // views n1 committed from the kill to the end of its recovery
	cpu           time.Duration // the survivors' CPU from the kill to the recovery's end, less their idle rate
	loaderCPU     time.Duration // the loader's CPU in that time
	gcs           []int64       // collections per survivor from the kill to the end of the window
	heapMB        []float64     // each survivor's heap before the kill
	traced        bool          // execution traces were kept: print when the longest began
}

func (x result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "loaded %s; across the failure: max %s (at %+.0f ms from the commit), p99 %s, p50 %s, %d pairs, %d failed; before it: max %s, p99 %s; ",
		x.load, msStr(x.across.max), ms(x.maxFromCommit), msStr(x.across.p99), msStr(x.across.p50), x.across.ops, x.across.failed,
		msStr(x.base.max), msStr(x.base.p99))
	b.WriteString("the five longest (ms, from the commit):")
	for _, o := range x.across.longest {
		fmt.Fprintf(&b, " %.1f@%+.0f", ms(o.took), ms(o.at.Sub(x.commitAt)))
		if x.traced {
			fmt.Fprintf(&b, "(unix %d)", o.at.UnixNano())
		}
	}
	b.WriteString("; ")
	fmt.Fprintf(&b, "n1: commit +%s, recovery done +%s (%d views); survivors' CPU %s beyond idle, loader's %s; collections per survivor %v; heaps %v MB",
		msStr(x.commit), msStr(x.done), x.views, msStr(x.cpu), msStr(x.loaderCPU), x.gcs, roundAll(x.heapMB))
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func msStr(d time.Duration) string { return fmt.Sprintf("%.1f ms", ms(d)) }

func roundAll(vs []float64) []int {
	out := make([]int, len(vs))
	for i, v := range vs {
		out[i] = int(v + 0.5)
	}
	return out
}

// columns are what the summary of several runs shows.
var columns = []struct {
	name string
	get  func(result) float64
}{
	{"longest pair across (ms)", func(x result) float64 { return ms(x.across.max) }},
	{"p99 across (ms)", func(x result) float64 { return ms(x.across.p99) }},
	{"longest pair before (ms)", func(x result) float64 { return ms(x.base.max) }},
	{"p99 before (ms)", func(x result) float64 { return ms(x.base.p99) }},
	{"n1's commit from the kill (ms)", func(x result) float64 { return ms(x.commit) }},
	{"n1's recovery done (ms)", func(x result) float64 { return ms(x.done) }},
	{"survivors' CPU (ms)", func(x result) float64 { return ms(x.cpu) }},
	{"collections, all survivors", func(x result) float64 {
		var n int64
		for _, g := range x.gcs {
			n += g
		}
		return float64(n)
	}},
}

// runOnce runs one cluster through one failure.
func runOnce(ctx context.Context, o options, r int) (result, error) {
	var x result
	dir := filepath.Join(o.out, fmt.Sprintf("run%d", r))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return x, err
	}
	c, err := startCluster(ctx, o, dir)
	if err != nil {
		return x, err
	}
	defer c.stop()
	ld, took, err := startLoader(c, o, dir, 10*time.Minute)
	if err != nil {
		return x, err
	}
	defer ld.stop()
	x.load = took
	p, err := newProber(ctx, c.agents[proberAgent].client, c.agents[masterAgent].name, o.probes)
	if err != nil {
		return x, err
	}
	defer p.close()
	var survivors []int
	for i := range c.agents {
		if i != victim {
			survivors = append(survivors, i)
		}
	}
	before := make([]runtimeStats, len(survivors))
	for k, i := range survivors {
		if before[k], err = scrape(ctx, c.agents[i].admin); err != nil {
			return x, err
		}
		x.heapMB = append(x.heapMB, before[k].heap/(1<<20))
	}

	if err := sleep(ctx, 200*time.Millisecond); err != nil { // the prober's first pairs connect and warm up
		return x, err
	}
	p.take()
	idle0, t0 := c.cpu(survivors), time.Now()
	if err := sleep(ctx, o.base); err != nil {
		return x, err
	}
	idle := float64(c.cpu(survivors)-idle0) / float64(time.Since(t0))
	x.base = summarizeOps(p.take())

	tail := &logTail{path: c.agents[proberAgent].log}
	if fi, err := os.Stat(tail.path); err == nil {
		tail.off = fi.Size()
	}
	var traces *errgroup.Group
	if o.trace > 0 {
		traces = startTraces(ctx, o.trace, dir, c.agents[proberAgent], c.agents[masterAgent])
		defer func() { _ = traces.Wait() }()
		if err := sleep(ctx, 100*time.Millisecond); err != nil { // the traces under way
			return x, err
		}
	}
	cpu0, loader0, killed := c.cpu(survivors), ld.cpu(), time.Now()
	if err := c.kill(victim); err != nil {
		return x, err
	}
	rec, err := watchRecovery(ctx, tail, killed, 2*time.Minute)
	if err != nil {
		return x, err
	}
	x.cpu = c.cpu(survivors) - cpu0 - time.Duration(idle*float64(time.Since(killed)))
	x.loaderCPU = ld.cpu() - loader0
	x.commitAt, x.commit, x.done, x.views = rec.commit, rec.commit.Sub(killed), rec.done.Sub(killed), rec.views
	if err := sleep(ctx, o.after+time.Until(rec.done)); err != nil {
		return x, err
	}
	x.across = summarizeOps(p.take())
	x.maxFromCommit = x.across.maxAt.Sub(rec.commit)
	if traces != nil {
		if err := traces.Wait(); err != nil {
			return x, err
		}
		x.traced = true
	}
	for k, i := range survivors {
		s, err := scrape(ctx, c.agents[i].admin)
		if err != nil {
			return x, err
		}
		x.gcs = append(x.gcs, s.gcs-before[k].gcs)
	}
	return x, nil
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
