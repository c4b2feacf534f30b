package transport_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
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
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue signs a node certificate good for both ends of a connection.
func (ca *testCA) issue(t *testing.T, name string, serial int64) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func tlsNode(t *testing.T, name string, ca *testCA, cert tls.Certificate) *node {
	t.Helper()
	sl, err := transport.ListenTCP(transport.TCPConfig{Addr: "127.0.0.1:0", TLS: &transport.TLSConfig{Certificate: cert, CAs: ca.pool}})
	if err != nil {
		t.Fatal(err)
	}
	return newNode(t, name, sl, nil)
}

// intruder dials addr over TLS with the given client certificates (none, or
// one from another CA), sends a valid Hello and a request, and returns once
// the node has closed the connection.
func intruder(t *testing.T, addr string, certs []tls.Certificate) {
	t.Helper()
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, Certificates: certs, MinVersion: tls.VersionTLS13})
	// With TLS 1.3 the client's side of the handshake may complete before
	// the server has judged its certificate, so the writes can succeed.
	_, _ = c.Write(frameOf(t, wire.Header{}, evilHello()))
	_, _ = c.Write(frameOf(t, wire.Header{ID: 1}, lockReq(666)))
	_, _ = io.Copy(io.Discard, c) // the alert, or nothing
	_, _ = io.Copy(io.Discard, raw)
}

func TestRejectsUnauthenticatedPeer(t *testing.T) {
	ca, rogue := newCA(t, "cluster CA"), newCA(t, "rogue CA")
	a := tlsNode(t, "a", ca, ca.issue(t, "a", 2))
	b := tlsNode(t, "b", ca, ca.issue(t, "b", 3))
	defer a.links.Close()
	defer b.links.Close()
	for _, p := range [][2]*node{{a, b}, {b, a}} {
		if err := p[0].links.SetPeer(p[1].links.Name(), p[1].addr); err != nil {
			t.Fatal(err)
		}
	}
	callOK(t, a, "b", 1) // mutual TLS between members works

	intruder(t, b.addr, nil)                                          // no client certificate
	intruder(t, b.addr, []tls.Certificate{rogue.issue(t, "evil", 4)}) // signed by another CA

	// A full node whose certificate the cluster CA did not sign cannot send
	// either: its dial is refused by b, and it refuses b's certificate. (Its
	// name sorts before b's, so it is the one that dials.)
	evil := tlsNode(t, "a-evil", rogue, rogue.issue(t, "a-evil", 5))
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
