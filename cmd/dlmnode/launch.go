package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// A localCluster is agent processes on loopback, started by this process:
// dlmnode cluster runs one, and the tests run them with a member of their
// own. Ports are picked by binding port 0 and letting go; another process
// may take one before the agent binds it, so an agent that exits at once
// with status 2 and "address already in use" is started again, with fresh
// ports for the whole cluster.
type localCluster struct {
	bin    string
	logDir string
	procs  []*agentProc
}

// agentProc is one agent process and its addresses.
type agentProc struct {
	name                        string
	gossip, link, admin, client string // host:port
	args                        []string
	logPath                     string
	cmd                         *exec.Cmd
	exited                      chan struct{} // closed when the process has exited
	exitErr                     error         // set before exited closes
}

// AdminURL is the agent's admin base URL.
func (p *agentProc) AdminURL() string { return "http://" + p.admin }

// clusterSpec says what to start.
type clusterSpec struct {
	names   []string // the agents, one process each
	members []string // the configured members: names and any others
	seeds   []string // gossip addresses of members that are not agents
	// extra returns more flags for an agent, given its addresses (nil:
	// none).
	extra func(p *agentProc) []string
}

const launchAttempts = 3

// startLocalCluster starts the agents of spec and waits until each
// answers /healthz (it is bound and joining). It does not wait for the
// cluster to form: with members that are not agents, it cannot yet.
func startLocalCluster(ctx context.Context, bin, logDir string, spec clusterSpec) (*localCluster, error) {
	var err error
	for range launchAttempts {
		c := &localCluster{bin: bin, logDir: logDir}
		if err = c.launch(ctx, spec); err == nil {
			return c, nil
		}
		c.kill()
		if !errors.Is(err, errPortTaken) || ctx.Err() != nil {
			return nil, err
		}
	}
	return nil, err
}

var errPortTaken = errors.New("a port was taken before the agent bound it")

func (c *localCluster) launch(ctx context.Context, spec clusterSpec) error {
	for _, name := range spec.names {
		gossip, err := freeAddr(true)
		if err != nil {
			return err
		}
		link, err := freeAddr(false)
		if err != nil {
			return err
		}
		admin, err := freeAddr(false)
		if err != nil {
			return err
		}
		clientAddr, err := freeAddr(false)
		if err != nil {
			return err
		}
		c.procs = append(c.procs, &agentProc{name: name, gossip: gossip, link: link, admin: admin, client: clientAddr})
	}
	seeds := append([]string{}, spec.seeds...)
	for _, p := range c.procs {
		seeds = append(seeds, p.gossip)
	}
	for _, p := range c.procs {
		p.args = []string{"agent",
			"--name", p.name, "--members", strings.Join(spec.members, ","), "--seeds", strings.Join(seeds, ","),
			"--gossip-addr", p.gossip, "--link-addr", p.link, "--admin-addr", p.admin, "--client-addr", p.client,
		}
		if spec.extra != nil {
			p.args = append(p.args, spec.extra(p)...)
		}
		p.logPath = filepath.Join(c.logDir, p.name+".log")
		if err := c.start(p); err != nil {
			return err
		}
	}
	for _, p := range c.procs {
		if err := p.waitHealthy(ctx); err != nil {
			return err
		}
	}
	return nil
}

// start runs p's process, its output going to its log file.
func (c *localCluster) start(p *agentProc) error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, p.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = agentEnv()
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.cmd, p.exited, p.exitErr = cmd, make(chan struct{}), nil
	go func() {
		p.exitErr = cmd.Wait()
		_ = logf.Close()
		close(p.exited)
	}()
	return nil
}

// agentEnv is this process's environment without DLM_* settings, which
// would reach every agent and override nothing the launcher sets but
// could add what it does not mean to.
func agentEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DLM_") {
			env = append(env, kv)
		}
	}
	return env
}

// waitHealthy waits until p answers /healthz, or reports why it exited.
func (p *agentProc) waitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if code, err := httpStatus(ctx, p.AdminURL()+"/healthz"); err == nil && code == http.StatusOK {
			return nil
		}
		select {
		case <-p.exited:
			last := p.lastLogLine()
			if strings.Contains(last, "address already in use") {
				return fmt.Errorf("%w: %s: %s", errPortTaken, p.name, last)
			}
			return fmt.Errorf("agent %s exited (%v): %s", p.name, p.exitErr, last)
		case <-ctx.Done():
			return fmt.Errorf("agent %s did not answer /healthz within 30 s: %s", p.name, p.lastLogLine())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitReady waits until every agent's /readyz answers 200 (the cluster
// formed and each serves), or ctx ends.
func (c *localCluster) waitReady(ctx context.Context) error {
	for _, p := range c.procs {
		for {
			code, err := httpStatus(ctx, p.AdminURL()+"/readyz")
			if err == nil && code == http.StatusOK {
				break
			}
			select {
			case <-p.exited:
				return fmt.Errorf("agent %s exited (%v): %s", p.name, p.exitErr, p.lastLogLine())
			case <-ctx.Done():
				return fmt.Errorf("agent %s not ready: %w (last: %s)", p.name, ctx.Err(), p.lastLogLine())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

var probeClient = &http.Client{Timeout: 2 * time.Second}

func httpStatus(ctx context.Context, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (p *agentProc) lastLogLine() string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	last := ""
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); line != "" {
			last = line
		}
	}
	return last
}

// stop asks p to leave (SIGTERM) and waits for it to exit, killing it
// after timeout. It returns the process's exit error (nil: status 0).
func (p *agentProc) stop(timeout time.Duration) error {
	if p.cmd == nil {
		return nil
	}
	select {
	case <-p.exited:
		return p.exitErr
	default:
	}
	_ = terminate(p.cmd.Process)
	select {
	case <-p.exited:
		return p.exitErr
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not exit within %v of SIGTERM; killed", p.name, timeout)
	}
}

// stopAll stops every agent at once, each as stop does.
func (c *localCluster) stopAll(timeout time.Duration) error {
	errs := make(chan error, len(c.procs))
	for _, p := range c.procs {
		go func() { errs <- p.stop(timeout) }()
	}
	var all []error
	for range c.procs {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

// kill ends every agent at once, without a leave.
func (c *localCluster) kill() {
	for _, p := range c.procs {
		if p.cmd != nil {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
}

// freeAddr returns a loopback address whose port was free a moment ago,
// for TCP (and for UDP too if udp: memberlist binds both).
func freeAddr(udp bool) (string, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := l.Addr().String()
		if !udp {
			_ = l.Close()
			return addr, nil
		}
		u, uerr := net.ListenPacket("udp", addr)
		_ = l.Close()
		if uerr == nil {
			_ = u.Close()
			return addr, nil
		}
	}
	return "", errors.New("no loopback port free for both TCP and UDP")
}
