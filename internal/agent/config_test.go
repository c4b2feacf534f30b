package agent

import (
	"encoding/base64"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/internal/certs"
	"github.com/seed-a6839e30/dlm/transport"
)

func base(extra ...string) []string {
	return append([]string{"--name", "a", "--members", "a,b,c"}, extra...)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestParseErrors: every bad flag, environment variable, file or address
// is one line that names the setting, and wraps ErrUsage (exit status 2).
func TestParseErrors(t *testing.T) {
	garbage := writeFile(t, "garbage.pem", "not a certificate\n")
	empty := writeFile(t, "empty", "\n")
	shortKey := writeFile(t, "key", "tooshort")
	missing := filepath.Join(t.TempDir(), "missing.pem")
	cert, key, ca := testCerts(t, "dlm", "a")
	otherCert, otherKey, _ := testCerts(t, "dlm", "b")
	_, _, otherCA := testCerts(t, "dlm", "a")
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"unknown flag", base("--frobnicate", "1"), nil, []string{"unknown flag", "frobnicate"}},
		{"no name", []string{"--members", "a,b"}, nil, []string{"--name is required"}},
		{"no members", []string{"--name", "a"}, nil, []string{"--members is required"}},
		{"name not a member", []string{"--name", "d", "--members", "a,b,c"}, nil, []string{"--members a,b,c", `--name "d"`}},
		{"member twice", []string{"--name", "a", "--members", "a,b,a"}, nil, []string{"--members", `"a" twice`}},
		{"bad duration", base("--lease", "soon"), nil, []string{"--lease", "soon"}},
		{"heartbeat too slow", base("--heartbeat", "1s", "--lease", "1s"), nil, []string{"--heartbeat", "half of --lease"}},
		{"negative deadlock wait", base("--deadlock-wait", "-1s"), nil, []string{"--deadlock-wait"}},
		{"bad seed", base("--seeds", "nohostport"), nil, []string{"--seeds", "nohostport"}},
		{"bad gossip addr", base("--gossip-addr", "127.0.0.1:99999"), nil, []string{"--gossip-addr", "99999"}},
		{"advertised host name", base("--gossip-advertise", "host.example:7946"), nil, []string{"--gossip-advertise", "IP"}},
		{"advertise without port", base("--link-advertise", "10.0.0.1:0"), nil, []string{"--link-advertise"}},
		{"wildcard link", base("--link-addr", "0.0.0.0:7947"), nil, []string{"--link-addr", "--link-advertise"}},
		{"bad log level", base("--log-level", "loud"), nil, []string{"--log-level", "loud"}},
		{"bad log format", base("--log-format", "xml"), nil, []string{"--log-format", "xml"}},
		{"tls cert missing", base("--tls-cert-file", missing, "--tls-key-file", key, "--tls-ca-file", ca), nil, []string{"--tls-cert-file", "no such file"}},
		{"tls key missing", base("--tls-cert-file", cert, "--tls-key-file", missing, "--tls-ca-file", ca), nil, []string{"--tls-key-file", "no such file"}},
		{"tls ca missing", base("--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-file", missing), nil, []string{"--tls-ca-file", "no such file"}},
		{"tls cert garbage", base("--tls-cert-file", garbage, "--tls-key-file", key, "--tls-ca-file", ca), nil, []string{"--tls-cert-file", "PEM"}},
		{"tls ca garbage", base("--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-file", garbage), nil, []string{"--tls-ca-file", "no PEM certificate"}},
		{"tls without key", base("--tls-cert-file", cert), nil, []string{"--tls-key-file is required"}},
		{"tls without ca", base("--tls-cert-file", cert, "--tls-key-file", key), nil, []string{"--tls-ca-file is required"}},
		{"tls another node's certificate", base("--tls-cert-file", otherCert, "--tls-key-file", otherKey, "--tls-ca-file", ca), nil, []string{"--tls-cert-file", "dlm://dlm/node/b", "this node is dlm://dlm/node/a", "dlmnode certs node a"}},
		{"tls another cluster's certificate", base("--cluster-id", "prod", "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-file", ca), nil, []string{"--tls-cert-file", "dlm://prod/node/a"}},
		{"tls key of another certificate", base("--tls-cert-file", cert, "--tls-key-file", otherKey, "--tls-ca-file", ca), nil, []string{"--tls-key-file", "private key does not match"}},
		{"tls certificate of another CA", base("--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-file", otherCA), nil, []string{"--tls-cert-file", "does not verify against --tls-ca-file", "unknown authority"}},
		{"tls bad reload interval", base("--tls-reload-interval", "-1s"), nil, []string{"--tls-reload-interval"}},
		{"links beyond loopback without TLS", base("--link-addr", "10.255.255.1:7947"), nil, []string{`--link-addr "10.255.255.1:7947" is not a loopback address`, "--tls-cert-file", "dlmnode certs", "--insecure"}},
		{"links on every interface without TLS", base("--link-addr", "0.0.0.0:7947", "--link-advertise", "10.0.0.1:7947"), nil, []string{"--link-addr", "--tls-cert-file", "--insecure"}},
		{"gossip beyond loopback without a key", base("--gossip-addr", "10.255.255.1:7946"), nil, []string{`--gossip-addr "10.255.255.1:7946" is not a loopback address`, "--gossip-key-file", "--insecure"}},
		{"gossip key missing", base("--gossip-key-file", missing), nil, []string{"--gossip-key-file", "no such file"}},
		{"gossip key short", base("--gossip-key-file", shortKey), nil, []string{"--gossip-key-file", "16, 24 or 32"}},
		{"token missing", base("--admin-token-file", missing), nil, []string{"--admin-token-file", "no such file"}},
		{"token empty", base("--admin-token-file", empty), nil, []string{"--admin-token-file", "empty"}},
		{"admin exposed without token", base("--admin-addr", "0.0.0.0:7948"), nil, []string{"--admin-addr", "not a loopback", "--admin-insecure"}},
		{"client exposed without token", base("--client-addr", "0.0.0.0:7949"), nil, []string{"--client-addr", "not a loopback", "--client-token-file", "--client-insecure"}},
		{"client tls without certificates", base("--client-tls"), nil, []string{"--client-tls", "--tls-cert-file"}},
		{"client token missing", base("--client-token-file", missing), nil, []string{"--client-token-file", "no such file"}},
		{"client bad address", base("--client-addr", "nowhere"), nil, []string{"--client-addr", "host:port"}},
		{"client ttl too short", base("--client-session-ttl", "10ms"), nil, []string{"--client-session-ttl"}},
		{"client max locks", base("--client-max-locks", "0"), nil, []string{"--client-max-locks"}},
		{"unexpected argument", base("extra"), nil, []string{"unexpected argument"}},
		{"env members without name", nil, map[string]string{"DLM_NAME": "a", "DLM_MEMBERS": "b,c"}, []string{"--members b,c", `"a"`}},
		{"env bad value", base(), map[string]string{"DLM_LEASE": "abc"}, []string{"DLM_LEASE", "abc"}},
		{"config file missing", base("--config", missing), nil, []string{"--config", "no such file"}},
		{"config file unknown key", base("--config", writeFile(t, "c.toml", "frob = 1\n")), nil, []string{"--config", "unknown setting frob"}},
		{"config file bad value", base("--config", writeFile(t, "c.toml", "lease = \"never\"\n")), nil, []string{"--config", "lease"}},
		{"config file not toml", base("--config", writeFile(t, "c.toml", "name = \n")), nil, []string{"--config"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := Parse(tc.args, io.Discard)
			if !errors.Is(err, ErrUsage) {
				t.Fatalf("Parse(%q) = %v, want a usage error", tc.args, err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error is more than one line: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
		})
	}
}

// TestParseSources: flags win over the environment, the environment over
// the config file; lists come from commas, repeated flags or TOML arrays;
// the result carries what the node needs (advertised addresses, the admin
// tag, the TLS setup and the gossip key read from their files).
func TestParseSources(t *testing.T) {
	cert, key, ca := testCerts(t, "prod", "n1")
	gossipKey := writeFile(t, "gossip.key", base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))+"\n")
	token := writeFile(t, "token", "s3cret\n")
	file := writeFile(t, "dlm.toml", `
name = "fromfile"
cluster-id = "prod"
members = ["n1", "n2", "n3"]
seeds = ["10.0.0.2:7946", "10.0.0.3:7946"]
lease = "3s"
heartbeat = "500ms"
log-format = "json"
`)
	t.Setenv("DLM_NAME", "n1")
	t.Setenv("DLM_LEASE", "2s")
	t.Setenv("DLM_ADMIN_TOKEN_FILE", token)
	c, err := Parse([]string{
		"--config", file, "--lease", "4s",
		"--gossip-addr", "0.0.0.0:7946", "--gossip-advertise", "10.0.0.1:7946",
		"--link-addr", "0.0.0.0:7947", "--admin-addr", "0.0.0.0:7948",
		"--gossip-key-file", gossipKey, "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-file", ca,
		"--deadlock-wait", "0",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "n1" || c.ClusterID != "prod" || c.Lease != 4*time.Second || c.Heartbeat != 500*time.Millisecond || c.LogFormat != "json" {
		t.Fatalf("precedence: %+v", c)
	}
	if !slices.Equal(c.Members, []string{"n1", "n2", "n3"}) || !slices.Equal(c.Seeds, []string{"10.0.0.2:7946", "10.0.0.3:7946"}) {
		t.Fatalf("lists: %v %v", c.Members, c.Seeds)
	}
	s, err := c.build()
	if err != nil {
		t.Fatal(err)
	}
	n := s.node
	if n.LinkAdvertiseAddr != "10.0.0.1:7947" || n.GossipAdvertiseAddr != "10.0.0.1:7946" || n.Tags[AdminTag] != "http://10.0.0.1:7948" {
		t.Errorf("advertised: link %q gossip %q admin %q", n.LinkAdvertiseAddr, n.GossipAdvertiseAddr, n.Tags[AdminTag])
	}
	if string(n.GossipKey) != "0123456789abcdef0123456789abcdef" || n.TLS == nil || s.token != "s3cret" || !s.json || n.DeadlockWait != 0 {
		t.Errorf("files: key %q TLS %v token %q json %v", n.GossipKey, n.TLS != nil, s.token, s.json)
	}
	if n.Lease != 4*time.Second || n.HeartbeatInterval != 500*time.Millisecond || n.ClusterID != "prod" {
		t.Errorf("timing: %+v", n)
	}
	c2, err := Parse([]string{"--name", "a", "--members", "a", "--members", "b", "--admin-addr", "0.0.0.0:7948", "--admin-insecure"}, io.Discard)
	if err != nil || !slices.Equal(c2.Members, []string{"a", "b"}) {
		t.Fatalf("repeated flag: %v %v", c2.Members, err)
	}
	if s2, _ := c2.build(); s2.adminAdvertise != "" || s2.node.Tags != nil || s2.unsafeNoLockDelay {
		t.Errorf("no advertisable admin address, yet advertised %q (or unsafe by default)", s2.adminAdvertise)
	}
	c3, err := Parse(base("--unsafe-no-lock-delay"), io.Discard)
	if s3, _ := c3.build(); err != nil || !s3.unsafeNoLockDelay {
		t.Errorf("--unsafe-no-lock-delay did not reach the node: %v", err)
	}
}

func TestHelp(t *testing.T) {
	var out strings.Builder
	if _, err := Parse([]string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"DLM_MEMBERS", "--config", "-admin-token-file", "-tls-ca-file", "-log-format"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// testCerts writes a CA of cluster and a node certificate for name signed
// by it, as dlmnode certs does, and returns the files.
func testCerts(t *testing.T, cluster, name string) (cert, key, ca string) {
	t.Helper()
	dir := t.TempDir()
	c, caPEM, caKey, err := certs.NewCA(cluster, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, _, err := c.Issue(transport.Identity{Cluster: cluster, Role: transport.RoleNode, Name: name}, nil, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := certs.NodeFiles(name)
	if err := certs.WriteFiles(dir, false, certs.File{Name: certs.CAFile, Data: caPEM}, certs.File{Name: certs.CAKeyFile, Data: caKey},
		certs.File{Name: certFile, Data: certPEM}, certs.File{Name: keyFile, Data: keyPEM}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, certFile), filepath.Join(dir, keyFile), filepath.Join(dir, certs.CAFile)
}
