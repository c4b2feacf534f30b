//go:build unix

package client

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// The tests here run a client as a process of its own (this test binary
// again, in helper mode), so that killing or pausing it is what it is in
// production: a SIGKILL, a SIGSTOP, not a connection closed in-process.

const helperEnv = "DLM_CLIENT_TEST_HELPER"

// maybeHelper runs this process as a client process of a test, and exits,
// if the test started it as one.
func maybeHelper() {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
}

// helperMain is a client process: it locks DLM_HELPER_RESOURCE EX through
// DLM_HELPER_ADDR in a session of DLM_HELPER_TTL, prints its token, writes
// to the fenced store at DLM_HELPER_STORE, then watches its lock; once it
// is lost, it says so and tries one more fenced write with its token.
func helperMain() int {
	addr, res, store := os.Getenv("DLM_HELPER_ADDR"), os.Getenv("DLM_HELPER_RESOURCE"), os.Getenv("DLM_HELPER_STORE")
	ttl, err := time.ParseDuration(os.Getenv("DLM_HELPER_TTL"))
	if err != nil {
		fmt.Println("bad ttl:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := DefaultConfig()
	cfg.Addrs, cfg.SessionTTL = []string{addr}, ttl
	c, err := DialConfig(ctx, cfg)
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	if p := os.Getenv("DLM_HELPER_PERMITS"); p != "" {
		return helperPermits(ctx, c, res, p)
	}
	lk, err := c.Lockspace("test").Lock(ctx, res, modes.EX)
	if err != nil {
		fmt.Println("lock:", err)
		return 1
	}
	fmt.Println("token", lk.Token())
	fmt.Println("write", fencedWrite(store, lk.Token()))
	select {
	case <-lk.Lost():
		fmt.Println("lost:", lk.Err())
	case <-ctx.Done():
		fmt.Println("never lost")
		return 1
	}
	fmt.Println("write", fencedWrite(store, lk.Token()))
	return 0
}

// fencedWrite writes to the store with a fencing token: "accepted" or
// "refused".
func fencedWrite(store string, token uint64) string {
	resp, err := http.Post(store+"?token="+strconv.FormatUint(token, 10), "text/plain", nil)
	if err != nil {
		return "error " + err.Error()
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode == http.StatusOK {
		return "accepted"
	}
	return "refused"
}

// fencedStore accepts a write only with a token at least the highest it
// has accepted (the store a fencing token protects).
type fencedStore struct {
	mu       sync.Mutex
	max      uint64
	accepted []uint64
	refused  []uint64
	url      string
}

func startStore(t *testing.T) *fencedStore {
	t.Helper()
	s := &fencedStore{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, err := strconv.ParseUint(r.URL.Query().Get("token"), 10, 64)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if !s.write(tok) {
			http.Error(w, "stale token", http.StatusConflict)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	s.url = "http://" + ln.Addr().String() + "/write"
	return s
}

func (s *fencedStore) write(tok uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tok < s.max {
		s.refused = append(s.refused, tok)
		return false
	}
	s.max = tok
	s.accepted = append(s.accepted, tok)
	return true
}

// helperProcess is a running client process and the lines it printed.
type helperProcess struct {
	cmd   *exec.Cmd
	lines chan string
}

func startHelper(t *testing.T, addr, res, store string, ttl time.Duration) *helperProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "DLM_HELPER_ADDR="+addr, "DLM_HELPER_RESOURCE="+res,
		"DLM_HELPER_STORE="+store, "DLM_HELPER_TTL="+ttl.String())
	return runHelper(t, cmd)
}

// runHelper starts cmd, a client process, and collects its lines.
func runHelper(t *testing.T, cmd *exec.Cmd) *helperProcess {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helperProcess{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			h.lines <- s.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill() // by pid: the process this test started
		_ = cmd.Wait()
	})
	return h
}

// line returns the helper's next line, which must start with prefix.
func (h *helperProcess) line(t *testing.T, prefix string, within time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-h.lines:
		if !ok || !strings.HasPrefix(l, prefix) {
			t.Fatalf("client process printed %q, want %q...", l, prefix)
		}
		return strings.TrimSpace(strings.TrimPrefix(l, prefix))
	case <-time.After(within):
		t.Fatalf("client process printed nothing within %v (waiting for %q)", within, prefix)
	}
	return ""
}

// TestKilledClientProcess: a client process killed with SIGKILL loses its
// lock when its session expires, its TTL after the last keep-alive it
// sent; a client of another agent waiting for the lock is granted then,
// with a larger token.
func TestKilledClientProcess(t *testing.T) {
	const ttl = 2 * time.Second
	a := startAgents(t, 3, nil, nil)
	store := startStore(t)
	res := a.resourceOn(2, "killed")
	h := startHelper(t, a.addrs[0], res, store.url, ttl)
	tok, _ := strconv.ParseUint(h.line(t, "token", 30*time.Second), 10, 64)
	if w := h.line(t, "write", 10*time.Second); w != "accepted" {
		t.Fatalf("the holder's write: %s", w)
	}
	waiter := dial(t, a.addrs[1])
	granted := make(chan *Lock, 1)
	go func() {
		lk, err := waiter.Lockspace("test").Lock(bg, res, modes.EX)
		if err != nil {
			t.Error(err)
		}
		granted <- lk
	}()
	time.Sleep(100 * time.Millisecond)
	killed := time.Now()
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	lk := within(t, granted, 3*ttl, "the waiter's grant after the holder was killed")
	if lk == nil {
		t.FailNow()
	}
	after := time.Since(killed)
	// The session expires TTL·(1−ρ)/(1+ρ) after the agent's last renewal,
	// which a keep-alive at most a third of the lease before the kill
	// caused: not much sooner than a TTL, and not much later.
	if after < ttl/2 || after > ttl+2*time.Second {
		t.Fatalf("waiter granted %v after the kill; the session's TTL is %v", after, ttl)
	}
	if lk.Token() <= tok {
		t.Fatalf("waiter's token %d not above the killed holder's %d", lk.Token(), tok)
	}
	if fencedWrite(store.url, lk.Token()) != "accepted" {
		t.Fatal("the new holder's write was refused")
	}
	t.Logf("lock re-granted %v after SIGKILL of its holder (session TTL %v)", after, ttl)
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// TestPausedClientProcess: a client process paused (SIGSTOP) past its
// session's TTL loses its lock meanwhile: another client is granted it
// and writes with a larger token. When the paused one wakes it finds its
// lock lost, and its late write with the old token is refused by the
// store.
func TestPausedClientProcess(t *testing.T) {
	const ttl = 2 * time.Second
	a := startAgents(t, 3, nil, nil)
	store := startStore(t)
	res := a.resourceOn(1, "paused")
	h := startHelper(t, a.addrs[0], res, store.url, ttl)
	tok, _ := strconv.ParseUint(h.line(t, "token", 30*time.Second), 10, 64)
	if w := h.line(t, "write", 10*time.Second); w != "accepted" {
		t.Fatalf("the holder's write: %s", w)
	}
	if err := h.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	other := dial(t, a.addrs[2])
	ctx, cancel := context.WithTimeout(bg, 4*ttl)
	defer cancel()
	lk, err := other.Lockspace("test").Lock(ctx, res, modes.EX)
	if err != nil {
		t.Fatalf("the lock of a paused holder was not re-granted: %v", err)
	}
	if lk.Token() <= tok {
		t.Fatalf("new token %d not above the paused holder's %d", lk.Token(), tok)
	}
	if fencedWrite(store.url, lk.Token()) != "accepted" {
		t.Fatal("the new holder's write was refused")
	}
	if err := h.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	lost := h.line(t, "lost:", 10*time.Second)
	if !strings.Contains(lost, "lock lost") {
		t.Fatalf("the woken holder's lock was lost with %q", lost)
	}
	if w := h.line(t, "write", 10*time.Second); w != "refused" {
		t.Fatalf("the woken holder's late write was %s", w)
	}
	store.mu.Lock()
	refused := store.refused
	store.mu.Unlock()
	if len(refused) != 1 || refused[0] != tok {
		t.Fatalf("store refused %v, want the old token %d", refused, tok)
	}
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}
}
