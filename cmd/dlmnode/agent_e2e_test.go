//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/internal/agent"
	"github.com/seed-a6839e30/dlm/internal/syncbuf"
	"github.com/seed-a6839e30/dlm/modes"
)

// These tests run the real dlmnode binary as processes on loopback. Every
// wait is bounded; they stop only the processes they started, by pid.

func startAgents(t *testing.T, spec clusterSpec) *localCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := startLocalCluster(ctx, dlmnodeBinary(t), t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.kill() // whatever the test left running, by pid
		if t.Failed() {
			for _, p := range c.procs {
				if b, err := os.ReadFile(p.logPath); err == nil {
					t.Logf("--- log of %s:\n%s", p.name, tail(string(b), 40))
				}
			}
		}
	})
	return c
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}

func (c *localCluster) proc(name string) *agentProc {
	for _, p := range c.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := agent.Fetch(ctx, u, "", nil, "", v); err != nil {
		t.Fatal(err)
	}
}

func scrape(t *testing.T, u string) string {
	t.Helper()
	resp, err := probeClient.Get(u + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricValue finds one sample in a Prometheus text exposition; -1 if
// absent.
func metricValue(text, sample string) float64 {
	for line := range strings.SplitSeq(text, "\n") {
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// startMember starts a member named name embedded in the test, joining
// the agents of c through their gossip addresses, with what tweak sets
// beside; its log is shown if the test fails.
func startMember(ctx context.Context, t *testing.T, c *localCluster, name string, members []string, tweak func(*dlm.Config)) *dlm.Node {
	t.Helper()
	var seeds []string
	for _, p := range c.procs {
		seeds = append(seeds, p.gossip)
	}
	cfg := dlm.DefaultConfig()
	cfg.Name, cfg.Members, cfg.Seeds, cfg.GossipAddr = name, members, seeds, "127.0.0.1:0"
	if tweak != nil {
		tweak(&cfg)
	}
	log := &syncbuf.Buffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(log, nil))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- log of %s:\n%s", name, tail(log.String(), 40))
		}
	})
	node, err := dlm.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return node
}

// resourceOn returns a resource name that master masters in the current
// view.
func resourceOn(t *testing.T, ls *dlm.Lockspace, prefix, master string) string {
	t.Helper()
	for i := range 10000 {
		if name := fmt.Sprintf("%s-%d", prefix, i); ls.MasterOf(name) == master {
			return name
		}
	}
	t.Fatalf("no resource mastered by %s", master)
	return ""
}

// findResource looks a resource up in a cluster lock dump.
func findResource(cl agent.ClusterLocks, lockspace, name string) (dlm.ResourceDump, bool) {
	for _, n := range cl.Nodes {
		if n.Locks == nil {
			continue
		}
		for _, r := range n.Locks.Resources {
			if r.Lockspace == lockspace && r.Name == name {
				return r, true
			}
		}
	}
	return dlm.ResourceDump{}, false
}

// TestAgentsCluster: three agent processes and a fourth member embedded in
// the test form one cluster; the test's locks show in any agent's
// cluster-wide lock dump with their modes, owners and tokens, the masters'
// metrics move, status and lockdump print them, the page shows them in a
// real browser; SIGTERM makes an agent leave cleanly (the lock it mastered
// is still held, at its new master, with its token); with two agents gone
// the third turns unready within the lease.
func TestAgentsCluster(t *testing.T) {
	const lease = 1500 * time.Millisecond
	members := []string{"a1", "a2", "a3", "t4"}
	c := startAgents(t, clusterSpec{
		names: members[:3], members: members,
		extra: func(p *agentProc) []string {
			args := []string{"--lease", lease.String(), "--heartbeat", "250ms"}
			if p.name == "a3" { // peers reach a3 by a name, not the bound address
				_, port, _ := net.SplitHostPort(p.link)
				args = append(args, "--link-advertise", "localhost:"+port)
			}
			return args
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	node := startMember(ctx, t, c, "t4", members, func(cfg *dlm.Config) { cfg.Lease = lease })
	defer node.Close()
	if err := c.waitReady(ctx); err != nil {
		t.Fatal(err)
	}
	a1, a2, a3 := c.proc("a1"), c.proc("a2"), c.proc("a3")

	ls, err := node.Lockspace("e2e")
	if err != nil {
		t.Fatal(err)
	}
	resA, resB := resourceOn(t, ls, "inode", "a1"), resourceOn(t, ls, "dir", "a2")
	before := scrape(t, a1.AdminURL())
	if v := metricValue(before, `dlm_mastered_locks{lockspace="e2e"}`); v > 0 {
		t.Fatalf("a1 masters %v locks before any was taken", v)
	}
	o1, o2, o3 := ls.NewOwner(), ls.NewOwner(), ls.NewOwner()
	lkA, err := o1.Lock(ctx, resA, modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	lkB, err := o2.Lock(ctx, resB, modes.PR, dlm.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer lkB.Unlock()
	waitCtx, stopWaiting := context.WithCancel(ctx)
	waiter := make(chan error, 1)
	go func() {
		lk, err := o3.Lock(waitCtx, resA, modes.PR)
		if err == nil {
			err = lk.Unlock()
		}
		waiter <- err
	}()

	// Every agent answers for the whole cluster; a3 is asked.
	var cl agent.ClusterLocks
	deadline := time.Now().Add(10 * time.Second)
	for {
		cl = agent.ClusterLocks{} // decoding into a used value would keep its old fields
		getJSON(t, a3.AdminURL()+"/v1/locks?cluster=true", &cl)
		if r, ok := findResource(cl, "e2e", resA); ok && len(r.Waiting) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter never showed in the cluster dump: %+v", cl)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if cl.From != "a3" || len(cl.Nodes) != 4 {
		t.Fatalf("cluster dump from %s has %d nodes, want a3 and 4", cl.From, len(cl.Nodes))
	}
	for _, n := range cl.Nodes {
		if (n.Node == "t4") != (n.Locks == nil) || (n.Node == "t4") != (n.Error != "") {
			t.Errorf("node %s: locks %v, error %q (only t4, no agent, has no answer)", n.Node, n.Locks != nil, n.Error)
		}
	}
	rA, _ := findResource(cl, "e2e", resA)
	if rA.Master != "a1" || len(rA.Granted) != 1 || len(rA.Waiting) != 1 {
		t.Fatalf("%s: %+v", resA, rA)
	}
	if g := rA.Granted[0]; g.Node != "t4" || g.Mode != modes.EX || g.Owner != o1.ID() || g.Token != lkA.Token() || g.ID != lkA.ID() {
		t.Errorf("%s granted %+v, want t4's EX lock %d of owner %d, token %d", resA, g, lkA.ID(), o1.ID(), lkA.Token())
	}
	if w := rA.Waiting[0]; w.Node != "t4" || w.Requested != modes.PR || w.Owner != o3.ID() || w.Token != 0 || w.Wait <= 0 {
		t.Errorf("%s waiting %+v, want t4's PR request of owner %d", resA, w, o3.ID())
	}
	rB, ok := findResource(cl, "e2e", resB)
	if !ok || rB.Master != "a2" || len(rB.Granted) != 1 {
		t.Fatalf("%s: %+v", resB, rB)
	}
	if g := rB.Granted[0]; g.Mode != modes.PR || g.Owner != o2.ID() || g.Token != lkB.Token() || g.TTL <= 50*time.Second {
		t.Errorf("%s granted %+v, want PR of owner %d, token %d, about a minute of TTL", resB, g, o2.ID(), lkB.Token())
	}
	after := scrape(t, a1.AdminURL())
	if v := metricValue(after, `dlm_mastered_locks{lockspace="e2e"}`); v != 2 {
		t.Errorf("a1's dlm_mastered_locks{lockspace=\"e2e\"} = %v, want 2 (the EX lock and the waiter)", v)
	}
	if v := metricValue(after, `dlm_mastered_resources{lockspace="e2e"}`); v != 1 {
		t.Errorf("a1's dlm_mastered_resources = %v, want 1", v)
	}
	for _, m := range []string{"go_goroutines", "process_resident_memory_bytes", "dlm_epoch", "dlm_quorum 1"} {
		if !strings.Contains(after, m) {
			t.Errorf("a1's /metrics lacks %s", m)
		}
	}
	sent := func(text string) float64 {
		return metricValue(text, `dlm_transport_messages_received_total{type="lock_request"}`)
	}
	if sent(after) <= sent(before) {
		t.Errorf("a1 received no lock request: %v then %v", sent(before), sent(after))
	}

	t.Run("status and lockdump commands", func(t *testing.T) {
		out := runDlmnode(t, 0, "status", "--admin", a2.AdminURL(), "--cluster")
		for _, want := range []string{"a1", "a2", "a3", "serving", "held (4 in view, 3 needed)"} {
			if !strings.Contains(out, want) {
				t.Errorf("status --cluster lacks %q:\n%s", want, out)
			}
		}
		out = runDlmnode(t, 0, "status", "--admin", strings.TrimPrefix(a1.AdminURL(), "http://"))
		if !strings.Contains(out, "node a1") || !strings.Contains(out, "e2e") || !strings.Contains(out, resA+"(1)") {
			t.Errorf("status of a1:\n%s", out)
		}
		out = runDlmnode(t, 0, "lockdump", "--admin", a1.AdminURL(), "--lockspace", "e2e")
		for _, want := range []string{"Resource e2e/" + resA, "master a1", "Granted", fmt.Sprintf("lock %d", lkA.ID()), "node t4", "EX", fmt.Sprintf("token %d", lkA.Token()), "Waiting", "--->PR"} {
			if !strings.Contains(out, want) {
				t.Errorf("lockdump lacks %q:\n%s", want, out)
			}
		}
		var d agent.ClusterLocks
		if err := json.Unmarshal([]byte(runDlmnode(t, 0, "lockdump", "--admin", a2.AdminURL(), "--cluster", "--json", "--prefix", "dir")), &d); err != nil {
			t.Fatal(err)
		}
		if r, ok := findResource(d, "e2e", resB); !ok || r.Granted[0].Token != lkB.Token() {
			t.Errorf("lockdump --json --cluster --prefix dir: %+v", d)
		}
		if _, ok := findResource(d, "e2e", resA); ok {
			t.Errorf("--prefix dir dumped %s", resA)
		}
		runDlmnode(t, 1, "status", "--admin", "127.0.0.1:1")
	})

	t.Run("page in a browser", func(t *testing.T) {
		checkPageInBrowser(t, a2.AdminURL(), []string{"a1", "a2", "a3", "t4"}, node.Status().Epoch, resA, lkA.Token())
	})

	// SIGTERM: a1 leaves cleanly; the lock it mastered is still held with
	// its token, at a new master; the waiter is still queued behind it.
	start := time.Now()
	if err := a1.stop(20 * time.Second); err != nil {
		t.Fatalf("a1 after SIGTERM: %v", err)
	}
	t.Logf("a1 left %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	if log, _ := os.ReadFile(a1.logPath); !bytes.Contains(log, []byte("left the cluster")) {
		t.Errorf("a1's log does not say it left:\n%s", tail(string(log), 10))
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		cl = agent.ClusterLocks{}
		getJSON(t, a2.AdminURL()+"/v1/locks?cluster=true&lockspace=e2e", &cl)
		// The new master may be t4, which no agent can ask: its own dump.
		own := node.LockDump(dlm.DumpOptions{Lockspace: "e2e"})
		cl.Nodes = append(cl.Nodes, agent.NodeLocks{Node: "t4 (embedded)", Locks: &own})
		if r, ok := findResource(cl, "e2e", resA); ok && r.Master != "a1" && len(r.Granted) == 1 {
			g := r.Granted[0]
			if g.Node != "t4" || g.Mode != modes.EX || g.Token != lkA.Token() || len(r.Waiting) != 1 {
				select {
				case err := <-waiter:
					t.Errorf("the waiter ended: %v", err)
				default:
				}
				t.Fatalf("after a1 left, %s at %s: %+v", resA, r.Master, r)
			}
			t.Logf("%s remastered at %s %v after a1's SIGTERM, still EX with token %d", resA, r.Master, time.Since(start).Round(time.Millisecond), g.Token)
			break
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(cl, "", " ")
			t.Fatalf("%s not remastered within 20 s of a1 leaving: %s", resA, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-lkA.Lost():
		t.Fatalf("the EX lock was lost when its master left cleanly: %v", lkA.Err())
	default:
	}
	// t4 may be done with the recovery before a3 is: a3's status says so
	// once it is.
	for deadline := time.Now().Add(10 * time.Second); ; {
		var st dlm.Status
		getJSON(t, a3.AdminURL()+"/v1/status", &st)
		if len(st.Recoveries) > 0 && len(st.Recoveries[0].Removed) > 0 && st.Recoveries[0].Removed[0] == "a1" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("a3's latest recovery, 10 s after t4's, does not remove a1: %+v", st.Recoveries)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := lkA.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-waiter; err != nil {
		t.Fatalf("the waiter, after the EX lock went: %v", err)
	}
	stopWaiting()

	// A second agent dies: a3 and t4 are 2 of 4, no quorum; a3's /readyz
	// turns 503 within the lease.
	if code, _ := httpStatus(ctx, a3.AdminURL()+"/readyz"); code != http.StatusOK {
		t.Fatalf("a3 not ready before a2 dies: %d", code)
	}
	killed := time.Now()
	if err := syscall.Kill(a2.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for {
		code, err := httpStatus(ctx, a3.AdminURL()+"/readyz")
		if err != nil {
			t.Fatal(err)
		}
		if code == http.StatusServiceUnavailable {
			break
		}
		if time.Since(killed) > 10*time.Second {
			t.Fatalf("a3 still ready 10 s after a2 was killed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(killed)
	t.Logf("a3's /readyz turned 503 %v after a2 was killed (lease %v)", took.Round(time.Millisecond), lease)
	// The lease ends at most lease after the last heartbeat a2 answered,
	// which was before the kill; the margin covers the probe's own HTTP
	// round trips on a loaded machine.
	if took > lease+500*time.Millisecond {
		t.Errorf("a3 turned unready %v after losing quorum, later than the lease (%v) allows", took, lease)
	}
	var st dlm.Status
	getJSON(t, a3.AdminURL()+"/v1/status", &st)
	if st.State != dlm.StateNoQuorum || st.HasQuorum {
		t.Errorf("a3 without quorum: state %s, has quorum %v", st.State, st.HasQuorum)
	}
	if code, _ := httpStatus(ctx, a3.AdminURL()+"/healthz"); code != http.StatusOK {
		t.Errorf("a3's /healthz without quorum: %d, want 200 (it is alive)", code)
	}
	if err := a3.stop(20 * time.Second); err != nil {
		t.Errorf("a3 after SIGTERM without quorum: %v", err)
	}
}

// runDlmnode runs the binary and checks its exit status; it returns stdout.
func runDlmnode(t *testing.T, wantCode int, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, dlmnodeBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != wantCode {
		t.Fatalf("dlmnode %v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, wantCode, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestAgentBadInput: each mistake is one line on stderr naming the
// setting, and exit status 2; nothing is left running.
func TestAgentBadInput(t *testing.T) {
	bin := dlmnodeBinary(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	ports := []string{"--gossip-addr", "127.0.0.1:0", "--link-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}
	with := func(extra ...string) []string {
		return append(append([]string{"agent", "--name", "a", "--members", "a"}, ports...), extra...)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want *regexp.Regexp
	}{
		{"unknown flag", with("--no-such-flag"), nil, regexp.MustCompile(`unknown flag "no-such-flag"`)},
		{"members without the node's name", append([]string{"agent", "--name", "a", "--members", "b,c"}, ports...), nil, regexp.MustCompile(`--members .*does not include this node's --name "a"`)},
		{"env members without the node's name", []string{"agent", "--admin-addr", "127.0.0.1:0"}, []string{"DLM_NAME=a", "DLM_MEMBERS=b,c"}, regexp.MustCompile(`--members b,c does not include this node's --name "a"`)},
		{"missing TLS certificate", with("--tls-cert-file", missing, "--tls-key-file", garbage, "--tls-ca-file", garbage), nil, regexp.MustCompile(`--tls-cert-file: open .*missing.pem: no such file`)},
		{"unreadable TLS certificate", with("--tls-cert-file", garbage, "--tls-key-file", garbage, "--tls-ca-file", garbage), nil, regexp.MustCompile(`--tls-cert-file .*garbage.pem`)},
		{"unreadable TLS CA", with("--tls-cert-file", garbage, "--tls-key-file", garbage, "--tls-ca-file", missing), nil, regexp.MustCompile(`--tls-ca-file: open .*missing.pem`)},
		{"admin port in use", with("--admin-addr", held.Addr().String()), nil, regexp.MustCompile(`--admin-addr 127\.0\.0\.1:\d+: address already in use`)},
		{"link port in use", with("--link-addr", held.Addr().String()), nil, regexp.MustCompile(`--link-addr 127\.0\.0\.1:\d+: address already in use`)},
		{"gossip port in use (TCP)", with("--gossip-addr", held.Addr().String()), nil, regexp.MustCompile(`--gossip-addr 127\.0\.0\.1:\d+: address already in use`)},
		{"admin on every interface without a token", with("--admin-addr", "0.0.0.0:0"), nil, regexp.MustCompile(`--admin-addr "0\.0\.0\.0:0" is not a loopback address: set --admin-token-file, or --admin-insecure`)},
		{"bad duration", with("--lease", "forever"), nil, regexp.MustCompile(`--lease: set "forever"`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if line := badInputLine(t, bin, tc.args, tc.env); !tc.want.MatchString(line) {
				t.Fatalf("stderr %q: want one line matching %v", line, tc.want)
			}
		})
	}
	// The UDP half of the gossip port: the test holds only the UDP port, so
	// another process may take the same TCP port meanwhile, and then the
	// agent rightly names that one; the test takes another port then.
	t.Run("gossip port in use (UDP)", func(t *testing.T) {
		udp := regexp.MustCompile(`--gossip-addr 127\.0\.0\.1:\d+ \(UDP\): address already in use`)
		tcp := regexp.MustCompile(`--gossip-addr 127\.0\.0\.1:\d+: address already in use`)
		for range 5 {
			heldUDP, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			line := badInputLine(t, bin, with("--gossip-addr", heldUDP.LocalAddr().String()), nil)
			_ = heldUDP.Close()
			switch {
			case udp.MatchString(line):
				return
			case tcp.MatchString(line):
				t.Logf("%q: the TCP port was taken by another process; another port", line)
			default:
				t.Fatalf("stderr %q: want one line matching %v", line, udp)
			}
		}
		t.Fatal("5 UDP ports in a row had their TCP port taken")
	})
}

// badInputLine runs dlmnode with args, which it must refuse with exit
// status 2 and one line on stderr, and returns that line.
func badInputLine(t *testing.T, bin string, args, env []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(agentEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	ee, isExit := err.(*exec.ExitError)
	if !isExit || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v, want status 2; stderr:\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "dlmnode agent: ") {
		t.Fatalf("stderr %q: want one line starting %q", stderr.String(), "dlmnode agent: ")
	}
	return lines[0]
}

// TestAgentTokenProcess: an agent process with --admin-token-file answers
// 401 on /metrics and /v1/* without the token, 200 on /healthz and
// /readyz, and 200 with it; on a non-loopback address it serves with the
// token (bound to every interface, reached here on loopback).
func TestAgentTokenProcess(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startAgents(t, clusterSpec{names: []string{"s1"}, members: []string{"s1"}, extra: func(p *agentProc) []string {
		_, port, _ := net.SplitHostPort(p.admin)
		// Bound to every interface, so the token is required; the test
		// reaches it on loopback only.
		return []string{"--admin-token-file", tokenFile, "--admin-addr", "0.0.0.0:" + port, "--admin-advertise", p.admin}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.waitReady(ctx); err != nil {
		t.Fatal(err)
	}
	base := c.procs[0].AdminURL()
	do := func(path, token string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := probeClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/metrics", "/v1/status", "/v1/locks", "/v1/status?cluster=true", "/v1/locks?cluster=true", "/debug/pprof/", "/"} {
		if code := do(path, ""); code != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d, want 401", path, code)
		}
		if code := do(path, "t0ken"); code != http.StatusOK {
			t.Errorf("%s with the token: %d, want 200", path, code)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code := do(path, ""); code != http.StatusOK {
			t.Errorf("%s without the token: %d, want 200", path, code)
		}
	}
	out := runDlmnode(t, 0, "status", "--admin", base, "--token-file", tokenFile, "--cluster")
	if !strings.Contains(out, "s1") || !strings.Contains(out, "serving") {
		t.Errorf("status with the token file:\n%s", out)
	}
	runDlmnode(t, 1, "status", "--admin", base)
	if err := c.procs[0].stop(20 * time.Second); err != nil {
		t.Errorf("SIGTERM: %v", err)
	}
}

// TestClusterCommand: dlmnode cluster starts three agents, prints their
// admin URLs and client ports (each lends a lock to dlmnode lock), and
// stops them all on SIGINT (each leaves cleanly). A member added while it
// runs is still a member when it starts again on the same directory.
func TestClusterCommand(t *testing.T) {
	bin := dlmnodeBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	c := startClusterCommand(ctx, t, bin, "--dir", dir)
	if !strings.Contains(c.out, "dlmnode status --admin "+c.rows[0].admin+" --cluster") || !strings.Contains(c.out, "dlmnode members --admin "+c.rows[0].admin) {
		t.Fatalf("output:\n%s", c.out)
	}
	for _, r := range c.rows {
		if code, err := httpStatus(ctx, r.admin+"/readyz"); err != nil || code != http.StatusOK {
			t.Errorf("%s /readyz: %d %v", r.name, code, err)
		}
	}
	var cs agent.ClusterStatus
	getJSON(t, c.rows[1].admin+"/v1/status?cluster=true", &cs)
	if len(cs.Nodes) != 3 {
		t.Fatalf("cluster status: %+v", cs)
	}
	for _, n := range cs.Nodes {
		if n.Status == nil || n.Status.State != dlm.StateServing {
			t.Errorf("%s: %+v", n.Node, n)
		}
	}
	// Each agent's client port, as printed, takes locks from a shell.
	for _, r := range c.rows {
		out := runDlmnode(t, 0, "lock", "--addr", r.client, "cluster-test", "--", "sh", "-c", `echo "token=$DLM_TOKEN"`)
		if !strings.Contains(out, "token=") || strings.Contains(out, "token=\n") {
			t.Errorf("dlmnode lock through %s: %q", r.client, out)
		}
	}
	runDlmnode(t, 0, "members", "--admin", c.rows[1].admin, "add", "node4")
	c.stop(t)

	// Started again with a fourth agent on the same directory, the
	// agents run the member set of the change, not their flags' first
	// one.
	c = startClusterCommand(ctx, t, bin, "--dir", dir, "--nodes", "4")
	var m agent.Membership
	getJSON(t, c.rows[3].admin+"/v1/members", &m)
	if m.Config.Version < 2 || !slices.Equal(m.Config.Members, []string{"node1", "node2", "node3", "node4"}) {
		t.Errorf("after the restart: %+v", m.Config)
	}
	for _, r := range c.rows {
		if _, err := os.Stat(filepath.Join(dir, "data", r.name)); err != nil {
			t.Errorf("%s's data directory: %v", r.name, err)
		}
	}
	c.stop(t)
}

// clusterCommand is a running "dlmnode cluster" and what it printed.
type clusterCommand struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *bytes.Buffer
	out    string
	rows   []clusterRow
}

type clusterRow struct {
	name, admin, client string
	pid                 int
}

// startClusterCommand runs "dlmnode cluster ARGS..." and reads its table
// of agents; the test's cleanup kills it if the test does not stop it.
func startClusterCommand(ctx context.Context, t *testing.T, bin string, args ...string) *clusterCommand {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, append([]string{"cluster"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &clusterCommand{cmd: cmd, lines: make(chan string), stderr: new(bytes.Buffer)}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// If the test ends without stopping it, its agents (each in a process
	// group of its own, out of reach of a signal to the command) are
	// killed by the pids it printed, then the command.
	t.Cleanup(func() {
		if cmd.ProcessState != nil {
			return
		}
		for _, r := range c.rows {
			// Still the agent (not a process that reused its pid)?
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", r.pid)); err == nil && bytes.Contains(b, []byte("agent\x00--name\x00"+r.name+"\x00")) {
				_ = syscall.Kill(r.pid, syscall.SIGKILL)
			}
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	row := regexp.MustCompile(`^(node\d)\s+(\d+)\s+(http://127\.0\.0\.1:\d+)\s+(127\.0\.0\.1:\d+)\s+(127\.0\.0\.1:\d+)\s+(127\.0\.0\.1:\d+)$`)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			c.lines <- s.Text()
		}
		close(c.lines)
	}()
	var out strings.Builder
	for done := false; !done; {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("dlmnode cluster ended early:\n%s\nstderr:\n%s", out.String(), c.stderr.String())
			}
			out.WriteString(line + "\n")
			if m := row.FindStringSubmatch(line); m != nil {
				pid, _ := strconv.Atoi(m[2])
				c.rows = append(c.rows, clusterRow{m[1], m[3], m[4], pid})
			}
			done = strings.Contains(line, "Ctrl-C stops them all")
		case <-ctx.Done():
			t.Fatalf("dlmnode cluster printed no addresses in time:\n%s", out.String())
		}
	}
	c.out = out.String()
	if len(c.rows) < 3 {
		t.Fatalf("output:\n%s", c.out)
	}
	return c
}

// stop interrupts the command and checks that it stopped every agent.
func (c *clusterCommand) stop(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var rest strings.Builder
	for line := range c.lines {
		rest.WriteString(line + "\n")
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("dlmnode cluster after SIGINT: %v\n%s\nstderr:\n%s", err, rest.String(), c.stderr.String())
	}
	if !strings.Contains(rest.String(), "stopped") {
		t.Errorf("after SIGINT:\n%s", rest.String())
	}
	for _, r := range c.rows {
		if err := syscall.Kill(r.pid, 0); err != syscall.ESRCH {
			t.Errorf("agent %s (pid %d) still exists after the cluster stopped: %v", r.name, r.pid, err)
			_ = syscall.Kill(r.pid, syscall.SIGKILL)
		}
	}
}
