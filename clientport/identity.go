package clientport

import (
	"crypto/tls"
	"fmt"

	"github.com/seed-a6839e30/dlm/transport"
)

// clientCert checks, after the TLS handshake (which verified the chain
// against the cluster's CAs), that a connection's certificate is a
// client's of the agent's cluster. A node certificate is refused too, as
// etcd keeps peer and client certificates apart: a node's key is for the
// links, where it can speak as that node, and a client port that took it
// would make every leaked node key a client credential as well, with no
// way to revoke one use without the other.
func (s *Server) clientCert(cs tls.ConnectionState) error {
	id, err := transport.PeerIdentity(cs)
	switch {
	case err != nil:
		return fmt.Errorf("not a client certificate: %v", err)
	case id.Role != transport.RoleClient:
		return fmt.Errorf("%s is a %s certificate; the client port takes client certificates only (dlmnode certs client NAME)", id, id.Role)
	case id.Cluster != s.cluster:
		return fmt.Errorf("%s is a certificate of cluster %q, this agent is in %q", id, id.Cluster, s.cluster)
	}
	return nil
}
