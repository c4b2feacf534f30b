package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-a6839e30/dlm/transport"
)

func certsRun(t *testing.T, wantCode int, args ...string) (stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(append([]string{"certs"}, args...), &out, &errb); code != wantCode {
		t.Fatalf("dlmnode certs %v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, wantCode, out.String(), errb.String())
	}
	return out.String(), errb.String()
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCertsCommand: the three commands of the help make a CA, node
// certificates with their identities and hosts, and a client certificate,
// all owner-only; flags may follow the names; what exists is not replaced
// without --force, and --force replaces it.
func TestCertsCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	out, _ := certsRun(t, 0, "ca", "--dir", dir, "--cluster-id", "prod")
	if !strings.Contains(out, "CA of cluster prod") || !strings.Contains(out, "--gossip-key-file") {
		t.Errorf("ca output:\n%s", out)
	}
	out, _ = certsRun(t, 0, "node", "node1=10.0.0.1,node1.example.com", "node2=10.0.0.2", "--dir", dir, "node3")
	for _, want := range []string{"dlm://prod/node/node1", "hosts 10.0.0.1 node1.example.com", "dlmnode agent --name node3 --cluster-id prod --tls-cert-file " + filepath.Join(dir, "node-node3.pem")} {
		if !strings.Contains(out, want) {
			t.Errorf("node output lacks %q:\n%s", want, out)
		}
	}
	certsRun(t, 0, "client", "--dir", dir, "ops")
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, %v", st.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3+2*4 {
		t.Errorf("%d files, want 11", len(entries))
	}
	for _, e := range entries {
		if info, _ := e.Info(); info.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", e.Name(), info.Mode())
		}
	}
	n1 := readCert(t, filepath.Join(dir, "node-node1.pem"))
	if id, err := transport.IdentityOf(n1); err != nil || id != (transport.Identity{Cluster: "prod", Role: transport.RoleNode, Name: "node1"}) {
		t.Errorf("node1: %+v, %v", id, err)
	}
	if len(n1.IPAddresses) != 1 || n1.IPAddresses[0].String() != "10.0.0.1" || len(n1.DNSNames) != 1 {
		t.Errorf("node1 hosts: %v %v", n1.IPAddresses, n1.DNSNames)
	}
	if id, _ := transport.IdentityOf(readCert(t, filepath.Join(dir, "client-ops.pem"))); id.Role != transport.RoleClient || id.Cluster != "prod" {
		t.Errorf("client: %+v", id)
	}

	before, _ := os.ReadFile(filepath.Join(dir, "node-node2.pem"))
	_, errOut := certsRun(t, 1, "node", "--dir", dir, "node4", "node2")
	if !strings.Contains(errOut, "node-node2.pem: exists (--force replaces it)") {
		t.Errorf("existing file: %q", errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "node-node4.pem")); err == nil {
		t.Error("node4 was written though node2's files stopped the command")
	}
	certsRun(t, 0, "node", "--dir", dir, "--force", "node2")
	if after, _ := os.ReadFile(filepath.Join(dir, "node-node2.pem")); bytes.Equal(before, after) {
		t.Error("--force did not replace node2's certificate")
	}
}

// TestCertsBadInput: each mistake is a message naming it and exit status
// 2, and writes nothing.
func TestCertsBadInput(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	certsRun(t, 0, "ca", "--dir", dir)
	empty := filepath.Join(t.TempDir(), "none")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage: dlmnode certs"},
		{[]string{"server"}, `unknown kind "server"`},
		{[]string{"ca", "--dir", empty, "--cluster-id", "my cluster"}, "a certificate can carry only letters"},
		{[]string{"ca", "--dir", empty, "extra"}, `unexpected argument "extra"`},
		{[]string{"ca", "--dir", empty, "--days", "0"}, "--days 0"},
		{[]string{"node", "--dir", dir}, "name at least one node"},
		{[]string{"node", "--dir", empty, "n1"}, "dlmnode certs ca --dir " + empty + " makes one"},
		{[]string{"node", "--dir", dir, "--cluster-id", "other", "n1"}, `--cluster-id "other", but the CA`},
		{[]string{"node", "--dir", dir, "a/b"}, "cannot be part of a file name"},
		{[]string{"node", "--dir", dir, "n1", "n1"}, `"n1" named twice`},
		{[]string{"node", "--dir", dir, "n1=not a host"}, "not an IP address or a DNS name"},
		{[]string{"client", "--dir", dir, "ops=10.0.0.1"}, "a client certificate lists no hosts"},
		{[]string{"node", "--dir", dir, "--frobnicate", "n1"}, "frobnicate"},
	} {
		_, errOut := certsRun(t, 2, tc.args...)
		if !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: stderr %q lacks %q", tc.args, errOut, tc.want)
		}
	}
	if _, err := os.Stat(empty); err == nil {
		t.Error("a refused command created its directory")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("refused commands wrote into the directory: %d entries", len(entries))
	}
	out, _ := certsRun(t, 0, "-h")
	if !strings.Contains(out, "dlmnode certs node node1=10.0.0.1") {
		t.Errorf("help:\n%s", out)
	}
}
