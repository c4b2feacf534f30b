package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seed-a6839e30/dlm/bench/servers"
	"github.com/seed-a6839e30/dlm/client"
	"github.com/seed-a6839e30/dlm/modes"
)

// The loader is a process of its own so that the million locks' client
// side (its heap, its collections) shares nothing with the prober but the
// machine, as two programs of a deployment would.

// runLoader is `pause loader`: it takes the locks, prints "held N", and
// holds them until stdin ends (the prober closes it, or dies).
func runLoader(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("pause loader", flag.ContinueOnError)
	addrs := fs.String("addrs", "", "the agents' client ports, comma-separated: lock i goes through agent i mod their number")
	locks := fs.Int("locks", 0, "locks to take, each EX on its own resource")
	prefix := fs.String("prefix", "load", "resource names are PREFIX/i")
	workers := fs.Int("workers", 8, "requests in flight per session")
	// A session renews each of its locks at the lock's master every third
	// of its TTL; with a fifth of a million locks per session that is a
	// burst of work on every agent, which the agents' longest TTL keeps
	// out of the few seconds measured.
	ttl := fs.Duration("session-ttl", 5*time.Minute, "the sessions' TTL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	as := strings.Split(*addrs, ",")
	if *addrs == "" || *locks < 0 || *workers < 1 {
		return errors.New("need -addrs, -locks ≥ 0 and -workers ≥ 1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var lss []*client.Lockspace
	for i, a := range as {
		cfg := client.DefaultConfig()
		cfg.Addrs, cfg.Name, cfg.SessionTTL = []string{a}, fmt.Sprintf("loader-%d", i), *ttl
		c, err := client.DialConfig(ctx, cfg)
		if err != nil {
			return err
		}
		lss = append(lss, c.Lockspace(lockspace))
	}
	start := time.Now()
	held := make([]*client.Lock, *locks) // kept, so that nothing of theirs is collected
	var g errgroup.Group
	for s := range lss {
		for w := range *workers {
			g.Go(func() error {
				for i := s + w*len(lss); i < *locks; i += *workers * len(lss) {
					lk, err := lss[s].Lock(ctx, fmt.Sprintf("%s/%d", *prefix, i), modes.EX)
					if err != nil {
						return fmt.Errorf("lock %d through %s: %w", i, as[s], err)
					}
					held[i] = lk
				}
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return err
	}
	took := time.Since(start)
	runtime.GC()
	fmt.Fprintf(stdout, "held %d in %v\n", *locks, took.Round(time.Millisecond))
	_, err := io.Copy(io.Discard, stdin)
	runtime.KeepAlive(held)
	return err
}

// loader is the loader process, seen from the prober.
type loader struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

// startLoader runs this program as `pause loader` against the cluster's
// agents and returns once it holds its locks, and how long taking them
// took (bounded by limit).
func startLoader(c *cluster, o options, dir string, limit time.Duration) (*loader, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	var addrs []string
	for _, a := range c.agents {
		addrs = append(addrs, a.client)
	}
	logf, err := os.Create(filepath.Join(dir, "loader.log"))
	if err != nil {
		return nil, "", err
	}
	defer logf.Close()
	cmd := exec.Command(self, "loader", "-addrs", strings.Join(addrs, ","), "-locks", fmt.Sprint(o.locks))
	cmd.Stderr = logf
	cmd.SysProcAttr = servers.SysProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	l := &loader{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(l.done)
	}()
	select {
	case line, ok := <-lines:
		if ok && strings.HasPrefix(line, "held ") {
			return l, strings.TrimPrefix(line, "held "), nil
		}
		l.stop()
		return nil, "", fmt.Errorf("the loader ended without holding its locks; see %s", logf.Name())
	case <-time.After(limit):
		l.stop()
		return nil, "", fmt.Errorf("the loader did not hold its locks within %v; see %s", limit, logf.Name())
	}
}

// stop ends the loader: its stdin closes, and its group is killed if it
// has not exited within a few seconds.
func (l *loader) stop() {
	_ = l.stdin.Close()
	select {
	case <-l.done:
	case <-time.After(5 * time.Second):
		servers.SignalGroup(l.cmd.Process.Pid, true)
		<-l.done
	}
}

// cpu is the loader's CPU time so far.
func (l *loader) cpu() time.Duration {
	return servers.ProcCPU(l.cmd.Process.Pid)
}
