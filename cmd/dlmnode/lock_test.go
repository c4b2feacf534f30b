//go:build unix

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/clientport"
	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/dlm/dlmtest"
)

// lockAgents are dlm nodes in this process, each with a client port on
// loopback: what the lock command's processes connect to.
type lockAgents struct {
	nodes   []*dlm.Node
	servers []*clientport.Server
	addrs   []string
}

func startLockAgents(t *testing.T, n int) *lockAgents {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := dlmtest.New(ctx, n, dlmtest.TCP())
	if err != nil {
		t.Fatal(err)
	}
	a := &lockAgents{nodes: cl.Nodes()}
	var wg sync.WaitGroup
	for _, nd := range a.nodes {
		cfg := clientport.DefaultConfig()
		cfg.Node, cfg.MinTTL = nd, 500*time.Millisecond
		srv, err := clientport.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = srv.Serve(ln) }()
		a.servers = append(a.servers, srv)
		a.addrs = append(a.addrs, ln.Addr().String())
	}
	t.Cleanup(func() {
		for _, s := range a.servers {
			_ = s.Close()
		}
		wg.Wait()
		_ = cl.Close()
	})
	return a
}

// shell runs script with sh, dlmnode on its PATH, and returns its exit
// status and output; it is killed (by pid) if it runs past limit.
func shell(t *testing.T, bin string, limit time.Duration, script string, env ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Env = append(append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH")), env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%q ran past %v:\n%s", script, limit, out)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("%q: %v", script, err)
	return 0, ""
}

// TestLockFromShells: two shells run commands under one EX lock, over and
// over, through different agents: the commands never overlap (each
// appends its start and end, with its token, to one file) and their
// tokens strictly increase.
func TestLockFromShells(t *testing.T) {
	a := startLockAgents(t, 3)
	bin := dlmnodeBinary(t)
	stamps := filepath.Join(t.TempDir(), "stamps")
	script := func(addr string) string {
		return fmt.Sprintf(`for i in 1 2 3 4 5; do
  dlmnode lock --addr %s --wait 30s shared-file -- sh -c 'echo "start $DLM_TOKEN $DLM_MODE $DLM_RESOURCE" >> %s; sleep 0.05; echo "end $DLM_TOKEN" >> %s' || exit $?
done`, addr, stamps, stamps)
	}
	var wg sync.WaitGroup
	for _, addr := range a.addrs[:2] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, out := shell(t, bin, 60*time.Second, script(addr)); code != 0 {
				t.Errorf("shell exited %d:\n%s", code, out)
			}
		}()
	}
	wg.Wait()
	b, err := os.ReadFile(stamps)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 20 {
		t.Fatalf("%d stamps, want 20:\n%s", len(lines), b)
	}
	var last uint64
	for i := 0; i < len(lines); i += 2 {
		start, end := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(start) != 4 || start[0] != "start" || start[2] != "EX" || start[3] != "shared-file" || len(end) != 2 || end[0] != "end" || end[1] != start[1] {
			t.Fatalf("commands overlapped or misreported at line %d:\n%s", i+1, b)
		}
		tok, err := strconv.ParseUint(start[1], 10, 64)
		if err != nil || tok <= last {
			t.Fatalf("token %q not above %d:\n%s", start[1], last, b)
		}
		last = tok
	}
}

// TestLockStatuses: the exit statuses follow flock(1): COMMAND's own, 1
// for a lock not acquired, 64 for a usage error; 127 for a command not
// found, 69 for no agent.
func TestLockStatuses(t *testing.T) {
	a := startLockAgents(t, 1)
	bin := dlmnodeBinary(t)
	addr := a.addrs[0]
	holdFile := filepath.Join(t.TempDir(), "holding")
	ready := make(chan struct{})
	go func() {
		shell(t, bin, 60*time.Second, fmt.Sprintf(`dlmnode lock --addr %s held -- sh -c 'touch %s; sleep 3'`, addr, holdFile))
		close(ready)
	}()
	waitFile(t, holdFile, 20*time.Second)
	for _, c := range []struct {
		script string
		want   int
	}{
		{fmt.Sprintf(`dlmnode lock --addr %s free -- sh -c 'exit 3'`, addr), 3},
		{fmt.Sprintf(`dlmnode lock --addr %s --mode PR free -- true`, addr), 0},
		{fmt.Sprintf(`dlmnode lock --addr %s --nowait held -- true`, addr), 1},
		{fmt.Sprintf(`dlmnode lock --addr %s --nowait --conflict-exit-code 9 held -- true`, addr), 9},
		{fmt.Sprintf(`dlmnode lock --addr %s --wait 200ms held -- true`, addr), 1},
		{fmt.Sprintf(`dlmnode lock --addr %s free -- no-such-command-here`, addr), 127},
		{fmt.Sprintf(`dlmnode lock --addr %s free -- sh -c 'kill -TERM $$'`, addr), 128 + 15},
		{fmt.Sprintf(`dlmnode lock --addr %s --mode XX free -- true`, addr), 64},
		{fmt.Sprintf(`dlmnode lock --addr %s free`, addr), 64},
		{`dlmnode lock --addr 127.0.0.1:1 --connect-timeout 300ms free -- true`, 69},
		{fmt.Sprintf(`dlmnode lock --addr %s --tls-cert-file c.pem free -- true`, addr), 64},
		{fmt.Sprintf(`dlmnode lock --addr %s --tls-cert-file /no/c.pem --tls-key-file /no/k.pem --tls-ca-file /no/ca.pem free -- true`, addr), 64},
	} {
		if code, out := shell(t, bin, 30*time.Second, c.script); code != c.want {
			t.Errorf("%s: exit %d, want %d\n%s", c.script, code, c.want, out)
		}
	}
	<-ready
}

func waitFile(t *testing.T, path string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", path, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLockLostTerminatesCommand: when the lock is lost while COMMAND runs
// (here: its agent dies), COMMAND gets SIGTERM, dlmnode lock says so and
// exits with 75; a COMMAND that ignores SIGTERM is killed after --grace.
func TestLockLostTerminatesCommand(t *testing.T) {
	bin := dlmnodeBinary(t)
	for _, ignore := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignores-sigterm=%v", ignore), func(t *testing.T) {
			a := startLockAgents(t, 3)
			dir := t.TempDir()
			pidFile, trapped := filepath.Join(dir, "pid"), filepath.Join(dir, "trapped")
			trap := fmt.Sprintf(`trap "echo term > %s; exit 0" TERM`, trapped)
			if ignore {
				trap = fmt.Sprintf(`trap "echo term > %s" TERM`, trapped)
			}
			// The command records its pid and waits in a loop of short sleeps,
			// so that the shell handles the signal between them.
			cmd := fmt.Sprintf(`%s; echo $$ > %s; while :; do sleep 0.1; done`, trap, pidFile)
			type result struct {
				code int
				out  string
			}
			done := make(chan result, 1)
			go func() {
				code, out := shell(t, bin, 60*time.Second, fmt.Sprintf(`dlmnode lock --addr %s --grace 1s lost-lock -- sh -c '%s'`, a.addrs[0], cmd))
				done <- result{code, out}
			}()
			waitFile(t, pidFile, 20*time.Second)
			start := time.Now()
			a.nodes[0].Halt()
			_ = a.servers[0].Close()
			var r result
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("dlmnode lock did not end after its agent died")
			}
			if r.code != exitLost || !strings.Contains(r.out, "lost while COMMAND ran") {
				t.Fatalf("exit %d, want %d:\n%s", r.code, exitLost, r.out)
			}
			if _, err := os.Stat(trapped); err != nil {
				t.Fatalf("COMMAND got no SIGTERM: %v\n%s", err, r.out)
			}
			if ignore && !strings.Contains(r.out, "SIGKILL") {
				t.Fatalf("a COMMAND that ignores SIGTERM was not killed:\n%s", r.out)
			}
			pid := readPid(t, pidFile)
			if err := syscall.Kill(pid, 0); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("COMMAND (pid %d) outlived dlmnode lock", pid)
			}
			t.Logf("lock lost and COMMAND ended %v after the agent died", time.Since(start))
		})
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Scan()
	pid, err := strconv.Atoi(strings.TrimSpace(s.Text()))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestLockSemaphoreFromShells: N+1 shells run commands under a semaphore
// of N permits (dlmnode lock --permits N), through different agents. The
// commands record their start and end in one file (appending, O_APPEND):
// at most N ever run at once, N do run at once (the first ones each wait
// until N have started, which a semaphore behaving as a mutex would never
// let happen), and every command gets its turn.
func TestLockSemaphoreFromShells(t *testing.T) {
	const permits = 2
	a := startLockAgents(t, 3)
	bin := dlmnodeBinary(t)
	stamps := filepath.Join(t.TempDir(), "stamps")
	// Each command appends "start ID TOKEN PERMITS ACQUIRED", then (in
	// its first round) waits, for at most 10s, until the file shows N
	// starts, then holds on a moment (long enough for one more command
	// to start, if the semaphore let it) and appends "end ID".
	child := fmt.Sprintf(`echo "start $ID.$ROUND $DLM_TOKEN $DLM_PERMITS $DLM_ACQUIRED" >> %[1]s
if [ "$ROUND" = 1 ]; then
  i=0
  while [ "$(grep -c ^start %[1]s)" -lt %[2]d ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
fi
sleep 0.3
echo "end $ID.$ROUND" >> %[1]s`, stamps, permits)
	const rounds = 3
	script := func(id int, addr string) string {
		return fmt.Sprintf(`for ROUND in $(seq 1 %d); do
  export ID=%d ROUND
  dlmnode lock --addr %s --permits %d --wait 60s shared-pool -- sh -c '%s' || exit $?
done`, rounds, id, addr, permits, child)
	}
	var wg sync.WaitGroup
	for i := range permits + 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, out := shell(t, bin, 120*time.Second, script(i, a.addrs[i%len(a.addrs)])); code != 0 {
				t.Errorf("shell %d exited %d:\n%s", i, code, out)
			}
		}()
	}
	wg.Wait()
	b, err := os.ReadFile(stamps)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	running := map[string]bool{}
	most, ended := 0, 0
	tokens := map[string]bool{}
	for i, l := range lines {
		f := strings.Fields(l)
		switch {
		case len(f) == 5 && f[0] == "start":
			if f[3] != strconv.Itoa(permits) || f[4] != "1" {
				t.Fatalf("line %d: DLM_PERMITS %s DLM_ACQUIRED %s, want %d and 1:\n%s", i+1, f[3], f[4], permits, b)
			}
			if _, err := strconv.ParseUint(f[2], 10, 64); err != nil || tokens[f[2]] {
				t.Fatalf("line %d: token %q not a fresh number:\n%s", i+1, f[2], b)
			}
			tokens[f[2]] = true
			running[f[1]] = true
			most = max(most, len(running))
			if len(running) > permits {
				t.Fatalf("line %d: %d commands ran at once under %d permits:\n%s", i+1, len(running), permits, b)
			}
		case len(f) == 2 && f[0] == "end" && running[f[1]]:
			delete(running, f[1])
			ended++
		default:
			t.Fatalf("line %d: %q out of place:\n%s", i+1, l, b)
		}
	}
	if want := (permits + 1) * rounds; ended != want || len(running) != 0 {
		t.Fatalf("%d commands ended (%d still running), want %d:\n%s", ended, len(running), want, b)
	}
	if most != permits {
		t.Fatalf("at most %d commands ran at once, want %d (the semaphore's permits):\n%s", most, permits, b)
	}
}

// TestLockSemaphoreStatuses: --permits with --acquire holds K permits
// (COMMAND's environment says N and K, and has no DLM_MODE); a request
// that cannot be met at once with --nowait exits 1; bad input exits 64
// with a clear message, and so do a --permits other than the
// semaphore's, a lock in a mode on a semaphore's name, and permits of a
// resource locked in modes.
func TestLockSemaphoreStatuses(t *testing.T) {
	a := startLockAgents(t, 1)
	bin := dlmnodeBinary(t)
	addr := a.addrs[0]
	dir := t.TempDir()
	semHeld, lockHeld := filepath.Join(dir, "sem"), filepath.Join(dir, "lock")
	ready := make(chan struct{}, 2)
	go func() {
		shell(t, bin, 60*time.Second, fmt.Sprintf(`dlmnode lock --addr %s --permits 3 --acquire 2 pool -- sh -c 'touch %s; sleep 4'`, addr, semHeld))
		ready <- struct{}{}
	}()
	go func() {
		shell(t, bin, 60*time.Second, fmt.Sprintf(`dlmnode lock --addr %s locked -- sh -c 'touch %s; sleep 4'`, addr, lockHeld))
		ready <- struct{}{}
	}()
	waitFile(t, semHeld, 20*time.Second)
	waitFile(t, lockHeld, 20*time.Second)
	for _, c := range []struct {
		script string
		want   int
		says   string
	}{
		{fmt.Sprintf(`dlmnode lock --addr %s --permits 5 --acquire 2 free-pool -- sh -c 'test "$DLM_PERMITS" = 5 && test "$DLM_ACQUIRED" = 2 && test "$DLM_RESOURCE" = free-pool && test -n "$DLM_TOKEN" && test -z "$DLM_MODE"'`, addr), 0, ""},
		{fmt.Sprintf(`dlmnode lock --addr %s --permits 3 pool -- true`, addr), 0, ""}, // the one permit left
		{fmt.Sprintf(`dlmnode lock --addr %s --permits 3 --acquire 2 --nowait pool -- true`, addr), 1, "not acquired"},
		{fmt.Sprintf(`dlmnode lock --addr %s --permits 3 --acquire 2 --wait 200ms pool -- true`, addr), 1, "not acquired"},
		{fmt.Sprintf(`dlmnode lock --addr %s --permits 4 pool -- true`, addr), 64, "same --permits"},
		{fmt.Sprintf(`dlmnode lock --addr %s pool -- true`, addr), 64, "is a semaphore"},
		{fmt.Sprintf(`dlmnode lock --addr %s --permits 2 locked -- true`, addr), 64, "locked in modes"},
		{fmt.Sprintf(`dlmnode lock --addr %s --permits 0 free-pool -- true`, addr), 64, "--permits 0"},
		{fmt.Sprintf(`dlmnode lock --addr %s --permits -1 free-pool -- true`, addr), 64, "--permits -1"},
		{fmt.Sprintf(`dlmnode lock --addr %s --permits 2 --acquire 3 free-pool -- true`, addr), 64, "--acquire 3"},
		{fmt.Sprintf(`dlmnode lock --addr %s --permits 2 --acquire 0 free-pool -- true`, addr), 64, "--acquire 0"},
		{fmt.Sprintf(`dlmnode lock --addr %s --acquire 2 free-pool -- true`, addr), 64, "give its --permits"},
		{fmt.Sprintf(`dlmnode lock --addr %s --permits 2 --mode PR free-pool -- true`, addr), 64, "--mode is for a lock"},
		{fmt.Sprintf(`dlmnode lock --addr %s --permits 99999999 free-pool -- true`, addr), 64, "--permits 99999999"},
	} {
		code, out := shell(t, bin, 30*time.Second, c.script)
		if code != c.want || !strings.Contains(out, c.says) {
			t.Errorf("%s: exit %d, want %d saying %q\n%s", c.script, code, c.want, c.says, out)
		}
	}
	<-ready
	<-ready
	// The semaphore's holders are gone: it is forgotten, and a new count
	// is its own.
	if code, out := shell(t, bin, 30*time.Second, fmt.Sprintf(`dlmnode lock --addr %s --permits 4 pool -- true`, addr)); code != 0 {
		t.Fatalf("a new count for a semaphore nobody uses: exit %d\n%s", code, out)
	}
}
