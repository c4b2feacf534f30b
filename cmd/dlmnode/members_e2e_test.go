//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dlmclient "github.com/seed-a6839e30/dlm/client"
	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/internal/agent"
	"github.com/seed-a6839e30/dlm/modes"
)

// addAgent starts one more agent process in c, as an operator starts a new
// host: its own ports, the given member list, the gossip addresses of the
// running agents as seeds, and extra flags; it waits until the agent
// answers /healthz.
func (c *localCluster) addAgent(ctx context.Context, t *testing.T, name string, members []string, extra func(p *agentProc) []string) *agentProc {
	t.Helper()
	var seeds []string
	for _, p := range c.procs {
		if p.cmd != nil && !exitedYet(p) {
			seeds = append(seeds, p.gossip)
		}
	}
	var err error
	for range launchAttempts {
		p := &agentProc{name: name}
		addrs := []*string{&p.gossip, &p.link, &p.admin, &p.client}
		for i, a := range addrs {
			if *a, err = freeAddr(i == 0); err != nil {
				t.Fatal(err)
			}
		}
		p.args = []string{"agent",
			"--name", name, "--members", strings.Join(members, ","), "--seeds", strings.Join(seeds, ","),
			"--gossip-addr", p.gossip, "--link-addr", p.link, "--admin-addr", p.admin, "--client-addr", p.client,
		}
		p.args = append(p.args, extra(p)...)
		p.logPath = filepath.Join(c.logDir, name+".log")
		if err = c.start(p); err != nil {
			t.Fatal(err)
		}
		c.procs = append(c.procs, p)
		if err = p.waitHealthy(ctx); err == nil {
			return p
		}
		_ = p.cmd.Process.Kill()
		<-p.exited
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatalf("start %s: %v", name, err)
	return nil
}

func exitedYet(p *agentProc) bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// restart starts p's process again with the same flags.
func (c *localCluster) restart(ctx context.Context, t *testing.T, p *agentProc) {
	t.Helper()
	if err := c.start(p); err != nil {
		t.Fatal(err)
	}
	if err := p.waitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
}

// runDlmnodeOut runs the binary and returns its exit status, stdout and
// stderr.
func runDlmnodeOut(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, dlmnodeBinary(t), args...)
	cmd.Env = agentEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// TestMembersGrowShrinkReplaceProcesses: three agent processes with data
// directories grow to five with "dlmnode members add" (asked of agents
// that do not coordinate), each new agent started as docs/operations.md
// says; every agent's "dlmnode status" and the page (in headless Chromium)
// show the new membership; a client
// holds a lock across the changes and its next grant has a higher token;
// then one member is removed, a killed one is replaced by a new host name,
// agents restarted with their original --members come up with the stored
// membership, and the coordinator removes itself.
func TestMembersGrowShrinkReplaceProcesses(t *testing.T) {
	const lease = 1500 * time.Millisecond
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(tokenFile, []byte("m3mbers\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := func(p *agentProc) []string {
		return []string{"--data-dir", filepath.Join(dir, "data-"+p.name), "--admin-token-file", tokenFile,
			"--lease", lease.String(), "--heartbeat", "250ms"}
	}
	initial := []string{"a1", "a2", "a3"}
	c := startAgents(t, clusterSpec{names: initial, members: initial, extra: flags})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := c.waitReady(ctx); err != nil {
		t.Fatal(err)
	}
	members := func(p *agentProc) agent.Membership {
		t.Helper()
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var m agent.Membership
		if err := agent.Fetch(fctx, p.AdminURL(), "/v1/members", nil, "m3mbers", &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	notCoordinator := func() *agentProc {
		t.Helper()
		co := members(c.proc("a2")).Coordinator
		for _, p := range c.procs {
			if p.name != co && !exitedYet(p) {
				return p
			}
		}
		t.Fatal("every agent coordinates?")
		return nil
	}
	// settle waits until every running agent serves version with want,
	// every one of them in its view, then checks "dlmnode status" on each.
	settle := func(version uint64, want []string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		line := fmt.Sprintf("membership v%d: %s\n", version, strings.Join(want, " "))
		for _, p := range c.procs {
			if exitedYet(p) {
				continue
			}
			for {
				fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				var st dlm.Status
				err := agent.Fetch(fctx, p.AdminURL(), "/v1/status", nil, "m3mbers", &st)
				cancel()
				inView := 0
				for _, m := range st.Members {
					if m.InView {
						inView++
					}
				}
				if err == nil && st.State == dlm.StateServing && st.Membership.Version == version && !st.Membership.Joint() &&
					slices.Equal(st.Membership.Members, want) && inView == len(want) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: %v; membership %+v, state %s, %d in view; want %q", p.name, err, st.Membership, st.State, inView, line)
				}
				time.Sleep(100 * time.Millisecond)
			}
			out := runDlmnode(t, 0, "status", "--admin", p.AdminURL(), "--token-file", tokenFile)
			if !strings.Contains(out, line) || strings.Contains(out, "changing from") {
				t.Errorf("dlmnode status of %s lacks %q:\n%s", p.name, line, out)
			}
		}
	}

	// A client of a2's client port holds an EX lock across the changes.
	cfg := dlmclient.DefaultConfig()
	cfg.Addrs = []string{c.proc("a2").client}
	cl, err := dlmclient.DialConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ls := cl.Lockspace("members-e2e")
	held, err := ls.Lock(ctx, "inode-7", modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	first := held.Token()

	// The operator's mistakes through the command: no token, a member
	// that is not one. Nothing changes.
	a1 := c.proc("a1")
	if code, _, stderr := runDlmnodeOut(t, "members", "add", "a4", "--admin", a1.AdminURL()); code != 1 || !strings.Contains(stderr, "401 Unauthorized") {
		t.Errorf("members add without the token: exit %d, %q", code, stderr)
	}
	if code, _, stderr := runDlmnodeOut(t, "members", "remove", "a9", "--admin", a1.AdminURL(), "--token-file", tokenFile); code != 1 ||
		!strings.Contains(stderr, "a9 is not a member (membership v0: a1 a2 a3)") {
		t.Errorf("members remove a9: exit %d, %q", code, stderr)
	}

	// Grow 3 → 5, one member at a time: the change first, then the new
	// agent, started with the new member list, the seeds the command
	// printed and a data directory of its own.
	grown := []string{"a1", "a2", "a3"}
	for i, name := range []string{"a4", "a5"} {
		via := notCoordinator()
		out := runDlmnode(t, 0, "members", "add", name, "--admin", via.AdminURL(), "--token-file", tokenFile)
		grown = append(grown, name)
		version := uint64(2 * (i + 1))
		if want := fmt.Sprintf("added %s: membership v%d: %s (made by ", name, version, strings.Join(grown, " ")); !strings.Contains(out, want) ||
			!strings.Contains(out, "dlmnode agent --name "+name+" --members "+strings.Join(grown, ",")+" --seeds ") {
			t.Fatalf("dlmnode members add %s through %s:\n%s\nwant %q and the agent's command", name, via.name, out, want)
		}
		c.addAgent(ctx, t, name, grown, flags)
		settle(version, grown)
	}
	t.Run("page in a browser", func(t *testing.T) {
		checkMembershipInBrowser(t, notCoordinator().AdminURL(), "m3mbers", "v4: a1 a2 a3 a4 a5", grown)
	})
	out := runDlmnode(t, 0, "members", "--admin", c.proc("a5").AdminURL(), "--token-file", tokenFile)
	if !strings.HasPrefix(out, "membership v4: a1 a2 a3 a4 a5\n") || !strings.Contains(out, "coordinator a") || !strings.Contains(out, "a5 *") {
		t.Errorf("dlmnode members on a5:\n%s", out)
	}

	// The lock held across the growth is still held, and the next grant
	// of the resource has a higher token.
	select {
	case <-held.Lost():
		t.Fatalf("the lock was lost while the cluster grew: %v", held.Err())
	default:
	}
	if err := held.Unlock(); err != nil {
		t.Fatal(err)
	}
	next, err := ls.Lock(ctx, "inode-7", modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	if next.Token() <= first {
		t.Errorf("the grant after the growth has token %d, not above %d", next.Token(), first)
	}
	t.Logf("tokens of inode-7: %d before growing 3 → 5, %d after", first, next.Token())
	if err := next.Unlock(); err != nil {
		t.Fatal(err)
	}

	// Shrink: remove a5, then stop its agent.
	out = runDlmnode(t, 0, "members", "remove", "a5", "--admin", notCoordinator().AdminURL(), "--token-file", tokenFile)
	if !strings.Contains(out, "removed a5: membership v6: a1 a2 a3 a4 (made by ") {
		t.Errorf("members remove a5:\n%s", out)
	}
	if err := c.proc("a5").stop(20 * time.Second); err != nil {
		t.Errorf("a5, removed, after SIGTERM: %v", err)
	}
	settle(6, []string{"a1", "a2", "a3", "a4"})

	// Replace a dead host: a3 is killed; once it is out of the view, a6
	// takes its place.
	a3 := c.proc("a3")
	if err := syscall.Kill(a3.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a3.exited
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := members(c.proc("a2"))
		gone := true
		for _, ms := range m.Members {
			if ms.Name == "a3" && ms.InView {
				gone = false
			}
		}
		if gone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a3 still in the view 30 s after it was killed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	replaced := []string{"a1", "a2", "a4", "a6"}
	out = runDlmnode(t, 0, "members", "replace", "a3", "a6", "--admin", c.proc("a4").AdminURL(), "--token-file", tokenFile)
	if !strings.Contains(out, "replaced a3 by a6: membership v8: a1 a2 a4 a6 (made by ") || !strings.Contains(out, "--members a1,a2,a4,a6") {
		t.Errorf("members replace a3 a6:\n%s", out)
	}
	c.addAgent(ctx, t, "a6", replaced, flags)
	settle(8, replaced)
	lk, err := ls.Lock(ctx, "inode-7", modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	if lk.Token() <= next.Token() {
		t.Errorf("the grant after the replacement has token %d, not above %d", lk.Token(), next.Token())
	}
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}

	// A full restart. a1 and a2, whose flags still say --members a1,a2,a3,
	// come back first: they run the stored v8 (dlm_config_version 8), of
	// whose four members they are two, so they do not serve (by the list
	// in their flags they would: two of three). With a4 and a6 back the
	// cluster serves v8 again.
	running := []*agentProc{}
	for _, p := range c.procs {
		if !exitedYet(p) {
			running = append(running, p)
		}
	}
	for _, p := range running {
		if err := p.stop(20 * time.Second); err != nil {
			t.Fatalf("%s after SIGTERM: %v", p.name, err)
		}
	}
	a2 := c.proc("a2")
	for _, p := range []*agentProc{a1, a2} {
		if !slices.Contains(p.args, "a1,a2,a3") {
			t.Fatalf("%s's flags %v: want the original member list", p.name, p.args)
		}
		c.restart(ctx, t, p)
	}
	for _, p := range []*agentProc{a1, a2} {
		deadline := time.Now().Add(30 * time.Second)
		for metricValue(scrapeWithToken(ctx, t, p.AdminURL(), "m3mbers"), "dlm_config_version") != 8 {
			if time.Now().After(deadline) {
				t.Fatalf("%s restarted: dlm_config_version %v, want the stored 8", p.name, metricValue(scrapeWithToken(ctx, t, p.AdminURL(), "m3mbers"), "dlm_config_version"))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for end := time.Now().Add(2 * lease); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, p := range []*agentProc{a1, a2} {
			if code, err := httpStatus(ctx, p.AdminURL()+"/readyz"); err != nil || code != 503 {
				t.Fatalf("%s, restarted with a1 and a2 only of v8's four members: /readyz %d %v, want 503", p.name, code, err)
			}
		}
	}
	for _, name := range []string{"a4", "a6"} {
		c.restart(ctx, t, c.proc(name))
	}
	settle(8, replaced)
	if m := members(a1); m.Config.Version != 8 || !slices.Equal(m.Config.Members, replaced) {
		t.Errorf("a1 restarted runs %+v, want version 8 of %v", m.Config, replaced)
	}

	// Decommission the coordinator itself: the command returns once the
	// others run the new set, one of them coordinates, and locks are
	// granted again (the new view's recovery ends), through a new client.
	co := members(a2).Coordinator
	rest := slices.DeleteFunc(slices.Clone(replaced), func(n string) bool { return n == co })
	out = runDlmnode(t, 0, "members", "remove", co, "--admin", notCoordinator().AdminURL(), "--token-file", tokenFile, "--timeout", "30s")
	if want := fmt.Sprintf("removed %s: membership v10: %s (made by %s)", co, strings.Join(rest, " "), co); !strings.Contains(out, want) {
		t.Errorf("members remove %s (the coordinator):\n%s\nwant %q", co, out, want)
	}
	if err := c.proc(co).stop(20 * time.Second); err != nil {
		t.Errorf("%s, removed, after SIGTERM: %v", co, err)
	}
	settle(10, rest)
	if m := members(c.proc(rest[0])); m.Coordinator != rest[0] {
		t.Errorf("after %s's removal %s names %q as the coordinator, want %s", co, rest[0], m.Coordinator, rest[0])
	}
	cfg.Addrs = []string{c.proc(rest[0]).client}
	cl2, err := dlmclient.DialConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	for k := range 8 {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		lk, err := cl2.Lockspace("members-e2e").Lock(lctx, fmt.Sprintf("after-%d", k), modes.EX)
		cancel()
		if err != nil {
			t.Fatalf("a lock after the coordinator's removal: %v", err)
		}
		if err := lk.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range c.procs {
		if !exitedYet(p) {
			if err := p.stop(20 * time.Second); err != nil {
				t.Errorf("%s after SIGTERM: %v", p.name, err)
			}
		}
	}
}

// scrapeWithToken reads an agent's /metrics with its admin token.
func scrapeWithToken(ctx context.Context, t *testing.T, base, token string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := probeClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
