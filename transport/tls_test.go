package transport_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/internal/tlsprobe"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

type testCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	pool   *x509.CertPool
	serial atomic.Int64
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	ca := &testCA{cert: cert, key: key, pool: pool}
	ca.serial.Store(1)
	return ca
}

// certSpec says what a test certificate is: its identity (none if zero),
// its extended key usages (nil: server and client) and its validity (zero:
// from an hour ago to an hour ahead).
type certSpec struct {
	id                  transport.Identity
	usages              []x509.ExtKeyUsage
	notBefore, notAfter time.Time
}

// issue signs a certificate as spec says.
func (ca *testCA) issue(t *testing.T, spec certSpec) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if spec.usages == nil {
		spec.usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	if spec.notBefore.IsZero() {
		spec.notBefore, spec.notAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial.Add(1)),
		Subject:      pkix.Name{CommonName: spec.id.Name},
		NotBefore:    spec.notBefore,
		NotAfter:     spec.notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  spec.usages,
	}
	if spec.id != (transport.Identity{}) {
		tmpl.URIs = []*url.URL{spec.id.URI()}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// node signs a node certificate of the test cluster for name, good for
// both ends of a connection.
func (ca *testCA) node(t *testing.T, name string) tls.Certificate {
	t.Helper()
	return ca.issue(t, certSpec{id: transport.Identity{Cluster: cluster, Role: transport.RoleNode, Name: name}})
}

func tlsNode(t *testing.T, name string, ca *testCA, cert tls.Certificate, tweak func(*transport.Config)) (*node, *transport.TLSConfig) {
	t.Helper()
	tc := &transport.TLSConfig{Certificate: cert, CAs: ca.pool}
	sl, err := transport.ListenTCP(transport.TCPConfig{Addr: "127.0.0.1:0", TLS: tc})
	if err != nil {
		t.Fatal(err)
	}
	return newNode(t, name, sl, tweak), tc
}

// intruder dials addr over TLS with the given client certificates (none, or
// one from another CA), sends a valid Hello and a request, and returns once
// the node has closed the connection.
func intruder(t *testing.T, addr string, certs []tls.Certificate) {
	t.Helper()
	intruderAs(t, addr, certs, evilHello())
}

// intruderAs is intruder with a Hello of its choosing; the request it
// sends is for lock 666.
func intruderAs(t *testing.T, addr string, certs []tls.Certificate, hello *wire.Hello) {
	t.Helper()
	var client *tls.Certificate
	if len(certs) > 0 {
		client = &certs[0]
	}
	tlsprobe.Send(t, addr, client, frameOf(t, wire.Header{}, hello), frameOf(t, wire.Header{ID: 1}, lockReq(666)))
}

func TestRejectsUnauthenticatedPeer(t *testing.T) {
	ca, rogue := newCA(t, "cluster CA"), newCA(t, "rogue CA")
	a, _ := tlsNode(t, "a", ca, ca.node(t, "a"), nil)
	b, _ := tlsNode(t, "b", ca, ca.node(t, "b"), nil)
	defer a.links.Close()
	defer b.links.Close()
	for _, p := range [][2]*node{{a, b}, {b, a}} {
		if err := p[0].links.SetPeer(p[1].links.Name(), p[1].addr); err != nil {
			t.Fatal(err)
		}
	}
	callOK(t, a, "b", 1) // mutual TLS between members works

	intruder(t, b.addr, nil)                                      // no client certificate
	intruder(t, b.addr, []tls.Certificate{rogue.node(t, "evil")}) // signed by another CA

	// A full node whose certificate the cluster CA did not sign cannot send
	// either: its dial is refused by b, and it refuses b's certificate. (Its
	// name sorts before b's, so it is the one that dials.)
	evil, _ := tlsNode(t, "a-evil", rogue, rogue.node(t, "a-evil"), nil)
	defer evil.links.Close()
	if err := evil.links.SetPeer("b", b.addr); err != nil {
		t.Fatal(err)
	}
	_ = evil.links.Send("b", lockReq(667)) // queued while the first dial runs, then lost
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := evil.links.WaitConnected(ctx, "b"); err == nil {
		t.Error("a node with a rogue certificate connected")
	}

	// b counts a refusal before it closes the connection, and intruder
	// returned only after seeing the close.
	if got := counter(t, b.reg, "dlm_transport_handshakes_rejected_total", "reason", "tls"); got < 2 {
		t.Errorf("handshakes_rejected_total{reason=tls} = %v, want ≥ 2", got)
	}
	for _, m := range b.rec.messages() {
		if m.from != "a" {
			t.Errorf("b's handler got %+v from an unauthenticated peer", m)
		}
	}
	callOK(t, a, "b", 3)
	callOK(t, b, "a", 4)
}
