package servers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Sentinel errors.
var (
	// ErrExited means a server process ended while it was expected to run.
	ErrExited = errors.New("servers: process exited")
	// ErrNotReady means the readiness probe did not succeed in time.
	ErrNotReady = errors.New("servers: not ready before the deadline")
)

// Spec describes one server process.
type Spec struct {
	// Name labels the process in logs and errors ("redis-0").
	Name string
	// Path is the binary; Args its arguments (without argv[0]).
	Path string
	Args []string
	// Dir is the working directory; LogPath receives stdout and stderr.
	Dir     string
	LogPath string
	// Env is added to the harness's environment.
	Env []string
}

// Proc is a running server process and its process group.
type Proc struct {
	spec   Spec
	cmd    *exec.Cmd
	log    *os.File
	logger *slog.Logger
	done   chan struct{} // closed when the process has been reaped
	err    error         // Wait's result, valid after done is closed

	stopOnce sync.Once
}

// Start launches spec in a new process group.
func Start(spec Spec, logger *slog.Logger) (*Proc, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logf, err := os.Create(spec.LogPath)
	if err != nil {
		return nil, fmt.Errorf("servers: %s: %w", spec.Name, err)
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Dir = spec.Dir
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = SysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("servers: start %s: %w", spec.Name, err)
	}
	p := &Proc{spec: spec, cmd: cmd, log: logf, logger: logger, done: make(chan struct{})}
	go p.reap()
	logger.Debug("server started", "name", spec.Name, "pid", cmd.Process.Pid, "args", strings.Join(spec.Args, " "))
	return p, nil
}

func (p *Proc) reap() {
	p.err = p.cmd.Wait()
	p.log.Close()
	close(p.done)
}

// Pid returns the process id (also the process group id).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Name returns the spec's name.
func (p *Proc) Name() string { return p.spec.Name }

// Done is closed once the process has exited and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Stop signals the process group with SIGTERM, waits up to grace, then
// sends SIGKILL and waits for the reaper. It is idempotent.
func (p *Proc) Stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		SignalGroup(p.Pid(), false)
		select {
		case <-p.done:
		case <-time.After(grace):
			p.logger.Info("server ignored SIGTERM; killing its group", "name", p.spec.Name, "grace", grace)
			SignalGroup(p.Pid(), true)
			<-p.done
		}
		// The leader is gone; kill stragglers it may have left in its group.
		SignalGroup(p.Pid(), true)
	})
}

// LogTail returns up to n bytes from the end of the process's log, for error
// messages.
func (p *Proc) LogTail(n int) string {
	b, err := os.ReadFile(p.spec.LogPath)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}

// CPU is ProcCPU of the process.
func (p *Proc) CPU() time.Duration { return ProcCPU(p.Pid()) }

// ProcCPU returns the user+system CPU time process pid has used so far, read
// from /proc; zero where /proc is not available or the process has exited.
func ProcCPU(pid int) time.Duration {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	return parseStatCPU(string(b))
}

// parseStatCPU extracts utime+stime (fields 14 and 15, in clock ticks of
// 1/100 s on Linux) from /proc/PID/stat. The command name (field 2) may hold
// spaces, so fields are counted after its closing parenthesis.
func parseStatCPU(stat string) time.Duration {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:])
	// After ")" the fields start at field 3 (state); utime is field 14.
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on every Linux ABI Go supports
	return time.Duration(ut+st) * tick
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1.
func FreePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("servers: free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// WaitReady calls probe until it returns nil, the process exits, or timeout
// passes. Polling starts at 10 ms and backs off to 250 ms, so a fast server
// is seen quickly and a slow JVM is not hammered.
func WaitReady(ctx context.Context, p *Proc, timeout time.Duration, probe func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := 10 * time.Millisecond
	var last error
	for {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		last = probe(pctx)
		pcancel()
		if last == nil {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-p.done:
			t.Stop()
			return fmt.Errorf("%w: %s (%v); log: %s", ErrExited, p.spec.Name, p.err, p.LogTail(2000))
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %s after %v (last probe: %v); log: %s", ErrNotReady, p.spec.Name, timeout, last, p.LogTail(2000))
		case <-t.C:
		}
		delay = min(delay*2, 250*time.Millisecond)
	}
}

// Group is a set of processes that start and stop together, plus the
// temporary directory they live in.
type Group struct {
	Dir    string
	procs  []*Proc
	logger *slog.Logger
	mu     sync.Mutex
}

// NewGroup creates a temporary directory under parent ("" for the OS
// default) named after prefix.
func NewGroup(parent, prefix string, logger *slog.Logger) (*Group, error) {
	dir, err := os.MkdirTemp(parent, "dlmbench-"+prefix+"-")
	if err != nil {
		return nil, fmt.Errorf("servers: temp dir: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Group{Dir: dir, logger: logger}, nil
}

// Start starts spec and adds it to the group. A relative LogPath or Dir is
// taken inside the group's directory.
func (g *Group) Start(spec Spec) (*Proc, error) {
	if spec.LogPath == "" {
		spec.LogPath = spec.Name + ".log"
	}
	if !filepath.IsAbs(spec.LogPath) {
		spec.LogPath = filepath.Join(g.Dir, spec.LogPath)
	}
	if spec.Dir == "" {
		spec.Dir = g.Dir
	} else if !filepath.IsAbs(spec.Dir) {
		spec.Dir = filepath.Join(g.Dir, spec.Dir)
	}
	if err := os.MkdirAll(spec.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("servers: %w", err)
	}
	p, err := Start(spec, g.logger)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.procs = append(g.procs, p)
	g.mu.Unlock()
	return p, nil
}

// CPU sums the CPU time of the group's live processes.
func (g *Group) CPU() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	var d time.Duration
	for _, p := range g.procs {
		d += p.CPU()
	}
	return d
}

// Stop stops every process in parallel (each with grace before SIGKILL) and
// removes the directory.
func (g *Group) Stop(grace time.Duration) error {
	g.mu.Lock()
	procs := g.procs
	g.procs = nil
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { p.Stop(grace) })
	}
	wg.Wait()
	if err := os.RemoveAll(g.Dir); err != nil {
		return fmt.Errorf("servers: remove %s: %w", g.Dir, err)
	}
	return nil
}
