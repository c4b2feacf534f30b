package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Identity is who a certificate of the cluster's CA says its holder is: a
// node of a cluster, by name, or a client. It is carried in the
// certificate as a URI subject alternative name,
//
//	dlm://<cluster>/node/<name>
//	dlm://<cluster>/client/<name>
//
// and a certificate carries exactly one. With TLS on, the links accept a
// connection only from a node certificate of their own cluster whose name
// is the one the peer's Hello gives (and, when dialling, the node meant);
// a client certificate is refused there whatever its CA. The cluster ID in
// the URI keeps a certificate of one cluster from being used in another
// that shares the CA.
type Identity struct {
	// Cluster is the cluster's ID (Config.ClusterID): letters, digits and
	// '-', '_', '.', '~', since it is the URI's host.
	Cluster string
	// Role says what the holder may do: RoleNode speaks on the links,
	// RoleClient only on an agent's client port.
	Role Role
	// Name is the node's name, or the client's (for logs and audit).
	Name string
}

// Role is what a certificate is for.
type Role string

// The roles of Identity.
const (
	RoleNode   Role = "node"
	RoleClient Role = "client"
)

// IdentityScheme is the URI scheme of an Identity.
const IdentityScheme = "dlm"

// Sentinel errors of identities; test with errors.Is.
var (
	// ErrNoIdentity: a certificate carries no dlm identity, or more than
	// one, or one that does not parse.
	ErrNoIdentity = errors.New("transport: certificate carries no dlm identity")
	// ErrIdentity: a peer's certificate is not what the connection needs:
	// another role, another cluster, or another name than it claims.
	ErrIdentity = errors.New("transport: peer identity refused")
)

// String returns the identity's URI.
func (id Identity) String() string { return id.URI().String() }

// URI returns the identity as the URI a certificate carries.
func (id Identity) URI() *url.URL {
	return &url.URL{Scheme: IdentityScheme, Host: id.Cluster, Path: "/" + string(id.Role) + "/" + id.Name}
}

// Validate reports whether the identity can be written into a
// certificate and read back.
func (id Identity) Validate() error {
	if err := validCertCluster(id.Cluster); err != nil {
		return err
	}
	switch {
	case id.Role != RoleNode && id.Role != RoleClient:
		return fmt.Errorf("role %q is neither %q nor %q", id.Role, RoleNode, RoleClient)
	case id.Name == "" || len(id.Name) > wire.MaxNodeName:
		return fmt.Errorf("name %q must be 1..%d bytes", id.Name, wire.MaxNodeName)
	}
	return nil
}

// validCertCluster: the cluster ID is a URI host, which crypto/x509 reads
// back only if it is a dotted name of printable characters, and net/url
// only if none needs escaping.
func validCertCluster(c string) error {
	if c == "" || len(c) > wire.MaxClusterID {
		return fmt.Errorf("cluster ID %q must be 1..%d bytes", c, wire.MaxClusterID)
	}
	for _, label := range strings.Split(c, ".") {
		if label == "" {
			return fmt.Errorf("cluster ID %q has an empty dot-separated part, which a certificate cannot carry", c)
		}
		for _, r := range label {
			ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '~'
			if !ok {
				return fmt.Errorf("cluster ID %q: a certificate can carry only letters, digits, '-', '_', '.' and '~'", c)
			}
		}
	}
	return nil
}

// IdentityOf returns the identity cert carries; ErrNoIdentity if it
// carries none or more than one.
func IdentityOf(cert *x509.Certificate) (Identity, error) {
	var found []Identity
	for _, u := range cert.URIs {
		if u.Scheme != IdentityScheme {
			continue
		}
		id, err := parseIdentity(u)
		if err != nil {
			return Identity{}, fmt.Errorf("%w: %s: %v", ErrNoIdentity, u, err)
		}
		found = append(found, id)
	}
	switch len(found) {
	case 0:
		return Identity{}, fmt.Errorf("%w (a URI SAN %s://<cluster>/node/<name> or /client/<name>; dlmnode certs makes such certificates)", ErrNoIdentity, IdentityScheme)
	case 1:
		return found[0], nil
	}
	return Identity{}, fmt.Errorf("%w: it carries %d (%v, ...), which is ambiguous", ErrNoIdentity, len(found), found[0])
}

func parseIdentity(u *url.URL) (Identity, error) {
	if u.User != nil || u.Port() != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return Identity{}, errors.New("only a host (the cluster) and a path /<role>/<name> are allowed")
	}
	role, name, ok := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	id := Identity{Cluster: u.Host, Role: Role(role), Name: name}
	if !ok || !strings.HasPrefix(u.Path, "/") {
		return Identity{}, errors.New("the path must be /<role>/<name>")
	}
	if err := id.Validate(); err != nil {
		return Identity{}, err
	}
	return id, nil
}

// PeerIdentity returns the identity of the certificate a TLS peer
// presented.
func PeerIdentity(cs tls.ConnectionState) (Identity, error) {
	if len(cs.PeerCertificates) == 0 {
		return Identity{}, fmt.Errorf("%w: the peer presented no certificate", ErrNoIdentity)
	}
	return IdentityOf(cs.PeerCertificates[0])
}

// connectionStater is a connection that ran TLS (tls.Conn).
type connectionStater interface {
	ConnectionState() tls.ConnectionState
}

// peerNode checks, after TLS, that the peer of c presented a node
// certificate of this cluster and returns it; without TLS it returns nil
// and the Hello is all there is to go by.
func (l *Links) peerNode(c net.Conn) (*Identity, error) {
	tc, ok := c.(connectionStater)
	if !ok {
		return nil, nil
	}
	id, err := PeerIdentity(tc.ConnectionState())
	switch {
	case err != nil:
		return nil, refuseIdentity("role", "not a node certificate: %v", err)
	case id.Role != RoleNode:
		return nil, refuseIdentity("role", "%s is a %s certificate; the links take node certificates only", id, id.Role)
	case id.Cluster != l.cfg.ClusterID:
		return nil, refuseIdentity("identity", "%s is a certificate of cluster %q, this node is in %q", id, id.Cluster, l.cfg.ClusterID)
	}
	return &id, nil
}

func refuseIdentity(reason, format string, args ...any) error {
	return &handshakeError{reason: reason, err: fmt.Errorf("%w: %w: "+format, append([]any{ErrHandshake, ErrIdentity}, args...)...)}
}

// claims refuses a peer whose certificate names another node than name
// (what its Hello says, or the node dialled). A nil id (no TLS) passes.
func (id *Identity) claims(name string) error {
	if id == nil || id.Name == name {
		return nil
	}
	return refuseIdentity("identity", "the certificate is node %q's, the peer claims to be %q", id.Name, name)
}

// checkDialled holds the node a dial reached to its certificate before
// anything is sent to it. A refusal is counted and logged here: the
// dialler's other failures are only retried, but a certificate that does
// not fit is a misconfiguration or an impostor, which an operator must
// hear of.
func (l *Links) checkDialled(c net.Conn, want string) error {
	id, err := l.peerNode(c)
	if err == nil {
		err = id.claims(want)
	}
	if err != nil {
		reason := handshakeReason(err)
		l.met.handshakeRejected.WithLabelValues(reason).Inc()
		l.log.Warn("refused peer", "peer", want, "remote", c.RemoteAddr().String(), "reason", reason, "err", err)
	}
	return err
}
