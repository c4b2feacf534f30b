package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/client"
	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/internal/leakcheck"
	"github.com/seed-a6839e30/dlm/modes"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// The first signal cancels the work and waits for it; a second returns
// ErrForced while the work is still stopping.
func TestUntilSignals(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	sigs := make(chan os.Signal, 2)
	release := make(chan struct{})
	stopping := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- untilSignals(sigs, log, func() { t.Error("hup called without SIGHUP") }, func(ctx context.Context) error {
			<-ctx.Done()
			close(stopping)
			<-release // a leave that takes long
			return nil
		})
	}()
	sigs <- syscall.SIGTERM
	<-stopping
	select {
	case err := <-done:
		t.Fatalf("returned %v before the work stopped, after one signal", err)
	case <-time.After(50 * time.Millisecond):
	}
	sigs <- syscall.SIGINT
	select {
	case err := <-done:
		if !errors.Is(err, ErrForced) {
			t.Fatalf("second signal: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a second signal did not end the wait")
	}
	close(release)

	sigs2 := make(chan os.Signal, 1)
	err := untilSignals(sigs2, log, func() {}, func(ctx context.Context) error {
		sigs2 <- syscall.SIGTERM
		<-ctx.Done()
		return nil
	})
	if err != nil {
		t.Fatalf("clean stop: %v", err)
	}

	// SIGHUP, before the stop and during it, reloads and stops nothing.
	sigs3 := make(chan os.Signal, 1)
	hups := make(chan struct{}, 2)
	stopped := make(chan struct{})
	err = untilSignals(sigs3, log, func() { hups <- struct{}{} }, func(ctx context.Context) error {
		sigs3 <- syscall.SIGHUP
		<-hups
		if ctx.Err() != nil {
			t.Error("SIGHUP stopped the work")
		}
		sigs3 <- syscall.SIGTERM
		<-ctx.Done()
		sigs3 <- syscall.SIGHUP // while leaving: not a second signal
		<-hups
		close(stopped)
		return nil
	})
	if err != nil {
		t.Fatalf("SIGHUP, SIGTERM, SIGHUP: %v", err)
	}
	<-stopped
}

// runAgent starts an in-process agent of a one-member cluster on ports the
// kernel picks, and waits until it serves.
func runAgent(t *testing.T, extra ...string) (*Agent, func()) {
	t.Helper()
	a, stop := startAgent(t, append([]string{"--name", "solo", "--members", "solo",
		"--gossip-addr", "127.0.0.1:0", "--link-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--client-addr", "127.0.0.1:0"}, extra...))
	select {
	case <-a.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("agent did not serve within 30 s")
	}
	return a, stop
}

// startAgent starts an in-process agent with the flags args. Its stop
// function sends SIGTERM and waits up to 30 s for Run to return; later
// calls do nothing.
func startAgent(t *testing.T, args []string) (*Agent, func()) {
	t.Helper()
	a, stop, err := tryStartAgent(t, args)
	if err != nil {
		t.Fatal(err)
	}
	return a, stop
}

// tryStartAgent is startAgent, returning what stopped the agent from
// starting rather than failing the test.
func tryStartAgent(t *testing.T, args []string) (*Agent, func(), error) {
	cfg, err := Parse(args, io.Discard)
	if err != nil {
		return nil, nil, err
	}
	a, err := New(cfg, io.Discard)
	if err != nil {
		return nil, nil, err
	}
	if err := a.Listen(); err != nil {
		return nil, nil, err
	}
	sigs := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- a.Run(sigs) }()
	var once sync.Once
	return a, func() {
		once.Do(func() {
			sigs <- syscall.SIGTERM
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s: Run: %v", cfg.Name, err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("%s did not stop within 30 s of SIGTERM", cfg.Name)
			}
		})
	}, nil
}

// get is a GET of u with header (see request).
func get(t *testing.T, u string, header http.Header) (int, string) {
	t.Helper()
	return request(t, http.MethodGet, u, "", "", header)
}

// TestAdminEndpoints: readiness, metrics with the Go and process
// collectors, status and the lock dump with its filters, the page and its
// assets, pprof.
func TestAdminEndpoints(t *testing.T) {
	a, stop := runAgent(t)
	defer stop()
	base := "http://" + a.AdminAddr()
	ls, err := a.Node().Lockspace("fs")
	if err != nil {
		t.Fatal(err)
	}
	lk, err := ls.Lock(context.Background(), "inode/1", modes.PW)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock()
	other, err := ls.Lock(context.Background(), "dir/2", modes.CR)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Unlock()
	for path, want := range map[string]string{
		"/healthz":            "ok",
		"/readyz":             "serving",
		"/metrics":            "dlm_mastered_locks{lockspace=\"fs\"} 2",
		"/debug/pprof/":       "goroutine",
		"/":                   "inode/1",
		"/?fragment=1":        `id="members"`,
		"/assets/app.js":      "fragment=1",
		"/assets/style.css":   ".state-serving",
		"/assets/favicon.svg": "<svg",
		"/login":              "token",
	} {
		code, body := get(t, base+path, nil)
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d, body lacks %q:\n%.300s", path, code, want, body)
		}
	}
	_, metrics := get(t, base+"/metrics", nil)
	for _, m := range []string{"go_goroutines", "process_resident_memory_bytes", "dlm_requests_total", "dlm_epoch"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	var st dlm.Status
	getJSON(t, base+"/v1/status", &st)
	if st.Name != "solo" || st.State != dlm.StateServing || len(st.Lockspaces) != 1 || st.Lockspaces[0].Held != 2 {
		t.Errorf("status %+v", st)
	}
	var d dlm.LockDump
	getJSON(t, base+"/v1/locks?lockspace=fs&prefix=inode/", &d)
	if len(d.Resources) != 1 || d.Resources[0].Granted[0].Mode != modes.PW || d.Resources[0].Granted[0].Token != lk.Token() {
		t.Errorf("dump %+v", d)
	}
	getJSON(t, base+"/v1/locks?limit=1", &d)
	if len(d.Resources) != 1 || !d.Truncated {
		t.Errorf("limit 1: %+v", d)
	}
	var cl ClusterLocks
	getJSON(t, base+"/v1/locks?cluster=true", &cl)
	if len(cl.Nodes) != 1 || cl.Nodes[0].Locks == nil || len(cl.Nodes[0].Locks.Resources) != 2 {
		t.Errorf("cluster dump %+v", cl)
	}
	if code, body := get(t, base+"/v1/locks?limit=-1", nil); code != http.StatusBadRequest || !strings.Contains(body, "limit") {
		t.Errorf("bad limit: %d %s", code, body)
	}
	if code, _ := get(t, base+"/nothing", nil); code != http.StatusNotFound {
		t.Errorf("unknown path: %d", code)
	}
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	code, body := get(t, u, nil)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// TestAdminToken: with a token, everything but /healthz and /readyz needs
// it, as a bearer token or the cookie the login form sets.
func TestAdminToken(t *testing.T) {
	a, stop := runAgent(t, "--admin-token-file", writeFile(t, "token", "s3cret\n"))
	defer stop()
	base := "http://" + a.AdminAddr()
	bearer := http.Header{"Authorization": {"Bearer s3cret"}}
	wrong := http.Header{"Authorization": {"Bearer nope"}}
	for _, path := range []string{"/metrics", "/v1/status", "/v1/locks", "/v1/status?cluster=true", "/debug/pprof/", "/"} {
		if code, _ := get(t, base+path, nil); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", path, code)
		}
		if code, _ := get(t, base+path, wrong); code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d, want 401", path, code)
		}
		if code, _ := get(t, base+path, bearer); code != http.StatusOK {
			t.Errorf("GET %s with the token: %d, want 200", path, code)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _ := get(t, base+path, nil); code != http.StatusOK {
			t.Errorf("GET %s without the token: %d, want 200", path, code)
		}
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(base+"/login", url.Values{"token": {"nope"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("login with a wrong token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	resp, err = noRedirect.PostForm(base+"/login", url.Values{"token": {"s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || !resp.Cookies()[0].HttpOnly {
		t.Fatalf("login: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	cookie := http.Header{"Cookie": {resp.Cookies()[0].String()}}
	if code, body := get(t, base+"/?fragment=1", cookie); code != http.StatusOK || !strings.Contains(body, "solo") {
		t.Errorf("page with the login cookie: %d", code)
	}
}

// TestClientPort: the agent's client port serves clients once the node
// does, with its token; a client without it is refused; the agent's leave
// ends the sessions first, releasing their locks.
func TestClientPort(t *testing.T) {
	token := writeFile(t, "client-token", "s3cret\n")
	a, stop := runAgent(t, "--client-token-file", token)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.Dial(ctx, a.ClientAddr()); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("a client without the token: %v", err)
	}
	cfg := client.DefaultConfig()
	cfg.Addrs, cfg.Token = []string{a.ClientAddr()}, "s3cret"
	c, err := client.DialConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lk, err := c.Lockspace("ls").Lock(ctx, "r", modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	if c.Node() != "solo" || lk.Token() == 0 {
		t.Fatalf("node %q, token %d", c.Node(), lk.Token())
	}
	stop()
	select {
	case <-lk.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the client's lock outlived its agent")
	}
}
