// Package certs makes the certificates of a dlm cluster: a CA bound to the
// cluster, node certificates that carry a node's identity and addresses,
// and client certificates. dlmnode certs is its command line. Every file
// is written owner-only (0600, in a directory made 0700), whole or not at
// all, and nothing existing is overwritten unless asked.
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed-a6839e30/dlm/transport"
)

// The files of a directory of certificates. Node and client files carry
// the name: NodeFiles and ClientFiles.
const (
	CAFile        = "ca.pem"
	CAKeyFile     = "ca-key.pem"
	GossipKeyFile = "gossip.key"
)

// NodeFiles returns the names of a node's certificate and key files.
func NodeFiles(name string) (cert, key string) {
	return "node-" + name + ".pem", "node-" + name + "-key.pem"
}

// ClientFiles returns the names of a client's certificate and key files.
func ClientFiles(name string) (cert, key string) {
	return "client-" + name + ".pem", "client-" + name + "-key.pem"
}

// ErrExists is returned when a file to be written exists and overwriting
// was not asked for. Nothing was written.
var ErrExists = errors.New("exists")

// skew backdates every certificate, so that a host whose clock is a few
// minutes behind the one that made it accepts it at once.
const skew = 5 * time.Minute

// CA is a cluster's certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// Cluster is the cluster whose identities the CA may sign: its name
	// constraint (a URI host), so that it cannot vouch for a node of
	// another cluster even by mistake.
	Cluster string
}

// NewCA makes a CA for cluster, valid for validity from now.
func NewCA(cluster string, validity time.Duration, now time.Time) (*CA, []byte, []byte, error) {
	if err := (transport.Identity{Cluster: cluster, Role: transport.RoleNode, Name: "x"}).Validate(); err != nil {
		return nil, nil, nil, err
	}
	if validity <= 0 {
		return nil, nil, nil, errors.New("the validity must be positive")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"dlm"}, CommonName: "dlm CA of cluster " + cluster},
		NotBefore:             now.Add(-skew),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true, // it signs certificates, not other CAs
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		PermittedURIDomains:   []string{cluster},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return &CA{Cert: cert, Key: key, Cluster: cluster}, encodeCert(der), keyPEM, nil
}

// ParseCA reads a CA from its PEM key and certificate. certPEM may be a
// bundle of CAs (while one replaces another): the CA is the certificate
// of the key.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("no PEM key")
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("the key cannot sign")
	}
	found := false
	for rest := certPEM; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		found = true
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		if !cert.IsCA || !publicKeysEqual(signer.Public(), cert.PublicKey) {
			continue
		}
		ca := &CA{Cert: cert, Key: signer}
		if len(cert.PermittedURIDomains) == 1 {
			ca.Cluster = cert.PermittedURIDomains[0]
		}
		return ca, nil
	}
	if !found {
		return nil, errors.New("no PEM certificate")
	}
	return nil, errors.New("no CA certificate of the key")
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ea, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ea.Equal(b)
}

// Issue makes a certificate for id signed by the CA, valid for validity
// from now (or until the CA expires, if sooner: the returned time says
// until when). A node's certificate serves both ends of a link and lists
// hosts (IP addresses or DNS names) for clients that check them; a
// client's authenticates a client only.
func (ca *CA) Issue(id transport.Identity, hosts []string, validity time.Duration, now time.Time) (certPEM, keyPEM []byte, notAfter time.Time, err error) {
	if err := id.Validate(); err != nil {
		return nil, nil, time.Time{}, err
	}
	if ca.Cluster != "" && id.Cluster != ca.Cluster {
		return nil, nil, time.Time{}, fmt.Errorf("the CA signs certificates of cluster %q, not %q", ca.Cluster, id.Cluster)
	}
	if validity <= 0 {
		return nil, nil, time.Time{}, errors.New("the validity must be positive")
	}
	if !now.Before(ca.Cert.NotAfter) {
		return nil, nil, time.Time{}, fmt.Errorf("the CA expired on %s", ca.Cert.NotAfter.Format(time.DateOnly))
	}
	notAfter = now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"dlm"}, OrganizationalUnit: []string{string(id.Role)}, CommonName: id.Name},
		NotBefore:    now.Add(-skew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		URIs:         []*url.URL{id.URI()},
	}
	switch id.Role {
	case transport.RoleNode:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else if err := checkDNSName(h); err != nil {
				return nil, nil, time.Time{}, fmt.Errorf("host %q: %v", h, err)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	case transport.RoleClient:
		if len(hosts) > 0 {
			return nil, nil, time.Time{}, errors.New("a client certificate lists no hosts")
		}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	return encodeCert(der), keyPEM, notAfter, nil
}

func checkDNSName(h string) error {
	if h == "" || len(h) > 253 || strings.HasPrefix(h, ".") || strings.HasSuffix(h, ".") {
		return errors.New("not an IP address or a DNS name")
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return errors.New("not an IP address or a DNS name")
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '*') {
				return errors.New("not an IP address or a DNS name")
			}
		}
	}
	return nil
}

// NewGossipKey returns a new gossip encryption key, 32 random bytes in
// base64, as dlmnode agent --gossip-key-file reads it.
func NewGossipKey() ([]byte, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return []byte(base64.StdEncoding.EncodeToString(k) + "\n"), nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// CheckFileName refuses a node or client name that cannot be part of a
// file name in the directory.
func CheckFileName(name string) error {
	if name == "" || strings.HasPrefix(name, ".") || strings.ContainsAny(name, "/\\\x00") {
		return fmt.Errorf("name %q cannot be part of a file name", name)
	}
	return nil
}

// File is one file to write.
type File struct {
	Name string // in the directory
	Data []byte
}

// WriteFiles writes files into dir, creating it (0700) if need be. Each
// is written owner-only (0600) to a temporary file and renamed into place,
// so that an agent reloading its certificate reads it whole. Unless
// overwrite, a file that exists is not replaced: then nothing is written
// and the error wraps ErrExists.
func WriteFiles(dir string, overwrite bool, files ...File) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if !overwrite {
		for _, f := range files {
			if _, err := os.Lstat(filepath.Join(dir, f.Name)); err == nil {
				return fmt.Errorf("%s: %w (--force replaces it)", filepath.Join(dir, f.Name), ErrExists)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	for _, f := range files {
		if err := writeFile(filepath.Join(dir, f.Name), f.Data); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing to remove
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// LoadCA reads the CA of dir.
func LoadCA(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, err
	}
	ca, err := ParseCA(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile), err)
	}
	return ca, nil
}
