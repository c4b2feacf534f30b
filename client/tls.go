package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/seed-a6839e30/dlm/transport"
)

// LoadTLS returns the TLS configuration of a client of a cluster with
// mutual TLS (for Config.TLS), from PEM files: the client's certificate
// and key (dlmnode certs client NAME makes them) and the cluster's CA.
// The client presents its certificate, and accepts only an agent that
// presents a node certificate of the same cluster signed by the CA,
// whatever its host name: agents are reached at addresses, not names a
// certificate must list.
//
// The certificate must be a client certificate (dlm://CLUSTER/client/NAME):
// agents refuse node certificates on their client ports, so one is refused
// here already, with the reason.
func LoadTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("client: TLS certificate %s, key %s: %w", certFile, keyFile, err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("client: TLS CA: %w", err)
	}
	cas := x509.NewCertPool()
	if !cas.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("client: TLS CA %s holds no PEM certificate", caFile)
	}
	tc := &transport.TLSConfig{Certificate: cert, CAs: cas}
	id, err := tc.Identity()
	if err != nil {
		return nil, fmt.Errorf("client: %s: %w", certFile, err)
	}
	if id.Role != transport.RoleClient {
		return nil, fmt.Errorf("client: %s is %s, a %s certificate: agents' client ports take client certificates only (dlmnode certs client NAME)", certFile, id, id.Role)
	}
	return tc.ClientConfig()
}

// tlsAlert reports whether err is a TLS alert the agent sent: its TLS
// layer refused the client (no certificate, another CA's, an expired one).
func tlsAlert(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error"
}
