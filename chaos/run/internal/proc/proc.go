// Package proc supervises the processes a chaos run starts: it starts them,
// signals them (SIGKILL, SIGSTOP, SIGCONT, SIGTERM) by their own process
// handle, restarts them with the same command line, and on Close kills
// whatever it started and is still alive. It never signals a process it did
// not start: every signal goes through the os.Process of its own child,
// which Go binds to a pidfd, so a pid the kernel reused is never hit.
//
// Every wait is bounded. A child that does not die within KillWait of a
// SIGKILL is reported as an error (it is a zombie the kernel still holds,
// or stuck in uninterruptible sleep); a SIGSTOP is confirmed by reading
// the child's state from /proc.
//
// Children get SIGKILL from the kernel if the supervising process dies
// (PR_SET_PDEATHSIG, set from one OS thread that lives as long as the
// supervisor), and run in their own process group, so a Ctrl-C at the
// terminal reaches the harness, which then stops them itself.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Spec is a process to run.
type Spec struct {
	// Name identifies the process in logs and errors ("n3").
	Name string
	// Path and Args are the program and its arguments (Args without the
	// program name).
	Path string
	Args []string
	// Env is the complete environment of the child; nil means the
	// supervisor's own.
	Env []string
	// Netns, if set, is a network namespace (by `ip netns` name) to run
	// the process in: the command becomes `ip netns exec NAME PATH ARGS`,
	// which execs the program, so the pid is the program's.
	Netns string
	// Log, if set, is a file that receives the child's stdout and stderr,
	// appended across restarts, each start preceded by a header line.
	Log string
}

// State is what a supervised process is doing.
type State int

// The states.
const (
	Exited  State = iota // not running: never started, killed, or exited
	Running              // running
	Stopped              // stopped by SIGSTOP
)

func (s State) String() string {
	switch s {
	case Running:
		return "running"
	case Stopped:
		return "stopped"
	}
	return "exited"
}

// Bounds on the waits.
const (
	// KillWait bounds the wait for a child to be reaped after SIGKILL.
	KillWait = 5 * time.Second
	// StopWait bounds the wait for /proc to show a child stopped after
	// SIGSTOP, or running again after SIGCONT.
	StopWait = 2 * time.Second
)

// ErrNotRunning is returned by a signal to a process that is not running.
var ErrNotRunning = errors.New("proc: process not running")

// Supervisor starts and tracks processes.
type Supervisor struct {
	log   *slog.Logger
	spawn *spawner

	mu     sync.Mutex
	procs  []*Proc
	closed bool
}

// NewSupervisor returns a supervisor that logs to log (nil: discard).
func NewSupervisor(log *slog.Logger) *Supervisor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Supervisor{log: log, spawn: newSpawner()}
}

// Proc is one supervised process across its restarts.
type Proc struct {
	s    *Supervisor
	spec Spec

	mu     sync.Mutex
	cmd    *exec.Cmd
	state  State
	boots  int           // how many times it was started
	done   chan struct{} // closed when the current incarnation was reaped
	exit   error         // how the last incarnation ended
	killed bool          // the last incarnation was ended by the supervisor
	logf   *os.File
}

// Start starts a new process from spec.
func (s *Supervisor) Start(spec Spec) (*Proc, error) {
	if spec.Name == "" || spec.Path == "" {
		return nil, errors.New("proc: a Spec needs a Name and a Path")
	}
	p := &Proc{s: s, spec: spec}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("proc: supervisor closed")
	}
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

// Name is the spec's name.
func (p *Proc) Name() string { return p.spec.Name }

// Spec returns the process's spec.
func (p *Proc) Spec() Spec { return p.spec }

func (p *Proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != Exited {
		return fmt.Errorf("proc %s: already %v", p.spec.Name, p.state)
	}
	path, args := p.spec.Path, p.spec.Args
	if p.spec.Netns != "" {
		path, args = "ip", append([]string{"netns", "exec", p.spec.Netns, p.spec.Path}, args...)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = p.spec.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var out io.Writer = io.Discard
	if p.spec.Log != "" {
		if p.logf == nil {
			f, err := os.OpenFile(p.spec.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return fmt.Errorf("proc %s: log: %w", p.spec.Name, err)
			}
			p.logf = f
		}
		fmt.Fprintf(p.logf, "=== %s start %d at %s: %s %q\n", p.spec.Name, p.boots+1,
			time.Now().UTC().Format(time.RFC3339Nano), path, args)
		out = p.logf
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := p.s.spawn.start(cmd); err != nil {
		return fmt.Errorf("proc %s: start: %w", p.spec.Name, err)
	}
	p.cmd, p.state, p.exit, p.killed = cmd, Running, nil, false
	p.boots++
	done := make(chan struct{})
	p.done = done
	p.s.log.Debug("started", "proc", p.spec.Name, "pid", cmd.Process.Pid, "boot", p.boots)
	go p.reap(cmd, done)
	return nil
}

// reap waits for one incarnation to end.
func (p *Proc) reap(cmd *exec.Cmd, done chan struct{}) {
	err := cmd.Wait()
	p.mu.Lock()
	if p.cmd == cmd {
		p.state, p.exit = Exited, err
	}
	p.mu.Unlock()
	close(done)
	p.s.log.Debug("exited", "proc", p.spec.Name, "pid", cmd.Process.Pid, "err", err)
}

// Pid is the pid of the current incarnation, or 0 if none is running.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == Exited {
		return 0
	}
	return p.cmd.Process.Pid
}

// State says whether the process is running, stopped or gone.
func (p *Proc) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// Boots is how many times the process was started.
func (p *Proc) Boots() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.boots
}

// ExitErr is how the last incarnation ended (nil while running, or if it
// exited with status 0), and whether the supervisor ended it.
func (p *Proc) ExitErr() (err error, killed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit, p.killed
}

// Done is closed when the current incarnation has ended.
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return p.done
}

// signal sends sig to the current incarnation.
func (p *Proc) signal(sig syscall.Signal) (<-chan struct{}, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == Exited {
		return p.done, fmt.Errorf("%w: %s", ErrNotRunning, p.spec.Name)
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		p.killed = true
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return p.done, fmt.Errorf("%w: %s", ErrNotRunning, p.spec.Name)
		}
		return p.done, fmt.Errorf("proc %s: %v: %w", p.spec.Name, sig, err)
	}
	return p.done, nil
}

// Kill sends SIGKILL and waits (at most KillWait) until the process is
// reaped.
func (p *Proc) Kill() error {
	done, err := p.signal(syscall.SIGKILL)
	if err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(KillWait):
		return fmt.Errorf("proc %s: not reaped %v after SIGKILL", p.spec.Name, KillWait)
	}
}

// Terminate sends SIGTERM and waits up to grace for the process to exit;
// then it kills it.
func (p *Proc) Terminate(grace time.Duration) error {
	if p.State() == Stopped {
		if err := p.Cont(); err != nil && !errors.Is(err, ErrNotRunning) {
			return err
		}
	}
	done, err := p.signal(syscall.SIGTERM)
	if err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(grace):
		p.s.log.Warn("did not exit after SIGTERM; killing", "proc", p.spec.Name, "grace", grace)
		err := p.Kill()
		if errors.Is(err, ErrNotRunning) {
			return nil
		}
		return err
	}
}

// Stop sends SIGSTOP and waits (at most StopWait) until /proc shows the
// process stopped.
func (p *Proc) Stop() error {
	if _, err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	if err := p.waitState('T'); err != nil {
		return err
	}
	p.mu.Lock()
	if p.state == Running {
		p.state = Stopped
	}
	p.mu.Unlock()
	return nil
}

// Cont sends SIGCONT and waits (at most StopWait) until /proc no longer
// shows the process stopped.
func (p *Proc) Cont() error {
	if _, err := p.signal(syscall.SIGCONT); err != nil {
		return err
	}
	p.mu.Lock()
	if p.state == Stopped {
		p.state = Running
	}
	p.mu.Unlock()
	return p.waitState(0)
}

// waitState polls /proc/PID/stat until the process is in state want (0:
// any state but stopped), the process is gone, or StopWait passes.
func (p *Proc) waitState(want byte) error {
	pid := p.Pid()
	if pid == 0 {
		return fmt.Errorf("%w: %s", ErrNotRunning, p.spec.Name)
	}
	deadline := time.Now().Add(StopWait)
	for {
		st, err := procState(pid)
		switch {
		case err != nil:
			return fmt.Errorf("proc %s: %w", p.spec.Name, err)
		case want != 0 && st == want, want == 0 && st != 'T' && st != 't':
			return nil
		case st == 'Z' || st == 'X':
			return fmt.Errorf("%w: %s exited", ErrNotRunning, p.spec.Name)
		case time.Now().After(deadline):
			return fmt.Errorf("proc %s: state %q after %v, want %q", p.spec.Name, st, StopWait, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Restart starts the process again with the same spec. It must not be
// running: kill it first (a restart "with the same name" is a new
// incarnation, as after a crash).
func (p *Proc) Restart() error { return p.start() }

// Wait waits until the current incarnation ends or ctx is done.
func (p *Proc) Wait(ctx context.Context) error {
	select {
	case <-p.Done():
		err, _ := p.ExitErr()
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Procs returns the processes started, in start order.
func (s *Supervisor) Procs() []*Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Proc(nil), s.procs...)
}

// Close kills every process still running (stopped ones too) and waits
// for each to be reaped, each wait bounded by KillWait. After Close the
// supervisor starts nothing.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	s.closed = true
	procs := append([]*Proc(nil), s.procs...)
	s.mu.Unlock()
	var errs []error
	for _, p := range procs {
		if err := p.Kill(); err != nil && !errors.Is(err, ErrNotRunning) {
			errs = append(errs, err)
		}
	}
	for _, p := range procs {
		p.mu.Lock()
		if p.logf != nil {
			_ = p.logf.Close()
			p.logf = nil
		}
		p.mu.Unlock()
	}
	s.spawn.close()
	return errors.Join(errs...)
}
