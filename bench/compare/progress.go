package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/bench/statusline"
	"github.com/seed-a6839e30/dlm/bench/workload"
)

// progress prints one status line per update: rewritten in place on a
// terminal, and on other outputs (CI logs) only when the phase changes or
// every plainEvery, so logs stay short.
type progress struct {
	line       *statusline.Line
	plainEvery time.Duration
	now        func() time.Time

	mu        sync.Mutex
	step      string // "[3/16]"
	lastPhase string
	lastPrint time.Time
	lastAt    time.Duration
	lastCyc   uint64
	rate      float64
}

func newProgress(w io.Writer, tty bool) *progress {
	return &progress{line: statusline.New(w, tty), plainEvery: 5 * time.Second, now: time.Now}
}

// start announces step n of total.
func (p *progress) start(n, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.step = fmt.Sprintf("[%d/%d]", n, total)
	p.lastPhase, p.lastAt, p.lastCyc, p.rate = "", 0, 0, 0
}

// update is the workload.Config.Progress callback.
func (p *progress) update(s workload.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if dt := s.Elapsed - p.lastAt; dt > 0 && s.Cycles >= p.lastCyc {
		p.rate = float64(s.Cycles-p.lastCyc) / dt.Seconds()
	}
	p.lastAt, p.lastCyc = s.Elapsed, s.Cycles
	line := fmt.Sprintf("%s %s %s: %s %.1fs/%s, %d cycles (%.0f/s), %d errors",
		p.step, s.System, s.Workload, s.Phase, s.Elapsed.Seconds(), s.Duration, s.Cycles, p.rate, s.Errors)
	if p.line.TTY() {
		p.line.Set(line)
		return
	}
	now := p.now()
	if s.Phase != p.lastPhase || now.Sub(p.lastPrint) >= p.plainEvery {
		p.line.Println(line)
		p.lastPrint = now
	}
	p.lastPhase = s.Phase
}

// println prints a message on its own line, clearing any status line.
func (p *progress) println(msg string) { p.line.Println(msg) }

// done ends the status line.
func (p *progress) done() { p.line.Done() }
