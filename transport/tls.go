package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"
)

// TLSConfig is the mutual TLS setup of a cluster: a CA (or a few) signs
// every node's certificate, and each certificate names its holder (see
// Identity). Peers are authenticated by the CA and by the identity their
// certificate carries, not by host name, because nodes dial each other by
// the addresses that membership gossips, not by names a certificate could
// list.
//
// Certificate and CAs are the first credentials; Rotate replaces them for
// the connections made after it. Use a TLSConfig through its pointer only,
// and do not change its fields once it is in use.
type TLSConfig struct {
	// Certificate is this node's certificate chain and key. Its leaf must
	// allow both server and client authentication (ExtKeyUsageServerAuth and
	// ExtKeyUsageClientAuth), since every node both dials and accepts, and
	// carry the node's Identity.
	Certificate tls.Certificate
	// CAs are the cluster's certificate authorities.
	CAs *x509.CertPool

	creds atomic.Pointer[tlsCreds] // what new connections use; see load
}

// tlsCreds is one generation of credentials and the server configuration
// made from them.
type tlsCreds struct {
	cert   *tls.Certificate
	cas    *x509.CertPool
	id     Identity
	server *tls.Config
}

func newTLSCreds(cert tls.Certificate, cas *x509.CertPool) (*tlsCreds, error) {
	if len(cert.Certificate) == 0 || cert.PrivateKey == nil {
		return nil, errors.New("transport: TLS needs a certificate and its key")
	}
	if cas == nil {
		return nil, errors.New("transport: TLS needs the cluster CAs")
	}
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("transport: TLS certificate: %w", err)
		}
	}
	id, err := IdentityOf(leaf)
	if err != nil {
		return nil, fmt.Errorf("transport: TLS certificate: %w", err)
	}
	cr := &tlsCreds{cert: &cert, cas: cas, id: id}
	cr.server = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    cas,
		// A resumed session would skip the check of the peer's chain
		// against the CAs of now; links are long-lived, so resuming saves
		// nothing worth that.
		SessionTicketsDisabled: true,
	}
	return cr, nil
}

// load returns the credentials new connections use: the last rotated, or
// the fields.
func (c *TLSConfig) load() (*tlsCreds, error) {
	if cr := c.creds.Load(); cr != nil {
		return cr, nil
	}
	cr, err := newTLSCreds(c.Certificate, c.CAs)
	if err != nil {
		return nil, err
	}
	c.creds.CompareAndSwap(nil, cr)
	return c.creds.Load(), nil
}

// Identity returns the identity the current certificate carries.
func (c *TLSConfig) Identity() (Identity, error) {
	cr, err := c.load()
	if err != nil {
		return Identity{}, err
	}
	return cr.id, nil
}

// Rotate replaces the certificate and the CAs for every connection made
// from now on, dialled or accepted; established connections keep the
// ones they were made with until they end. The new certificate must carry
// the same identity as the current one: rotation renews credentials, it
// does not rename a node. Safe to call while connections are made.
func (c *TLSConfig) Rotate(cert tls.Certificate, cas *x509.CertPool) error {
	cur, err := c.load()
	if err != nil {
		return err
	}
	next, err := newTLSCreds(cert, cas)
	if err != nil {
		return err
	}
	if next.id != cur.id {
		return fmt.Errorf("transport: the new certificate is %s, the current one %s: rotation keeps the identity", next.id, cur.id)
	}
	c.creds.Store(next)
	return nil
}

// server is the configuration of the accepting end: each handshake takes
// the credentials current at its start.
func (c *TLSConfig) server() *tls.Config {
	return &tls.Config{
		MinVersion:             tls.VersionTLS13,
		SessionTicketsDisabled: true,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cr, err := c.load()
			if err != nil {
				return nil, err
			}
			return cr.server, nil
		},
	}
}

// client is the configuration of the dialling end. It verifies the
// server's chain against the CAs but not its host name (see TLSConfig),
// and that the server is a node of this certificate's cluster: whoever
// dials, a link or a client, dials a node. InsecureSkipVerify only turns
// off the built-in check that VerifyConnection replaces. Without a session
// cache nothing is resumed.
func (c *TLSConfig) client() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cr, err := c.load()
			if err != nil {
				return nil, err
			}
			return cr.cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			cr, err := c.load()
			if err != nil {
				return err
			}
			if err := verifyChain(cs.PeerCertificates, cr.cas, x509.ExtKeyUsageServerAuth); err != nil {
				return err
			}
			id, err := IdentityOf(cs.PeerCertificates[0])
			switch {
			case err != nil:
				return fmt.Errorf("%w: the server is not a node: %v", ErrIdentity, err)
			case id.Role != RoleNode || id.Cluster != cr.id.Cluster:
				return fmt.Errorf("%w: the server is %s, not a node of cluster %q", ErrIdentity, id, cr.id.Cluster)
			}
			return nil
		},
	}
}

// verifyChain checks that a peer's certificates chain to one of cas, for
// usage.
func verifyChain(certs []*x509.Certificate, cas *x509.CertPool, usage x509.ExtKeyUsage) error {
	if len(certs) == 0 {
		return errors.New("transport: peer sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: cas, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}
