package agent

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/seed-a6839e30/dlm/internal/certs"
	"github.com/seed-a6839e30/dlm/internal/tlsprobe"
	"github.com/seed-a6839e30/dlm/transport"
)

// unassigned is an address of TEST-NET-1 (RFC 5737), on no interface: a
// bind to it fails, so an error that is not a bind error was raised before
// binding.
const unassigned = "192.0.2.1"

// TestSecureByDefault: links or gossip beyond loopback without TLS or a
// gossip key are refused before anything is bound, with one line saying
// what to set; --insecure lets the same configuration through (to the
// bind, which then fails on this address that no interface has), and TLS
// with a gossip key needs no --insecure.
func TestSecureByDefault(t *testing.T) {
	link, gossip := net.JoinHostPort(unassigned, "7947"), net.JoinHostPort(unassigned, "7946")
	args := []string{"--name", "a", "--members", "a", "--link-addr", link, "--gossip-addr", gossip, "--admin-addr", "127.0.0.1:0"}
	var stdout, stderr bytes.Buffer
	if code := Main(args, &stdout, &stderr, nil); code != 2 {
		t.Fatalf("exit %d, want 2; stderr %q", code, stderr.String())
	}
	line := strings.TrimSpace(stderr.String())
	if strings.Count(line, "\n") != 0 || !strings.Contains(line, `--link-addr "192.0.2.1:7947" is not a loopback address`) ||
		!strings.Contains(line, "--tls-cert-file") || !strings.Contains(line, "--insecure") || strings.Contains(line, "assign") {
		t.Errorf("refusal: %q", line)
	}

	stderr.Reset()
	if code := Main(append(args, "--insecure"), &stdout, &stderr, nil); code != 2 || !strings.Contains(stderr.String(), "cannot assign requested address") {
		t.Errorf("--insecure: exit %d, %q; want the bind to be tried (and fail on an unassigned address)", code, stderr.String())
	}

	cert, key, ca := testCerts(t, "dlm", "a")
	gossipKey := writeFile(t, "gossip.key", "0123456789abcdef0123456789abcdef")
	tlsArgs := []string{"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-file", ca}
	for _, tc := range []struct {
		name  string
		extra []string
		want  string // in the usage error; "" for none
	}{
		{"TLS without a gossip key", tlsArgs, "--gossip-key-file"},
		{"a gossip key without TLS", []string{"--gossip-key-file", gossipKey}, "--tls-cert-file"},
		{"both", append([]string{"--gossip-key-file", gossipKey}, tlsArgs...), ""},
		{"neither, --insecure", []string{"--insecure"}, ""},
	} {
		c, err := Parse(append(append([]string{}, args...), tc.extra...), io.Discard)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if err == nil {
			if s, err := c.build(); err != nil || (tc.name == "both") != (len(s.node.Exposures()) == 0) {
				t.Errorf("%s: exposures %v, %v", tc.name, s.node.Exposures(), err)
			}
		}
	}
	// Loopback needs nothing.
	if _, err := Parse([]string{"--name", "a", "--members", "a", "--link-addr", "127.0.0.2:7947", "--gossip-addr", "[::1]:7946"}, io.Discard); err != nil {
		t.Errorf("loopback: %v", err)
	}
}

// certDir is a directory of certificates made as dlmnode certs makes
// them, whose CA can issue more.
type certDir struct {
	t   *testing.T
	dir string
	ca  *certs.CA
}

func newCertDir(t *testing.T, cluster string) *certDir {
	t.Helper()
	dir := t.TempDir()
	ca, caPEM, caKey, err := certs.NewCA(cluster, 24*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.WriteFiles(dir, false, certs.File{Name: certs.CAFile, Data: caPEM}, certs.File{Name: certs.CAKeyFile, Data: caKey}); err != nil {
		t.Fatal(err)
	}
	return &certDir{t: t, dir: dir, ca: ca}
}

// node writes (or replaces) the node certificate of name and returns its
// files and serial number.
func (d *certDir) node(name string) (cert, key, serial string) {
	d.t.Helper()
	certPEM, keyPEM, _, err := d.ca.Issue(transport.Identity{Cluster: d.ca.Cluster, Role: transport.RoleNode, Name: name}, nil, time.Hour, time.Now())
	if err != nil {
		d.t.Fatal(err)
	}
	certFile, keyFile := certs.NodeFiles(name)
	if err := certs.WriteFiles(d.dir, true, certs.File{Name: certFile, Data: certPEM}, certs.File{Name: keyFile, Data: keyPEM}); err != nil {
		d.t.Fatal(err)
	}
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		d.t.Fatal(err)
	}
	return filepath.Join(d.dir, certFile), filepath.Join(d.dir, keyFile), kp.Leaf.SerialNumber.String()
}

func (d *certDir) keyPair(name string) tls.Certificate {
	d.t.Helper()
	cert, key, _ := d.node(name)
	kp, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		d.t.Fatal(err)
	}
	return kp
}

// value reads a counter or gauge.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if c := out.GetCounter(); c != nil {
		return c.GetValue()
	}
	return out.GetGauge().GetValue()
}

func linkAddr(t *testing.T, a *Agent) string {
	t.Helper()
	for _, m := range a.Node().Status().Members {
		if m.Self {
			return m.LinkAddr
		}
	}
	t.Fatal("no self in the status")
	return ""
}

// TestReloadTLS: a reload makes new connections present the new
// certificate and moves the expiry metric; files that do not load or
// name another node are refused, counted, and leave the certificate in
// use; a change of the files is picked up by the watch without a signal.
func TestReloadTLS(t *testing.T) {
	d := newCertDir(t, "dlm")
	cert, key, first := d.node("solo")
	ca := filepath.Join(d.dir, certs.CAFile)
	a, stop := runAgent(t, "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-file", ca, "--tls-reload-interval", "20ms")
	defer stop()
	addr := linkAddr(t, a)
	probe := d.keyPair("probe")
	if got := tlsprobe.Serial(t, addr, probe); got != first {
		t.Fatalf("the link port presents serial %s, want %s", got, first)
	}
	creds := a.set.creds

	// Bad files: refused, counted, the certificate in use stays.
	good, _ := os.ReadFile(cert)
	if err := os.WriteFile(cert, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.ReloadTLS(); err == nil || !strings.Contains(err.Error(), "--tls-cert-file") {
		t.Errorf("reload of a garbage certificate: %v", err)
	}
	if err := os.WriteFile(cert, good, 0o600); err != nil {
		t.Fatal(err)
	}
	other, otherKey, _ := d.node("other")
	for src, dst := range map[string]string{other: cert, otherKey: key} {
		b, _ := os.ReadFile(src)
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.ReloadTLS(); err == nil || !strings.Contains(err.Error(), "dlm://dlm/node/other") {
		t.Errorf("reload of another node's certificate: %v", err)
	}
	if got := tlsprobe.Serial(t, addr, probe); got != first {
		t.Errorf("after refused reloads the link port presents serial %s, want still %s", got, first)
	}
	if errs := value(t, creds.reloads.WithLabelValues("error")); errs < 2 {
		t.Errorf("tls_reloads_total{result=error} = %v, want ≥ 2", errs)
	}

	// Renewed files: the watch picks them up (no signal), new connections
	// present the new certificate.
	_, _, renewed := d.node("solo")
	deadline := time.Now().Add(10 * time.Second)
	for tlsprobe.Serial(t, addr, probe) != renewed {
		if time.Now().After(deadline) {
			t.Fatalf("the renewed certificate was not picked up within 10 s; reloads ok=%v error=%v",
				value(t, creds.reloads.WithLabelValues("ok")), value(t, creds.reloads.WithLabelValues("error")))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ok := value(t, creds.reloads.WithLabelValues("ok")); ok < 1 {
		t.Errorf("tls_reloads_total{result=ok} = %v", ok)
	}
	if exp, want := value(t, creds.notAfter), float64(creds.leaf.NotAfter.Unix()); exp != want || exp == 0 {
		t.Errorf("expiry metric %v, want %v", exp, want)
	}
	// And SIGHUP's path, explicitly.
	_, _, third := d.node("solo")
	if err := a.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if got := tlsprobe.Serial(t, addr, probe); got != third {
		t.Errorf("after ReloadTLS the link port presents %s, want %s", got, third)
	}
}
