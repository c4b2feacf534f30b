//go:build unix

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/internal/certs"
	"github.com/seed-a6839e30/dlm/internal/syncbuf"
	"github.com/seed-a6839e30/dlm/internal/tlsprobe"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

func fileSerial(t *testing.T, path string) string {
	t.Helper()
	return readCert(t, path).SerialNumber.String()
}

func loadPair(t *testing.T, dir, name string) tls.Certificate {
	t.Helper()
	certFile, keyFile := certs.NodeFiles(name)
	kp, err := tls.LoadX509KeyPair(filepath.Join(dir, certFile), filepath.Join(dir, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// claimOver connects to a link port with cert, says it is claims in its
// Hello, sends a lock request, and returns once the agent has closed the
// connection.
func claimOver(t *testing.T, addr, cluster, claims string, cert tls.Certificate) {
	t.Helper()
	lim := wire.DefaultLimits()
	var frames [][]byte
	for _, f := range []struct {
		h wire.Header
		m wire.Message
	}{
		{wire.Header{}, &wire.Hello{Version: wire.LinkVersion, ClusterID: cluster, Node: claims, BootID: 666, Session: 1}},
		{wire.Header{ID: 1}, &wire.LockRequest{Epoch: 1, Lockspace: "tls", Resource: "stolen", Lock: 666, Mode: modes.EX}},
	} {
		frame, err := wire.AppendFrame(nil, f.h, f.m, &lim)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, frame)
	}
	tlsprobe.Send(t, addr, &cert, frames...)
}

// TestAgentsMTLS: the files of "dlmnode certs" (three commands) run a
// cluster of three agent processes and a member embedded in the test with
// mutual TLS and an encrypted gossip, which takes locks mastered at each
// agent. An agent refuses node a2's certificate claiming a3, and a client
// certificate, counting and logging each, and nothing of theirs is
// granted. Then the node certificates are renewed (dlmnode certs node
// --force) and every agent gets SIGHUP: the cluster keeps granting
// throughout and a lock held across it stays held; every link port then
// presents its new certificate, and an agent restarted with it rejoins
// and serves.
func TestAgentsMTLS(t *testing.T) {
	const cluster = "e2e-tls"
	dir := filepath.Join(t.TempDir(), "certs")
	runDlmnode(t, 0, "certs", "ca", "--dir", dir, "--cluster-id", cluster)
	runDlmnode(t, 0, "certs", "node", "--dir", dir, "a1=127.0.0.1", "a2=127.0.0.1", "a3=127.0.0.1", "t4")
	runDlmnode(t, 0, "certs", "client", "--dir", dir, "ops")
	caFile, gossipKey := filepath.Join(dir, certs.CAFile), filepath.Join(dir, certs.GossipKeyFile)

	members := []string{"a1", "a2", "a3", "t4"}
	c := startAgents(t, clusterSpec{names: members[:3], members: members, extra: func(p *agentProc) []string {
		cert, key := certs.NodeFiles(p.name)
		return []string{"--cluster-id", cluster, "--lease", "2s", "--heartbeat", "250ms",
			"--tls-cert-file", filepath.Join(dir, cert), "--tls-key-file", filepath.Join(dir, key), "--tls-ca-file", caFile,
			"--gossip-key-file", gossipKey, "--tls-reload-interval", "0"}
	}})
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(caFile)
	if err != nil || !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("CA: %v", err)
	}
	key, err := os.ReadFile(gossipKey)
	if err != nil {
		t.Fatal(err)
	}
	gossip, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(key)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	node := startMember(ctx, t, c, "t4", members, func(cfg *dlm.Config) {
		cfg.ClusterID, cfg.LinkAddr, cfg.Lease = cluster, "127.0.0.1:0", 2*time.Second
		cfg.TLS = &transport.TLSConfig{Certificate: loadPair(t, dir, "t4"), CAs: pool}
		cfg.GossipKey = gossip
	})
	defer node.Close()
	if err := c.waitReady(ctx); err != nil {
		t.Fatal(err)
	}
	ls, err := node.Lockspace("tls")
	if err != nil {
		t.Fatal(err)
	}
	res := map[string]string{}
	for _, a := range members[:3] {
		res[a] = resourceOn(t, ls, "r", a)
	}
	lockAll := func(round int) error {
		for _, a := range members[:3] {
			lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
			lk, err := ls.Lock(lctx, res[a], modes.EX)
			lcancel()
			if err != nil {
				return fmt.Errorf("round %d: lock %s (mastered at %s): %w", round, res[a], a, err)
			}
			if err := lk.Unlock(); err != nil {
				return fmt.Errorf("round %d: unlock %s: %w", round, res[a], err)
			}
		}
		return nil
	}
	if err := lockAll(0); err != nil {
		t.Fatal(err)
	}
	a1 := c.proc("a1")

	// Impostors on a1's link port: node a2's certificate claiming a3, and
	// the client certificate.
	cert, keyFile := certs.ClientFiles("ops")
	client, err := tls.LoadX509KeyPair(filepath.Join(dir, cert), filepath.Join(dir, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	claimOver(t, a1.link, cluster, "a3", loadPair(t, dir, "a2"))
	claimOver(t, a1.link, cluster, "a3", client)
	m := scrape(t, a1.AdminURL())
	if v := metricValue(m, `dlm_transport_handshakes_rejected_total{reason="identity"}`); v != 1 {
		t.Errorf("a1 counted %v identity refusals, want 1", v)
	}
	if v := metricValue(m, `dlm_transport_handshakes_rejected_total{reason="role"}`); v != 1 {
		t.Errorf("a1 counted %v role refusals, want 1", v)
	}
	log, _ := os.ReadFile(a1.logPath)
	for _, want := range []string{`the certificate is node \"a2\"'s, the peer claims to be \"a3\"`, "dlm://e2e-tls/client/ops is a client certificate"} {
		if !bytes.Contains(log, []byte(want)) {
			t.Errorf("a1's log lacks %q", want)
		}
	}
	if d := node.LockDump(dlm.DumpOptions{Lockspace: "tls"}); strings.Contains(fmt.Sprint(d), "stolen") {
		t.Errorf("an impostor's lock request reached a master: %+v", d)
	}
	if err := lockAll(1); err != nil {
		t.Fatal(err)
	}

	// Renewal: new certificates for the agents, SIGHUP, while locks are
	// taken and one is held.
	held, err := ls.Lock(ctx, res["a2"]+"-held", modes.PW)
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]string{}
	for _, a := range members[:3] {
		certFile, _ := certs.NodeFiles(a)
		old[a] = fileSerial(t, filepath.Join(dir, certFile))
	}
	probe := loadPair(t, dir, "t4")
	for _, a := range members[:3] {
		if got := tlsprobe.Serial(t, c.proc(a).link, probe); got != old[a] {
			t.Fatalf("%s's link port presents serial %s before the renewal, want %s", a, got, old[a])
		}
	}
	var wg sync.WaitGroup
	stopLocking := make(chan struct{})
	var lockErr error
	rounds := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 2; i < 100000; i++ {
			select {
			case <-stopLocking:
				return
			default:
			}
			if lockErr = lockAll(i); lockErr != nil {
				return
			}
			rounds++
		}
	}()
	runDlmnode(t, 0, "certs", "node", "--dir", dir, "--force", "a1=127.0.0.1", "a2=127.0.0.1", "a3=127.0.0.1")
	for _, a := range members[:3] {
		if err := syscall.Kill(c.proc(a).cmd.Process.Pid, syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range members[:3] {
		p := c.proc(a)
		certFile, _ := certs.NodeFiles(a)
		renewed := fileSerial(t, filepath.Join(dir, certFile))
		if renewed == old[a] {
			t.Fatalf("%s's certificate was not renewed", a)
		}
		deadline := time.Now().Add(10 * time.Second)
		for metricValue(scrape(t, p.AdminURL()), `dlm_agent_tls_reloads_total{result="ok"}`) != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not reload within 10 s of SIGHUP: %s", a, p.lastLogLine())
			}
			time.Sleep(20 * time.Millisecond)
		}
		if got := tlsprobe.Serial(t, p.link, probe); got != renewed {
			t.Errorf("after SIGHUP %s's link port presents serial %s, want the renewed %s (old %s)", a, got, renewed, old[a])
		}
	}
	time.Sleep(500 * time.Millisecond) // the lock loop runs on across the reloads for a while
	close(stopLocking)
	wg.Wait()
	if lockErr != nil {
		t.Fatalf("locking across the renewal: %v", lockErr)
	}
	if rounds == 0 {
		t.Fatal("no lock was taken across the renewal")
	}
	select {
	case <-held.Lost():
		t.Fatalf("the lock held across the renewal was lost: %v", held.Err())
	default:
	}
	for _, a := range members[:3] {
		if v := metricValue(scrape(t, c.proc(a).AdminURL()), "dlm_transport_reconnects_total"); v > 0 {
			t.Logf("%s reconnected %v times across the renewal", a, v)
		}
	}

	// An agent restarted on its renewed certificate: every connection it
	// is part of is new, with new certificates on the agents' side.
	a3 := c.proc("a3")
	if err := a3.stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.start(a3); err != nil {
		t.Fatal(err)
	}
	if err := a3.waitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.waitReady(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for ls.MasterOf(res["a3"]) != "a3" || lockAll(-1) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("a3 did not serve again after its restart: %v", lockAll(-1))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := held.Unlock(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rounds of locks at three masters across the SIGHUP renewal", rounds)
}

// TestAgentInsecure: off loopback without TLS an agent process refuses to
// start, before binding, with one line; with --insecure it starts, serves,
// and warns of what listens unprotected. The address off loopback is one
// on the loopback interface of a network namespace of its own (created
// with unshare; skipped where that is not allowed), so nothing is exposed.
func TestAgentInsecure(t *testing.T) {
	bin := dlmnodeBinary(t)
	args := []string{"agent", "--name", "solo", "--members", "solo",
		"--link-addr", "10.23.0.1:7947", "--gossip-addr", "10.23.0.1:7946", "--admin-addr", "127.0.0.1:0"}
	// Refused before binding: the address is on no interface here, so a
	// bind would fail with another message.
	out, err := exec.Command(bin, args...).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("without --insecure: %v, want exit 2\n%s", err, out)
	}
	line := strings.TrimSpace(string(out))
	if strings.Contains(line, "\n") || !strings.Contains(line, `--link-addr "10.23.0.1:7947" is not a loopback address`) || !strings.Contains(line, "--insecure") {
		t.Errorf("refusal: %q", line)
	}

	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare(1) is missing: the start with --insecure off loopback needs a network namespace")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("ip(8) is missing: the start with --insecure off loopback needs a network namespace")
	}
	nsArgs := []string{"--net"}
	if os.Geteuid() != 0 {
		nsArgs = []string{"--user", "--map-root-user", "--net"}
	}
	if out, err := exec.Command(unshare, append(nsArgs, ip, "link", "set", "lo", "up")...).CombinedOutput(); err != nil {
		t.Skipf("cannot make a network namespace here (%v: %s); it runs in CI as root", err, bytes.TrimSpace(out))
	}
	script := fmt.Sprintf("%s link set lo up && %s addr add 10.23.0.1/32 dev lo && exec %s %s --insecure",
		ip, ip, bin, strings.Join(args, " "))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, unshare, append(nsArgs, "sh", "-c", script)...)
	var logBuf syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &logBuf, &logBuf
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logBuf.String(), `msg=serving`) {
		select {
		case <-exited:
			t.Fatalf("the agent exited (%v):\n%s", exitErr, logBuf.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent with --insecure did not serve within 30 s:\n%s", logBuf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []string{"lock traffic listens beyond loopback without TLS", "gossip listens beyond loopback without a key"} {
		if !strings.Contains(logBuf.String(), want) {
			t.Errorf("the log lacks the warning %q:\n%s", want, logBuf.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if exitErr != nil {
			t.Errorf("after SIGTERM: %v\n%s", exitErr, logBuf.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the agent did not exit within 20 s of SIGTERM")
	}
}
