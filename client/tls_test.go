package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/clientport"
	"github.com/seed-a6839e30/dlm/internal/certs"
	"github.com/seed-a6839e30/dlm/internal/syncbuf"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport"
)

// testPKI is a cluster's CA as dlmnode certs makes it, in the test's
// temporary directory.
type testPKI struct {
	t       *testing.T
	dir     string
	cluster string
	ca      *certs.CA
}

func newPKI(t *testing.T, cluster string) *testPKI {
	t.Helper()
	ca, certPEM, keyPEM, err := certs.NewCA(cluster, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{t: t, dir: t.TempDir(), cluster: cluster, ca: ca}
	p.write(certs.CAFile, certPEM)
	p.write(certs.CAKeyFile, keyPEM)
	return p
}

func (p *testPKI) write(name string, data []byte) string {
	p.t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		p.t.Fatal(err)
	}
	return path
}

// issue makes a certificate of role for name and returns it, and its
// files.
func (p *testPKI) issue(role transport.Role, name string) (kp tls.Certificate, certFile, keyFile string) {
	p.t.Helper()
	certPEM, keyPEM, _, err := p.ca.Issue(transport.Identity{Cluster: p.cluster, Role: role, Name: name}, nil, time.Hour, time.Now())
	if err != nil {
		p.t.Fatal(err)
	}
	if kp, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		p.t.Fatal(err)
	}
	certFile, keyFile = certs.ClientFiles(name)
	if role == transport.RoleNode {
		certFile, keyFile = certs.NodeFiles(name)
	}
	return kp, p.write(certFile, certPEM), p.write(keyFile, keyPEM)
}

func (p *testPKI) caFile() string { return filepath.Join(p.dir, certs.CAFile) }

func (p *testPKI) pool() *x509.CertPool {
	p.t.Helper()
	pem, err := os.ReadFile(p.caFile())
	if err != nil {
		p.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return pool
}

func counterOf(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}

// TestClientPortMutualTLS: with TLS on the client port, a client with a
// client certificate of the cluster's CA (LoadTLS) takes locks, while
// clients with a node certificate, another CA's client certificate or no
// certificate are refused at once with ErrUnauthorized, each refusal
// counted under its reason and logged, and the legitimate client keeps
// locking meanwhile. LoadTLS refuses a node certificate with the reason,
// the client refuses an agent that is not a node of its cluster, and the
// port refuses to serve with a certificate that is not a node's.
func TestClientPortMutualTLS(t *testing.T) {
	pki, rogue := newPKI(t, "tls-c"), newPKI(t, "tls-c")
	nodeCert, nodeFile, nodeKey := pki.issue(transport.RoleNode, "agent1")
	_, appCert, appKey := pki.issue(transport.RoleClient, "app")
	reg := prometheus.NewRegistry()
	var log syncbuf.Buffer
	a := startAgents(t, 1, func(cfg *clientport.Config) {
		cfg.TLS = &transport.TLSConfig{Certificate: nodeCert, CAs: pki.pool()}
		cfg.Registerer = reg
		cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	}, nil)

	tlsCfg, err := LoadTLS(appCert, appKey, pki.caFile())
	if err != nil {
		t.Fatal(err)
	}
	dialTLS := func(tc *tls.Config) (*Client, error) {
		cfg := DefaultConfig()
		cfg.Addrs, cfg.TLS = a.addrs, tc
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		defer cancel()
		return DialConfig(ctx, cfg)
	}
	good, err := dialTLS(tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	ls := good.Lockspace("test")

	// The legitimate client locks throughout the refusals.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var locked int
	var lockErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 100000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(bg, 5*time.Second)
			lk, err := ls.Lock(ctx, fmt.Sprintf("r%d", i%7), modes.EX)
			cancel()
			if err == nil {
				err = lk.Unlock()
			}
			if err != nil {
				lockErr = err
				return
			}
			locked++
		}
	}()

	nodeTLS, err := (&transport.TLSConfig{Certificate: nodeCert, CAs: pki.pool()}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	_, rogueCert, rogueKey := rogue.issue(transport.RoleClient, "app")
	rogueTLS, err := LoadTLS(rogueCert, rogueKey, pki.caFile()) // trusts the agent, is not trusted
	if err != nil {
		t.Fatal(err)
	}
	noCert := tlsCfg.Clone()
	noCert.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tls.Certificate{}, nil }
	for _, tc := range []struct {
		name   string
		cfg    *tls.Config
		reason string
		log    string
	}{
		{"a node certificate", nodeTLS, "certificate", "dlm://tls-c/node/agent1 is a node certificate; the client port takes client certificates only"},
		{"another CA's client certificate", rogueTLS, "handshake", "certificate signed by unknown authority"},
		{"no certificate", noCert, "handshake", "didn't provide a certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := counterOf(t, reg, "dlm_client_refused_total", "reason", tc.reason)
			start := time.Now()
			c, err := dialTLS(tc.cfg)
			if err == nil {
				c.Close()
				t.Fatal("the agent accepted it")
			}
			if !errors.Is(err, ErrUnauthorized) {
				t.Errorf("Dial: %v, want ErrUnauthorized", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("refused after %v: a refusal is final, not retried", d)
			}
			// A refusal by certificate is counted and logged before the
			// client is told; one by the TLS handshake right after the
			// alert has left, so the client may see it first: wait a
			// bounded while for the count and the log line.
			deadline := time.Now().Add(5 * time.Second)
			got := counterOf(t, reg, "dlm_client_refused_total", "reason", tc.reason) - before
			for (got < 1 || !strings.Contains(log.String(), tc.log)) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
				got = counterOf(t, reg, "dlm_client_refused_total", "reason", tc.reason) - before
			}
			if got != 1 {
				t.Errorf("dlm_client_refused_total{reason=%s} went up by %v, want 1", tc.reason, got)
			}
			if !strings.Contains(log.String(), tc.log) {
				t.Errorf("no refusal logged with %q; log:\n%s", tc.log, log.String())
			}
			t.Logf("refused: %v", err)
		})
	}
	if got := a.servers[0].Sessions(); got != 1 {
		t.Errorf("the agent keeps %d sessions, want the legitimate one only", got)
	}

	// LoadTLS refuses a node certificate, and files that are not there.
	if _, err := LoadTLS(nodeFile, nodeKey, pki.caFile()); err == nil || !strings.Contains(err.Error(), "client certificates only") {
		t.Errorf("LoadTLS of a node certificate: %v", err)
	}
	if _, err := LoadTLS(appCert, appKey, filepath.Join(pki.dir, "missing.pem")); err == nil {
		t.Error("LoadTLS without its CA file succeeded")
	}
	if _, err := LoadTLS(appCert, appCert, pki.caFile()); err == nil {
		t.Error("LoadTLS with the certificate as its key succeeded")
	}

	// The client refuses a server that is not a node of its cluster: one
	// with a client certificate, one with another CA's node certificate.
	rogueNode, _, _ := rogue.issue(transport.RoleNode, "agent1")
	clientAsServer, _, _ := pki.issue(transport.RoleClient, "server")
	for name, cert := range map[string]tls.Certificate{"a client certificate": clientAsServer, "another CA's node": rogueNode} {
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan int, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				got <- -1
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			var buf [512]byte
			n, _ := c.Read(buf[:])
			got <- n
		}()
		cfg := DefaultConfig()
		cfg.Addrs, cfg.TLS = []string{ln.Addr().String()}, tlsCfg
		ctx, cancel := context.WithTimeout(bg, 5*time.Second)
		_, err = DialConfig(ctx, cfg)
		cancel()
		if !errors.Is(err, ErrUnauthorized) {
			t.Errorf("a server with %s: Dial: %v, want ErrUnauthorized", name, err)
		}
		if n := within(t, got, 10*time.Second, "the fake agent's read"); n > 0 {
			t.Errorf("the client sent %d bytes of application data to a server with %s", n, name)
		}
		ln.Close()
	}

	// A port whose own certificate is a client's is refused.
	cfg := clientport.DefaultConfig()
	cfg.Node = a.nodes[0]
	cfg.TLS = &transport.TLSConfig{Certificate: clientAsServer, CAs: pki.pool()}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "accept only a node's") {
		t.Errorf("Validate of a port with a client certificate: %v", err)
	}

	close(stop)
	wg.Wait()
	if lockErr != nil {
		t.Fatalf("the legitimate client failed meanwhile: %v", lockErr)
	}
	if locked == 0 {
		t.Fatal("the legitimate client took no lock while the others were refused")
	}
	t.Logf("%d locks taken by the legitimate client meanwhile", locked)
}
