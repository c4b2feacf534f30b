package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/client"
	"github.com/seed-a6839e30/dlm/modes"
)

// op is one lock+unlock of the prober: when it began and how long it took.
type op struct {
	at   time.Time
	took time.Duration
}

// prober locks and unlocks resources mastered by one agent in a loop,
// through its own session on another, and keeps what each pair took.
type prober struct {
	c     *client.Client
	ls    *client.Lockspace
	names []string

	mu     sync.Mutex
	ops    []op
	failed int // pairs that ended in an error (each bounded by opLimit)

	stop chan struct{}
	done chan struct{}
}

// opLimit bounds one lock+unlock, so that a stuck request shows as a
// failure rather than hanging the run.
const opLimit = 10 * time.Second

// newProber connects to the agent at addr and picks n resources the agent
// master masters (asking the cluster, by Describe).
func newProber(ctx context.Context, addr, master string, n int) (*prober, error) {
	cfg := client.DefaultConfig()
	cfg.Addrs, cfg.Name = []string{addr}, "prober"
	c, err := client.DialConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	p := &prober{c: c, ls: c.Lockspace(lockspace), stop: make(chan struct{}), done: make(chan struct{})}
	for i := 0; len(p.names) < n; i++ {
		if i >= 100*n {
			c.Close()
			return nil, fmt.Errorf("%s masters none of probe/0 to probe/%d", master, i-1)
		}
		name := fmt.Sprintf("probe/%d", i)
		r, err := p.ls.Describe(ctx, name)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("describe %s: %w", name, err)
		}
		if r.Master == master {
			p.names = append(p.names, name)
		}
	}
	go p.loop()
	return p, nil
}

func (p *prober) loop() {
	defer close(p.done)
	for i := 0; ; i++ {
		select {
		case <-p.stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), opLimit)
		t0 := time.Now()
		lk, err := p.ls.Lock(ctx, p.names[i%len(p.names)], modes.EX)
		if err == nil {
			err = lk.Unlock()
		}
		d := time.Since(t0)
		cancel()
		p.mu.Lock()
		if err != nil {
			p.failed++
		} else {
			p.ops = append(p.ops, op{t0, d})
		}
		p.mu.Unlock()
	}
}

// take returns the pairs completed since the last take and how many failed,
// and starts a new window.
func (p *prober) take() ([]op, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ops, failed := p.ops, p.failed
	p.ops, p.failed = nil, 0
	return ops, failed
}

// close stops the loop (waiting for its last pair) and the session.
func (p *prober) close() {
	close(p.stop)
	<-p.done
	_ = p.c.Close()
}

// window summarizes a prober's pairs.
type window struct {
	ops, failed   int
	max, p99, p50 time.Duration
	maxAt         time.Time // when the longest began
	longest       []op      // the five longest pairs, longest first
}

func summarizeOps(ops []op, failed int) window {
	w := window{ops: len(ops), failed: failed}
	if len(ops) == 0 {
		return w
	}
	ds := make([]time.Duration, len(ops))
	for i, o := range ops {
		ds[i] = o.took
		if o.took > w.max {
			w.max, w.maxAt = o.took, o.at
		}
	}
	slices.Sort(ds)
	w.p99, w.p50 = ds[len(ds)*99/100], ds[len(ds)/2]
	w.longest = slices.Clone(ops)
	slices.SortStableFunc(w.longest, func(a, b op) int { return cmp.Compare(b.took, a.took) })
	w.longest = slices.Clip(w.longest[:min(5, len(w.longest))])
	return w
}

// medianMax returns the median (the lower middle of an even count) and the
// largest of vs.
func medianMax(vs []float64) (median, hi float64) {
	if len(vs) == 0 {
		return 0, 0
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	return vs[(len(vs)-1)/2], vs[len(vs)-1]
}
