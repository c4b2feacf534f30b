// Package tlsprobe tells which certificate a TLS server presents, for
// tests that check what a listener serves (after a rotation, say).
package tlsprobe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// Presented dials addr with TLS 1.3, offering client as its certificate
// whatever CAs the server names, and returns the leaf the server
// presented. It verifies nothing: it reports.
func Presented(ctx context.Context, addr string, client tls.Certificate) (*x509.Certificate, error) {
	d := &tls.Dialer{Config: &tls.Config{
		InsecureSkipVerify: true, MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &client, nil },
	}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	certs := c.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return nil, errors.New("tlsprobe: the server presented no certificate")
	}
	return certs[0], nil
}

// Serial returns the serial number, in decimal, of the certificate the
// server at addr presents, failing t if there is none within 5 s.
func Serial(t testing.TB, addr string, client tls.Certificate) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	leaf, err := Presented(ctx, addr, client)
	if err != nil {
		t.Fatalf("tlsprobe: %s: %v", addr, err)
	}
	return leaf.SerialNumber.String()
}

// Send connects to addr over TLS 1.3, presenting client (nil: no
// certificate) whatever CAs the server names, writes each of data, and
// returns once the server has closed the connection, or after 10 s. Write
// errors are ignored: with TLS 1.3 the client's side of the handshake may
// complete before the server has judged its certificate, so whether the
// writes succeed says nothing; what the server did with them is for the
// test to check.
func Send(t testing.TB, addr string, client *tls.Certificate, data ...[]byte) {
	t.Helper()
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
	if client != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return client, nil }
	}
	c := tls.Client(raw, cfg)
	for _, d := range data {
		_, _ = c.Write(d)
	}
	_, _ = io.Copy(io.Discard, c) // the alert, or nothing
	_, _ = io.Copy(io.Discard, raw)
}
