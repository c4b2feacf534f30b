package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/run/internal/nemesis"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/proc"
)

// workers are the processes that run the workload clients (this program
// again, as workers: see worker.go). The harness starts them, hears from
// each over a Unix socket (which holder holds what, when a boot is ready,
// an armed holder), and signals them like the agents.
type workers struct {
	log   *slog.Logger
	ln    net.Listener
	procs []*workerProc
	// first is the process index of the first worker in the cluster
	// (the agents come first).
	first int
	// wait bounds a worker's start (its member waits for a quorum).
	wait time.Duration

	mu     sync.Mutex
	byName map[string]*workerProc
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

// workerProc is one worker across its boots.
type workerProc struct {
	name string
	proc *proc.Proc
	// The current boot, as it reported itself.
	pid     int
	conn    net.Conn
	ready   chan struct{} // closed when the current boot is ready
	quiet   chan struct{} // closed when the current boot's clients stopped
	holds   map[int]held
	armed   map[int]chan ctlMsg
	clients map[string]int
}

func newWorkers(ln net.Listener, first int, log *slog.Logger) *workers {
	w := &workers{log: log, ln: ln, first: first, wait: 60 * time.Second, byName: make(map[string]*workerProc),
		conns: make(map[net.Conn]bool)}
	w.wg.Go(w.accept)
	return w
}

// add starts a worker process from spec; it does not wait for it.
func (w *workers) add(sup *proc.Supervisor, spec proc.Spec) error {
	wp := &workerProc{name: spec.Name, ready: make(chan struct{}), quiet: make(chan struct{}), holds: make(map[int]held),
		armed: make(map[int]chan ctlMsg)}
	w.mu.Lock()
	w.byName[spec.Name] = wp
	w.procs = append(w.procs, wp)
	w.mu.Unlock()
	p, err := sup.Start(spec)
	if err != nil {
		return err
	}
	w.mu.Lock()
	wp.proc = p
	w.mu.Unlock()
	return nil
}

func (w *workers) accept() {
	for {
		c, err := w.ln.Accept()
		if err != nil {
			return
		}
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			c.Close()
			return
		}
		w.conns[c] = true
		w.mu.Unlock()
		w.wg.Go(func() { w.serve(c) })
	}
}

// serve reads one boot's control connection.
func (w *workers) serve(c net.Conn) {
	defer func() {
		w.mu.Lock()
		delete(w.conns, c)
		w.mu.Unlock()
		c.Close()
	}()
	sc := bufio.NewScanner(c)
	var wp *workerProc
	for sc.Scan() {
		var m ctlMsg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			w.log.Warn("worker control: bad line", "err", err)
			return
		}
		w.mu.Lock()
		switch {
		case m.Ev == "hello":
			wp = w.byName[m.Worker]
			if wp != nil {
				wp.pid, wp.conn = m.Pid, c
				clear(wp.holds)
			}
		case wp == nil || wp.conn != c:
			// A connection of no worker, or of a boot that is gone.
		case m.Ev == "ready":
			wp.clients = m.Clients
			select {
			case <-wp.ready:
			default:
				close(wp.ready)
			}
		case m.Ev == "quiet":
			select {
			case <-wp.quiet:
			default:
				close(wp.quiet)
			}
		case m.Ev == "hold":
			wp.holds[m.Client] = held{nemesis.Holder{Client: m.Client, Resource: m.Res}, m.Agent - 1, time.Now().Add(m.For)}
		case m.Ev == "unhold":
			delete(wp.holds, m.Client)
		case m.Ev == "armed":
			if ch := wp.armed[m.Client]; ch != nil {
				ch <- m
				delete(wp.armed, m.Client)
			}
		}
		w.mu.Unlock()
	}
}

// waitReady waits until worker k's current boot is ready.
func (w *workers) waitReady(ctx context.Context, k int) error {
	w.mu.Lock()
	wp := w.procs[k]
	ready := wp.ready
	w.mu.Unlock()
	t := time.NewTimer(w.wait)
	defer t.Stop()
	select {
	case <-ready:
		return nil
	case <-wp.proc.Done():
		err, _ := wp.proc.ExitErr()
		return fmt.Errorf("worker %s exited (%v); see its log %s", wp.name, err, wp.proc.Spec().Log)
	case <-t.C:
		return fmt.Errorf("worker %s not ready within %v; see its log %s", wp.name, w.wait, wp.proc.Spec().Log)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// kill ends worker k's boot with SIGKILL.
func (w *workers) kill(k int) error {
	err := w.procs[k].proc.Kill()
	w.mu.Lock()
	clear(w.procs[k].holds)
	w.mu.Unlock()
	return err
}

// start starts worker k again (a new boot) and waits until it is ready.
func (w *workers) start(k int) error {
	w.mu.Lock()
	wp := w.procs[k]
	wp.ready, wp.quiet = make(chan struct{}), make(chan struct{})
	w.mu.Unlock()
	if err := wp.proc.Restart(); err != nil {
		return err
	}
	return w.waitReady(context.Background(), k)
}

// held is a long holder's hold, the agent it holds it through (-1: its
// worker's own member), and when it means to let go.
type held struct {
	nemesis.Holder
	agent int
	until time.Time
}

// pick picks the long holder of a running worker that means to hold its
// lock longest (ties by seed): the one a fault can catch holding.
func (w *workers) pick(rng *rand.Rand) (nemesis.Holder, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var best []held
	for k, wp := range w.procs {
		if wp.proc == nil || wp.proc.State() != proc.Running {
			continue
		}
		for _, id := range slices.Sorted(maps.Keys(wp.holds)) {
			h := wp.holds[id]
			h.Worker, h.Node = w.first+k, w.first+k
			if h.agent >= 0 {
				h.Node = h.agent
			}
			switch {
			case len(best) == 0 || h.until.After(best[0].until.Add(50*time.Millisecond)):
				best = []held{h}
			case !h.until.Before(best[0].until.Add(-50 * time.Millisecond)):
				best = append(best, h)
			}
		}
	}
	if len(best) == 0 {
		return nemesis.Holder{}, false
	}
	return best[rng.IntN(len(best))].Holder, true
}

// pin asks holder h to hold its lock for at least d more; it reports
// whether the request was sent (the holder may have let go already).
func (w *workers) pin(h nemesis.Holder, d time.Duration) bool {
	w.mu.Lock()
	c := w.procs[h.Worker-w.first].conn
	w.mu.Unlock()
	if c == nil {
		return false
	}
	b, _ := json.Marshal(ctlMsg{Cmd: "pin", Client: h.Client, For: d})
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, err := c.Write(append(b, '\n'))
	return err == nil
}

// arm asks holder h to stop at the point of writing, and waits for its
// answer.
func (w *workers) arm(h nemesis.Holder) bool {
	k := h.Worker - w.first
	reply := make(chan ctlMsg, 1)
	w.mu.Lock()
	wp := w.procs[k]
	c := wp.conn
	wp.armed[h.Client] = reply
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(wp.armed, h.Client)
		w.mu.Unlock()
	}()
	if c == nil {
		return false
	}
	b, _ := json.Marshal(ctlMsg{Cmd: "arm", Client: h.Client})
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := c.Write(append(b, '\n')); err != nil {
		return false
	}
	select {
	case m := <-reply:
		return m.OK
	case <-time.After(2 * time.Second):
		return false
	}
}

// clientKinds sums the clients of every worker, by kind.
func (w *workers) clientKinds() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int)
	for _, wp := range w.procs {
		for k, n := range wp.clients {
			out[k] += n
		}
	}
	return out
}

// quiesce stops every worker's clients and waits (at most d) until they
// all stopped; the workers' members stay, and so does what they hold for
// nobody (the counter's value).
func (w *workers) quiesce(d time.Duration) error {
	var errs []error
	deadline := time.After(d)
	for _, wp := range w.procs {
		w.mu.Lock()
		c, quiet := wp.conn, wp.quiet
		w.mu.Unlock()
		if c == nil || wp.proc.State() != proc.Running {
			continue
		}
		b, _ := json.Marshal(ctlMsg{Cmd: "quiesce"})
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := c.Write(append(b, '\n')); err != nil {
			errs = append(errs, fmt.Errorf("worker %s: quiesce: %w", wp.name, err))
			continue
		}
		select {
		case <-quiet:
		case <-wp.proc.Done():
			errs = append(errs, fmt.Errorf("worker %s exited", wp.name))
		case <-deadline:
			errs = append(errs, fmt.Errorf("worker %s: clients still running after %v", wp.name, d))
		}
	}
	return errors.Join(errs...)
}

// stop ends every worker with SIGTERM (they stop their clients and leave
// the cluster), each within grace, then the control server.
func (w *workers) stop(grace time.Duration) error {
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, wp := range w.procs {
		if wp.proc == nil {
			continue
		}
		wg.Go(func() {
			if err := wp.proc.Terminate(grace); err != nil && !errors.Is(err, proc.ErrNotRunning) {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	w.close()
	return errors.Join(errs...)
}

func (w *workers) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	for c := range w.conns {
		c.Close()
	}
	w.mu.Unlock()
	w.ln.Close()
	w.wg.Wait()
}

// workerFiles lists the journals and the results files the workers wrote
// into dir, a pair per boot.
func workerFiles(dir string) (journals, results []string, err error) {
	if journals, err = filepath.Glob(filepath.Join(dir, "journal-*.jsonl")); err != nil {
		return nil, nil, err
	}
	if results, err = filepath.Glob(filepath.Join(dir, "results-*.jsonl")); err != nil {
		return nil, nil, err
	}
	return journals, results, nil
}

// writeSpec writes a worker's spec next to its log.
func writeSpec(dir string, s workerSpec) (string, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, s.Name+".spec.json")
	return p, os.WriteFile(p, b, 0o644)
}
