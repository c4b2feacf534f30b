package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/transport"
)

// credentials are the agent's TLS files and the configuration made from
// them, which the links (and the client port) share: reload reads the
// files again and rotates it, so that connections made from then on use
// the new certificate, key and CAs while established ones keep theirs.
type credentials struct {
	certFile, keyFile, caFile string
	want                      transport.Identity
	tls                       *transport.TLSConfig

	log      *slog.Logger
	reloads  *prometheus.CounterVec
	notAfter prometheus.Gauge

	mu     sync.Mutex // serialises reloads (SIGHUP and the file watch)
	stamps [3]fileStamp
	leaf   *x509.Certificate
}

// fileStamp is what the file watch compares: a file is taken as changed
// when its size or modification time is.
type fileStamp struct {
	size, modTime int64
}

// loadCredentials reads the TLS files for the node want; nil without
// them. Problems are usage errors naming the flag.
func loadCredentials(certFile, keyFile, caFile string, want transport.Identity) (*credentials, error) {
	if certFile == "" && keyFile == "" && caFile == "" {
		return nil, nil
	}
	switch {
	case certFile == "":
		return nil, usageError("--tls-cert-file is required with --tls-key-file or --tls-ca-file")
	case keyFile == "":
		return nil, usageError("--tls-key-file is required with --tls-cert-file")
	case caFile == "":
		return nil, usageError("--tls-ca-file is required with --tls-cert-file: peers are checked against the cluster's CA")
	}
	c := &credentials{certFile: certFile, keyFile: keyFile, caFile: caFile, want: want}
	cert, pool, leaf, err := c.read()
	if err != nil {
		return nil, usageError("%v", err)
	}
	c.tls = &transport.TLSConfig{Certificate: cert, CAs: pool}
	c.leaf = leaf
	c.stamps = c.stat()
	return c, nil
}

// read reads and checks the three files; an error names the flag of the
// file at fault.
func (c *credentials) read() (tls.Certificate, *x509.CertPool, *x509.Certificate, error) {
	var none tls.Certificate
	for _, f := range []struct{ flag, path string }{{"--tls-cert-file", c.certFile}, {"--tls-key-file", c.keyFile}, {"--tls-ca-file", c.caFile}} {
		if _, err := os.ReadFile(f.path); err != nil {
			return none, nil, nil, fmt.Errorf("%s: %v", f.flag, err)
		}
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return none, nil, nil, fmt.Errorf("--tls-cert-file %s, --tls-key-file %s: %v", c.certFile, c.keyFile, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return none, nil, nil, fmt.Errorf("--tls-cert-file %s: %v", c.certFile, err)
		}
	}
	id, err := transport.IdentityOf(leaf)
	if err != nil {
		return none, nil, nil, fmt.Errorf("--tls-cert-file %s: %v", c.certFile, err)
	}
	if id != c.want {
		return none, nil, nil, fmt.Errorf("--tls-cert-file %s: the certificate is %s, but this node is %s (--name %s, --cluster-id %s); dlmnode certs node %s makes its own",
			c.certFile, id, c.want, c.want.Name, c.want.Cluster, c.want.Name)
	}
	pem, err := os.ReadFile(c.caFile)
	if err != nil {
		return none, nil, nil, fmt.Errorf("--tls-ca-file: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return none, nil, nil, fmt.Errorf("--tls-ca-file %s: no PEM certificate in it", c.caFile)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		// Peers would refuse it: say so now rather than at every dial.
		return none, nil, nil, fmt.Errorf("--tls-cert-file %s does not verify against --tls-ca-file %s: %v", c.certFile, c.caFile, err)
	}
	return cert, pool, leaf, nil
}

func (c *credentials) stat() [3]fileStamp {
	var s [3]fileStamp
	for i, p := range []string{c.certFile, c.keyFile, c.caFile} {
		if st, err := os.Stat(p); err == nil {
			s[i] = fileStamp{st.Size(), st.ModTime().UnixNano()}
		}
	}
	return s
}

// start registers the metrics and logs the certificate the agent starts
// with.
func (c *credentials) start(log *slog.Logger, reg prometheus.Registerer) error {
	c.log = log
	c.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "dlm_agent", Name: "tls_reloads_total",
		Help: "Reloads of the TLS certificate, key and CAs (SIGHUP or a change of the files), by result (ok, error).",
	}, []string{"result"})
	c.notAfter = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "dlm_agent", Name: "tls_certificate_expiry_timestamp_seconds",
		Help: "When the node certificate in use expires (Unix time): alert well before it.",
	})
	for _, m := range []prometheus.Collector{c.reloads, c.notAfter} {
		if err := reg.Register(m); err != nil {
			return err
		}
	}
	c.reloads.WithLabelValues("ok")
	c.reloads.WithLabelValues("error")
	c.notAfter.Set(float64(c.leaf.NotAfter.Unix()))
	c.logCert("TLS certificate", c.leaf)
	return nil
}

func (c *credentials) logCert(msg string, leaf *x509.Certificate) {
	attrs := []any{"identity", c.want.String(), "serial", leaf.SerialNumber.Text(16), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339)}
	if left := time.Until(leaf.NotAfter); left < 30*24*time.Hour {
		c.log.Warn(msg+" expires soon: renew it (dlmnode certs node --force) and send SIGHUP", append(attrs, "left", left.Round(time.Hour))...)
		return
	}
	c.log.Info(msg, attrs...)
}

// reload reads the files again and, if they are good, makes connections
// from now on use them. Bad files are logged and counted, and the
// credentials in use stay.
func (c *credentials) reload(why string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stamps = c.stat()
	cert, pool, leaf, err := c.read()
	if err == nil {
		err = c.tls.Rotate(cert, pool)
	}
	if err != nil {
		c.reloads.WithLabelValues("error").Inc()
		c.log.Error("TLS reload failed; the certificate in use stays", "trigger", why, "err", err)
		return err
	}
	c.leaf = leaf
	c.reloads.WithLabelValues("ok").Inc()
	c.notAfter.Set(float64(leaf.NotAfter.Unix()))
	c.logCert("TLS certificate reloaded; new connections use it", leaf)
	return nil
}

// watch reloads when a file's size or modification time changes, looking
// every interval, until ctx ends.
func (c *credentials) watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		changed := c.stat() != c.stamps
		c.mu.Unlock()
		if changed {
			_ = c.reload("files changed")
		}
	}
}

var errNoTLS = errors.New("no TLS files configured: nothing to reload")

// refuseExposures refuses a configuration whose links or gossip bind
// beyond loopback without their protection, naming what to set.
func refuseExposures(n *dlm.Config) error {
	for _, e := range n.Exposures() {
		switch e.Listener {
		case "links":
			return usageError("--link-addr %q is not a loopback address: set --tls-cert-file, --tls-key-file and --tls-ca-file (dlmnode certs makes them), or --insecure to let anyone who reaches it speak as a member", e.Addr)
		case "gossip":
			return usageError("--gossip-addr %q is not a loopback address: set --gossip-key-file (dlmnode certs ca makes one), or --insecure to let anyone who reaches it join the membership", e.Addr)
		}
	}
	return nil
}
