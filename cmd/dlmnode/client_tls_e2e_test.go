//go:build unix

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dlmclient "github.com/seed-a6839e30/dlm/client"
	"github.com/seed-a6839e30/dlm/internal/certs"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport"
)

// runLock runs dlmnode lock with args and returns its exit status, stdout
// and stderr; it is killed (by pid) past 60 s.
func runLock(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, dlmnodeBinary(t), append([]string{"lock"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("dlmnode lock %v ran past 60 s", args)
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, stdout.String(), stderr.String()
}

// TestClientPortMTLS: three agent processes with mutual TLS on their
// links and their client ports (--client-tls), from the files of dlmnode
// certs. A client with a dlmnode certs client certificate takes locks
// through package client and through dlmnode lock. Refused at a1's client
// port, each counted in dlm_client_refused_total and logged: a node
// certificate, a client certificate of another CA, no certificate (the
// client package's TLS without one) and no TLS at all (dlmnode lock
// without the flags). The legitimate client keeps locking meanwhile.
func TestClientPortMTLS(t *testing.T) {
	const cluster = "e2e-ctls"
	dir := filepath.Join(t.TempDir(), "certs")
	rogueDir := filepath.Join(t.TempDir(), "rogue")
	runDlmnode(t, 0, "certs", "ca", "--dir", dir, "--cluster-id", cluster)
	runDlmnode(t, 0, "certs", "node", "--dir", dir, "a1=127.0.0.1", "a2=127.0.0.1", "a3=127.0.0.1")
	runDlmnode(t, 0, "certs", "client", "--dir", dir, "app", "ops")
	runDlmnode(t, 0, "certs", "ca", "--dir", rogueDir, "--cluster-id", cluster)
	runDlmnode(t, 0, "certs", "client", "--dir", rogueDir, "ops")
	caFile := filepath.Join(dir, certs.CAFile)
	files := func(d, name string) (cert, key string) {
		c, k := certs.ClientFiles(name)
		return filepath.Join(d, c), filepath.Join(d, k)
	}

	members := []string{"a1", "a2", "a3"}
	c := startAgents(t, clusterSpec{names: members, members: members, extra: func(p *agentProc) []string {
		cert, key := certs.NodeFiles(p.name)
		return []string{"--cluster-id", cluster, "--client-tls",
			"--tls-cert-file", filepath.Join(dir, cert), "--tls-key-file", filepath.Join(dir, key), "--tls-ca-file", caFile,
			"--gossip-key-file", filepath.Join(dir, certs.GossipKeyFile), "--tls-reload-interval", "0"}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := c.waitReady(ctx); err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, p := range c.procs {
		addrs = append(addrs, p.client)
	}
	a1 := c.proc("a1")

	appCert, appKey := files(dir, "app")
	tlsCfg, err := dlmclient.LoadTLS(appCert, appKey, caFile)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(addrs []string, tc *tls.Config) (*dlmclient.Client, error) {
		cfg := dlmclient.DefaultConfig()
		cfg.Addrs, cfg.TLS, cfg.Name = addrs, tc, "e2e"
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
		defer dcancel()
		return dlmclient.DialConfig(dctx, cfg)
	}
	app, err := dial(addrs[:1], tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	ls := app.Lockspace("ctls")

	// The legitimate client locks throughout, on resources mastered all
	// over the cluster.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var locked int
	var lockErr error
	var last uint64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 100000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
			lk, err := ls.Lock(lctx, fmt.Sprintf("r%d", i%16), modes.EX)
			lcancel()
			if err == nil {
				last = lk.Token()
				err = lk.Unlock()
			}
			if err != nil {
				lockErr = fmt.Errorf("lock %d: %w", i, err)
				return
			}
			locked++
		}
	}()

	// dlmnode lock with the ops client certificate, through a2, and a
	// token in COMMAND's environment.
	opsCert, opsKey := files(dir, "ops")
	code, out, errOut := runLock(t, "--addr", c.proc("a2").client, "--lockspace", "ctls", "--wait", "20s",
		"--tls-cert-file", opsCert, "--tls-key-file", opsKey, "--tls-ca-file", caFile,
		"r1", "--", "sh", "-c", `echo "token=$DLM_TOKEN"`)
	if code != 0 {
		t.Fatalf("dlmnode lock with the client certificate: exit %d\n%s%s", code, out, errOut)
	}
	tok, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(out), "token="), 10, 64)
	if err != nil || tok == 0 {
		t.Errorf("COMMAND printed %q, want token=N", out)
	}

	before := map[string]float64{}
	refused := func(reason string) float64 {
		return metricValue(scrape(t, a1.AdminURL()), `dlm_client_refused_total{reason="`+reason+`"}`)
	}
	for _, r := range []string{"certificate", "handshake"} {
		before[r] = refused(r)
	}

	// A node certificate on a1's client port: a2's, made into a client's
	// TLS configuration by hand, since LoadTLS refuses it.
	nodeCertFile, nodeKeyFile := certs.NodeFiles("a2")
	nodePair, err := tls.LoadX509KeyPair(filepath.Join(dir, nodeCertFile), filepath.Join(dir, nodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	nodeTLS, err := (&transport.TLSConfig{Certificate: nodePair, CAs: pool}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cl, err := dial(addrs[:1], nodeTLS); !errors.Is(err, dlmclient.ErrUnauthorized) {
		if cl != nil {
			cl.Close()
		}
		t.Errorf("a node certificate on the client port: %v, want ErrUnauthorized", err)
	}
	// dlmnode lock refuses the node certificate itself, as a usage error.
	if code, _, errOut := runLock(t, "--addr", a1.client, "--tls-cert-file", filepath.Join(dir, nodeCertFile),
		"--tls-key-file", filepath.Join(dir, nodeKeyFile), "--tls-ca-file", caFile, "r1", "--", "true"); code != exitUsage || !strings.Contains(errOut, "client certificates only") {
		t.Errorf("dlmnode lock with a node certificate: exit %d, %q; want %d", code, errOut, exitUsage)
	}
	// Another CA's client certificate (trusting the real CA): refused at
	// once, exit 69.
	rogueCert, rogueKey := files(rogueDir, "ops")
	if code, _, errOut := runLock(t, "--addr", a1.client, "--tls-cert-file", rogueCert, "--tls-key-file", rogueKey,
		"--tls-ca-file", caFile, "r1", "--", "true"); code != exitUnavailable || !strings.Contains(errOut, "refused by the agent") {
		t.Errorf("dlmnode lock with another CA's certificate: exit %d, %q; want %d", code, errOut, exitUnavailable)
	}
	// TLS without a certificate.
	noCert := tlsCfg.Clone()
	noCert.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tls.Certificate{}, nil }
	if cl, err := dial(addrs[:1], noCert); !errors.Is(err, dlmclient.ErrUnauthorized) {
		if cl != nil {
			cl.Close()
		}
		t.Errorf("no certificate: %v, want ErrUnauthorized", err)
	}
	// No TLS at all: the agent's handshake fails on the plain ClientHello.
	if code, _, errOut := runLock(t, "--addr", a1.client, "--connect-timeout", "1s", "r1", "--", "true"); code != exitUnavailable {
		t.Errorf("dlmnode lock without TLS: exit %d, %q; want %d", code, errOut, exitUnavailable)
	}

	if got := refused("certificate") - before["certificate"]; got != 1 {
		t.Errorf("a1 counted %v certificate refusals, want 1 (the node certificate)", got)
	}
	if got := refused("handshake") - before["handshake"]; got < 3 {
		t.Errorf("a1 counted %v handshake refusals, want at least 3 (another CA, no certificate, no TLS)", got)
	}
	log, _ := os.ReadFile(a1.logPath)
	for _, want := range []string{
		"dlm://e2e-ctls/node/a2 is a node certificate; the client port takes client certificates only",
		"certificate signed by unknown authority",
		"client didn't provide a certificate",
		"client refused: TLS handshake failed",
	} {
		if !bytes.Contains(log, []byte(want)) {
			t.Errorf("a1's log lacks %q", want)
		}
	}

	close(stop)
	wg.Wait()
	if lockErr != nil {
		t.Fatalf("the legitimate client failed meanwhile: %v", lockErr)
	}
	if locked == 0 || last == 0 {
		t.Fatal("the legitimate client took no lock while the others were refused")
	}
	t.Logf("%d locks by the legitimate client during the refusals", locked)
}
