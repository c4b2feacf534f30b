package dlm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// semRequest is one Acquire of the model test: in flight until its
// outcome arrives.
type semRequest struct {
	node   int
	n      int
	cancel context.CancelFunc
	done   chan semOutcome
	permit *Permit
	out    *semOutcome // once received from done
}

// poll returns the request's outcome if it has arrived.
func (r *semRequest) poll() *semOutcome {
	if r.out == nil {
		select {
		case o := <-r.done:
			r.out = &o
		default:
		}
	}
	return r.out
}

// wait returns the request's outcome, waiting for it.
func (r *semRequest) wait() semOutcome {
	if r.out == nil {
		o := <-r.done
		r.out = &o
	}
	return *r.out
}

type semOutcome struct {
	p   *Permit
	err error
}

// semClusterModel drives one semaphore of a 3-node cluster with random
// acquires (from any node), tries, releases and cancels, and compares it
// after every step, once the cluster is idle, with a plain model: a FIFO
// queue granted from the head while the head's permits are free. It
// checks that
//
//   - never more permits are held than the semaphore has;
//   - the requests granted are exactly those the model grants: FIFO across
//     nodes, no barging (a request for 3 is not overtaken by a later one
//     for 1), no lost wake-up;
//   - the master's waiting queue (Describe) is the model's, in order;
//   - every grant's token is above every token issued before it.
type semClusterModel struct {
	c        *cluster
	sems     []*Semaphore
	name     string
	permits  int
	held     []*semRequest // granted, in grant order
	queue    []*semRequest // waiting, in request order
	maxToken uint64
}

func (m *semClusterModel) free() int {
	n := m.permits
	for _, r := range m.held {
		n -= r.n
	}
	return n
}

// step lets the cluster settle and checks what it did against the model.
func (m *semClusterModel) step(rt *rapid.T) {
	m.c.settle(nil)
	var want []*semRequest
	for len(m.queue) > 0 && m.queue[0].n <= m.free() {
		r := m.queue[0]
		m.queue = m.queue[1:]
		m.held = append(m.held, r)
		want = append(want, r)
	}
	for _, r := range want {
		o := r.poll()
		switch {
		case o == nil:
			rt.Fatalf("node %d's request for %d not granted; the model grants it (%d of %d free)", r.node, r.n, m.free()+r.n, m.permits)
		case o.err != nil:
			rt.Fatalf("node %d's request for %d: %v; the model grants it", r.node, r.n, o.err)
		}
		r.permit = o.p
		m.checkToken(rt, o.p.Token())
	}
	for _, r := range m.queue {
		if o := r.poll(); o != nil {
			rt.Fatalf("node %d's request for %d returned %v, %v while the model has it wait (%d free, queue %v)", r.node, r.n, o.p, o.err, m.free(), m.queueText())
		}
	}
	info, err := m.c.ls[0].Describe(bg, m.name)
	if err != nil {
		rt.Fatal(err)
	}
	var got []string
	for _, w := range info.Waiting {
		got = append(got, fmt.Sprintf("%s:%d", w.Node, w.Permits))
	}
	if want := m.queueText(); fmt.Sprint(got) != fmt.Sprint(want) {
		rt.Fatalf("the master's queue is %v, the model's %v", got, want)
	}
	used := 0
	for _, g := range info.Granted {
		used += g.Permits
	}
	if used > m.permits || used != m.permits-m.free() {
		rt.Fatalf("the master has %d permits granted, the model %d, of %d", used, m.permits-m.free(), m.permits)
	}
}

func (m *semClusterModel) queueText() []string {
	var out []string
	for _, r := range m.queue {
		out = append(out, fmt.Sprintf("%s:%d", m.c.nodes[r.node].Name(), r.n))
	}
	return out
}

func (m *semClusterModel) checkToken(rt *rapid.T, tok uint64) {
	if tok <= m.maxToken {
		rt.Fatalf("token %d granted after token %d", tok, m.maxToken)
	}
	m.maxToken = tok
}

func (m *semClusterModel) Acquire(rt *rapid.T) {
	node := rapid.IntRange(0, 2).Draw(rt, "node")
	n := rapid.IntRange(1, m.permits).Draw(rt, "n")
	ctx, cancel := context.WithCancel(bg)
	r := &semRequest{node: node, n: n, cancel: cancel, done: make(chan semOutcome, 1)}
	go func() {
		p, err := m.sems[node].Acquire(ctx, n)
		r.done <- semOutcome{p, err}
	}()
	m.queue = append(m.queue, r)
	m.step(rt)
}

func (m *semClusterModel) TryAcquire(rt *rapid.T) {
	node := rapid.IntRange(0, 2).Draw(rt, "node")
	n := rapid.IntRange(1, m.permits).Draw(rt, "n")
	p, err := m.sems[node].TryAcquire(bg, n)
	if len(m.queue) == 0 && n <= m.free() {
		if err != nil {
			rt.Fatalf("TryAcquire(%d) with %d free and nobody waiting: %v", n, m.free(), err)
		}
		m.checkToken(rt, p.Token())
		m.held = append(m.held, &semRequest{node: node, n: n, permit: p})
	} else if !errors.Is(err, ErrNotQueued) {
		rt.Fatalf("TryAcquire(%d) with %d free and %d waiting: %v, want ErrNotQueued", n, m.free(), len(m.queue), err)
	}
	m.step(rt)
}

func (m *semClusterModel) Release(rt *rapid.T) {
	if len(m.held) == 0 {
		rt.Skip("nothing held")
	}
	i := rapid.IntRange(0, len(m.held)-1).Draw(rt, "i")
	r := m.held[i]
	m.held = slices.Delete(m.held, i, i+1)
	if err := r.permit.Release(); err != nil {
		rt.Fatal(err)
	}
	m.step(rt)
}

func (m *semClusterModel) Cancel(rt *rapid.T) {
	if len(m.queue) == 0 {
		rt.Skip("nothing waits")
	}
	i := rapid.IntRange(0, len(m.queue)-1).Draw(rt, "i")
	r := m.queue[i]
	m.queue = slices.Delete(m.queue, i, i+1)
	r.cancel()
	if o := r.wait(); !errors.Is(o.err, ErrCancelled) {
		rt.Fatalf("cancelled request: %v %v", o.p, o.err)
	}
	m.step(rt) // the requests behind it may fit now
}

// Check is the model's own invariant (step compares the cluster with it).
func (m *semClusterModel) Check(rt *rapid.T) {
	if m.free() < 0 {
		rt.Fatalf("the model holds more than %d permits", m.permits)
	}
}

// cleanup leaves the semaphore free for the next check.
func (m *semClusterModel) cleanup(rt *rapid.T) {
	for _, r := range m.queue {
		r.cancel()
		if o := r.wait(); o.p != nil {
			_ = o.p.Release()
		}
	}
	for _, r := range m.held {
		if r.permit != nil {
			_ = r.permit.Release()
		} else if o := r.wait(); o.p != nil {
			_ = o.p.Release()
		}
	}
	m.c.settle(nil)
	if !m.c.free(m.name)() && !rt.Failed() {
		rt.Fatalf("%q still has locks after every permit was released", m.name)
	}
}

func TestSemaphoreModelAcrossNodes(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		check := 0
		rapid.Check(bubbleTB{t}, func(rt *rapid.T) {
			check++
			m := &semClusterModel{c: c, name: c.resourceOn(check%3, fmt.Sprintf("model-%d", check)), permits: rapid.IntRange(1, 5).Draw(rt, "permits")}
			for i := range 3 {
				s, err := c.ls[i].Semaphore(m.name, m.permits)
				if err != nil {
					rt.Fatal(err)
				}
				m.sems = append(m.sems, s)
			}
			defer m.cleanup(rt)
			rt.Repeat(rapid.StateMachineActions(m))
		})
	})
}

// bubbleTB hides the *testing.T from rapid, which asks it for the test's
// deadline: a call testing refuses inside a synctest bubble.
type bubbleTB struct{ testing.TB }
