package certs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/transport"
)

func parse(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatal("no PEM")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func verify(cert *x509.Certificate, ca *CA, usage x509.ExtKeyUsage, at time.Time) error {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	_, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}, CurrentTime: at})
	return err
}

// TestIssue: a node certificate carries its identity and hosts and serves
// both ends of a connection; a client certificate only authenticates a
// client; both chain to the CA, whose name constraint refuses an identity
// of another cluster; keys pair with their certificates.
func TestIssue(t *testing.T) {
	now := time.Now()
	ca, caPEM, caKeyPEM, err := NewCA("prod", 24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := ParseCA(caPEM, caKeyPEM); err != nil || again.Cluster != "prod" || !again.Cert.Equal(ca.Cert) {
		t.Fatalf("ParseCA: %+v, %v", again, err)
	}
	node := transport.Identity{Cluster: "prod", Role: transport.RoleNode, Name: "node1"}
	certPEM, keyPEM, until, err := ca.Issue(node, []string{"10.0.0.1", "node1.example.com", "::1"}, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("the key is not the certificate's: %v", err)
	}
	c := parse(t, certPEM)
	if id, err := transport.IdentityOf(c); err != nil || id != node {
		t.Errorf("identity %+v, %v", id, err)
	}
	if !slices.Equal(c.DNSNames, []string{"node1.example.com"}) || len(c.IPAddresses) != 2 || !c.IPAddresses[0].Equal(net.ParseIP("10.0.0.1")) {
		t.Errorf("hosts: %v %v", c.DNSNames, c.IPAddresses)
	}
	if !until.Equal(now.Add(time.Hour)) || !c.NotAfter.Equal(until.Truncate(time.Second)) || c.NotBefore.After(now.Add(-time.Minute)) {
		t.Errorf("validity %v..%v (returned %v)", c.NotBefore, c.NotAfter, until)
	}
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if err := verify(c, ca, u, now); err != nil {
			t.Errorf("node certificate for usage %v: %v", u, err)
		}
	}
	if err := verify(c, ca, x509.ExtKeyUsageClientAuth, now.Add(2*time.Hour)); err == nil {
		t.Error("verified after its expiry")
	}

	client := transport.Identity{Cluster: "prod", Role: transport.RoleClient, Name: "ops"}
	certPEM, _, _, err = ca.Issue(client, nil, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	cc := parse(t, certPEM)
	if id, _ := transport.IdentityOf(cc); id != client {
		t.Errorf("client identity %+v", id)
	}
	if err := verify(cc, ca, x509.ExtKeyUsageClientAuth, now); err != nil {
		t.Errorf("client certificate as a client: %v", err)
	}
	if err := verify(cc, ca, x509.ExtKeyUsageServerAuth, now); err == nil {
		t.Error("a client certificate verified as a server's")
	}

	// The name constraint: even a CA made to sign another cluster's
	// identity yields a certificate that does not verify.
	loose := *ca
	loose.Cluster = ""
	otherPEM, _, _, err := loose.Issue(transport.Identity{Cluster: "staging", Role: transport.RoleNode, Name: "node1"}, nil, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := verify(parse(t, otherPEM), ca, x509.ExtKeyUsageClientAuth, now); err == nil {
		t.Error("a certificate of cluster staging verified against prod's CA")
	}

	// Limited by the CA: a certificate ends when its CA does.
	_, _, until, err = ca.Issue(node, nil, 365*24*time.Hour, now)
	if err != nil || !until.Equal(ca.Cert.NotAfter) {
		t.Errorf("a year's certificate from a day's CA ends %v (CA %v), %v", until, ca.Cert.NotAfter, err)
	}

	for _, tc := range []struct {
		name  string
		id    transport.Identity
		hosts []string
		valid time.Duration
		at    time.Time
		want  string
	}{
		{"another cluster", transport.Identity{Cluster: "staging", Role: transport.RoleNode, Name: "n"}, nil, time.Hour, now, `cluster "prod", not "staging"`},
		{"no name", transport.Identity{Cluster: "prod", Role: transport.RoleNode}, nil, time.Hour, now, "name"},
		{"bad host", node, []string{"no spaces allowed"}, time.Hour, now, "not an IP address or a DNS name"},
		{"client with hosts", client, []string{"10.0.0.1"}, time.Hour, now, "lists no hosts"},
		{"no validity", node, nil, 0, now, "positive"},
		{"expired CA", node, nil, time.Hour, now.Add(48 * time.Hour), "the CA expired"},
	} {
		if _, _, _, err := ca.Issue(tc.id, tc.hosts, tc.valid, tc.at); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, _, _, err := NewCA("my cluster", time.Hour, now); err == nil {
		t.Error("a CA for a cluster ID a certificate cannot carry")
	}
}

// TestParseCA: a bundle of CAs (during a CA's replacement) yields the
// certificate of the key; a key of no certificate in it, or garbage, is
// refused.
func TestParseCA(t *testing.T) {
	now := time.Now()
	_, old, _, err := NewCA("prod", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	next, nextPEM, nextKey, err := NewCA("prod", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := ParseCA(append(append([]byte{}, old...), nextPEM...), nextKey)
	if err != nil || !ca.Cert.Equal(next.Cert) {
		t.Fatalf("bundle: %v", err)
	}
	if _, err := ParseCA(old, nextKey); err == nil || !strings.Contains(err.Error(), "no CA certificate of the key") {
		t.Errorf("another CA's key: %v", err)
	}
	if _, err := ParseCA([]byte("garbage"), nextKey); err == nil {
		t.Error("garbage certificate")
	}
	if _, err := ParseCA(nextPEM, []byte("garbage")); err == nil {
		t.Error("garbage key")
	}
}

// TestWriteFiles: files are owner-only in a directory made owner-only; a
// file that exists stops the whole write before anything is written,
// unless overwriting is asked for; no temporary file is left behind.
func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if err := WriteFiles(dir, false, File{"a.pem", []byte("a")}, File{"b.pem", []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, %v", st.Mode(), err)
	}
	for _, f := range []string{"a.pem", "b.pem"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, %v", f, st.Mode(), err)
		}
	}
	err := WriteFiles(dir, false, File{"c.pem", []byte("c")}, File{"b.pem", []byte("new b")})
	if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "b.pem") {
		t.Fatalf("existing file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "c.pem")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("c.pem was written though b.pem stopped the write: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b.pem")); string(b) != "b" {
		t.Errorf("b.pem replaced: %q", b)
	}
	if err := WriteFiles(dir, true, File{"b.pem", []byte("new b")}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b.pem")); string(b) != "new b" {
		t.Errorf("b.pem not replaced: %q", b)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"a.pem", "b.pem"}) {
		t.Errorf("directory holds %v", names)
	}
}

func TestGossipKey(t *testing.T) {
	k, err := NewGossipKey()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(k)))
	if err != nil || len(raw) != 32 {
		t.Errorf("gossip key %q: %d bytes, %v", k, len(raw), err)
	}
}

func TestCheckFileName(t *testing.T) {
	for _, bad := range []string{"", ".hidden", "a/b", `a\b`, "a\x00b"} {
		if CheckFileName(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if err := CheckFileName("node-1.eu"); err != nil {
		t.Error(err)
	}
}
