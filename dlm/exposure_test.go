package dlm

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/internal/certs"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/memnet"
)

// TestExposures: a listener bound beyond loopback without its protection
// is listed (and logged at Start), one on loopback, protected, or replaced
// by the caller's own is not.
func TestExposures(t *testing.T) {
	tlsOn := &transport.TLSConfig{}
	key := []byte("0123456789abcdef")
	mem, err := memnet.New(memnet.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	mn, err := mem.AddNode("a")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		tweak func(*Config)
		want  string // listener:missing, comma-separated
	}{
		{"loopback", func(c *Config) { c.LinkAddr, c.GossipAddr = "127.0.0.1:7947", "127.0.0.1:7946" }, ""},
		{"loopback v6 and localhost", func(c *Config) { c.LinkAddr, c.GossipAddr = "[::1]:7947", "localhost:7946" }, ""},
		{"127/8", func(c *Config) { c.LinkAddr, c.GossipAddr = "127.1.2.3:7947", "127.0.0.2:7946" }, ""},
		{"every interface", func(c *Config) { c.LinkAddr, c.GossipAddr = "0.0.0.0:7947", ":7946" }, "links:TLS,gossip:GossipKey"},
		{"a private address", func(c *Config) { c.LinkAddr, c.GossipAddr = "10.0.0.1:7947", "10.0.0.1:7946" }, "links:TLS,gossip:GossipKey"},
		{"a host name", func(c *Config) { c.LinkAddr, c.GossipAddr = "node1.example.com:7947", "[::]:7946" }, "links:TLS,gossip:GossipKey"},
		{"protected", func(c *Config) {
			c.LinkAddr, c.GossipAddr, c.TLS, c.GossipKey = "10.0.0.1:7947", "10.0.0.1:7946", tlsOn, key
		}, ""},
		{"links protected only", func(c *Config) { c.LinkAddr, c.GossipAddr, c.TLS = "10.0.0.1:7947", "10.0.0.1:7946", tlsOn }, "gossip:GossipKey"},
		{"the caller's streams", func(c *Config) {
			c.LinkAddr, c.GossipAddr, c.Streams, c.GossipTransport = "0.0.0.0:7947", "0.0.0.0:7946", mn.StreamLayer(), mn.Transport()
		}, ""},
	} {
		cfg := DefaultConfig()
		tc.tweak(&cfg)
		var got []string
		for _, e := range cfg.Exposures() {
			got = append(got, e.Listener+":"+e.Missing)
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("%s: exposures %v, want %q", tc.name, got, tc.want)
		}
		var log strings.Builder
		n := &Node{cfg: cfg, log: slog.New(slog.NewTextHandler(&log, nil))}
		n.warnExposures()
		if lines := strings.Count(log.String(), "level=WARN"); lines != len(got) {
			t.Errorf("%s: %d warnings for %d exposures:\n%s", tc.name, lines, len(got), log.String())
		}
		if tc.want != "" && !strings.Contains(log.String(), "beyond loopback") {
			t.Errorf("%s: warning %q", tc.name, log.String())
		}
	}
}

// TestValidateTLSIdentity: the node's certificate must be its own: a
// certificate of another node, another cluster, a client's or one
// without an identity is a configuration error.
func TestValidateTLSIdentity(t *testing.T) {
	now := time.Now()
	ca, _, _, err := certs.NewCA("prod", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	cert := func(role transport.Role, name string) *transport.TLSConfig {
		c, k, _, err := ca.Issue(transport.Identity{Cluster: "prod", Role: role, Name: name}, nil, time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		kp, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return &transport.TLSConfig{Certificate: kp, CAs: pool}
	}
	for _, tc := range []struct {
		name string
		tls  *transport.TLSConfig
		want string
	}{
		{"own", cert(transport.RoleNode, "n1"), ""},
		{"another node's", cert(transport.RoleNode, "n2"), "the certificate is dlm://prod/node/n2; this node is dlm://prod/node/n1"},
		{"a client's", cert(transport.RoleClient, "n1"), "dlm://prod/client/n1"},
		{"none", &transport.TLSConfig{CAs: pool}, "certificate and its key"},
	} {
		cfg := DefaultConfig()
		cfg.Name, cfg.ClusterID, cfg.Members, cfg.TLS = "n1", "prod", []string{"n1"}, tc.tls
		err := cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	cfg := DefaultConfig()
	cfg.Name, cfg.ClusterID, cfg.Members, cfg.TLS = "n1", "staging", []string{"n1"}, cert(transport.RoleNode, "n1")
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "dlm://staging/node/n1") {
		t.Errorf("another cluster's certificate: %v", err)
	}
}
