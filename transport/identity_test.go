package transport_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/internal/syncbuf"
	"github.com/seed-a6839e30/dlm/internal/tlsprobe"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

func withLog(b *syncbuf.Buffer) func(*transport.Config) {
	return func(c *transport.Config) { c.Logger = slog.New(slog.NewTextHandler(b, nil)) }
}

func nodeID(name string) transport.Identity {
	return transport.Identity{Cluster: cluster, Role: transport.RoleNode, Name: name}
}

// background keeps a legitimate cluster taking locks: calls around the
// ring of nodes until stop is called, which returns how many succeeded
// and the first failure. Bounded in count as well as by stop.
func background(nodes []*node) (stop func() (int, error)) {
	done := make(chan struct{})
	result := make(chan struct {
		n   int
		err error
	}, 1)
	go func() {
		n := 0
		var err error
		for i := 0; i < 100000 && err == nil; i++ {
			select {
			case <-done:
				result <- struct {
					n   int
					err error
				}{n, nil}
				return
			default:
			}
			from, to := nodes[i%len(nodes)], nodes[(i+1)%len(nodes)]
			lock := uint64(10000 + i)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			rep, cerr := from.links.Call(ctx, to.links.Name(), lockReq(lock))
			cancel()
			if c, ok := rep.(*wire.Completion); cerr != nil || !ok || c.Lock != lock {
				err = fmt.Errorf("call %s→%s: %v %#v", from.links.Name(), to.links.Name(), cerr, rep)
			}
			n++
		}
		<-done
		result <- struct {
			n   int
			err error
		}{n, err}
	}()
	return func() (int, error) {
		close(done)
		r := <-result
		return r.n, r.err
	}
}

// TestLinksRefuseWrongCertificates: over loopback TCP with mutual TLS, a
// connection is refused, counted under its reason and logged when its
// certificate is another node's than its Hello claims, a client's, one
// without an identity, another cluster's, another CA's or expired; and a
// node that dials a peer refuses one whose certificate names another
// node, before sending it anything. Nothing any of them sent reaches a
// handler, while three legitimate nodes keep calling each other.
func TestLinksRefuseWrongCertificates(t *testing.T) {
	ca, rogue := newCA(t, "cluster CA"), newCA(t, "rogue CA")
	var log1 syncbuf.Buffer
	certs := map[string]tls.Certificate{}
	var nodes []*node
	for _, name := range []string{"node1", "node2", "node3"} {
		certs[name] = ca.node(t, name)
		var tweak func(*transport.Config)
		if name == "node1" {
			tweak = withLog(&log1)
		}
		n, _ := tlsNode(t, name, ca, certs[name], tweak)
		defer n.links.Close()
		nodes = append(nodes, n)
	}
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				if err := a.links.SetPeer(b.links.Name(), b.addr); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	n1 := nodes[0]
	callOK(t, n1, "node3", 1)
	callOK(t, nodes[2], "node2", 2)
	stop := background(nodes)

	hello := func(name string) *wire.Hello {
		return &wire.Hello{Version: wire.LinkVersion, ClusterID: cluster, Node: name, BootID: 666, Session: 1}
	}
	past := time.Now().Add(-48 * time.Hour)
	for _, tc := range []struct {
		name   string
		cert   tls.Certificate
		claims string
		reason string
		log    string // in the refusal's log line
	}{
		{"node2's certificate claiming node3", certs["node2"], "node3", "identity", `the certificate is node \"node2\"'s, the peer claims to be \"node3\"`},
		{"a client certificate", ca.issue(t, certSpec{id: transport.Identity{Cluster: cluster, Role: transport.RoleClient, Name: "node3"}, usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}), "node3", "role", "is a client certificate"},
		{"a client identity with a node's key usages", ca.issue(t, certSpec{id: transport.Identity{Cluster: cluster, Role: transport.RoleClient, Name: "node3"}}), "node3", "role", "is a client certificate"},
		{"a certificate without an identity", ca.issue(t, certSpec{}), "node3", "role", "no dlm identity"},
		{"another cluster's node3", ca.issue(t, certSpec{id: transport.Identity{Cluster: "other", Role: transport.RoleNode, Name: "node3"}}), "node3", "identity", "cluster \\\"other\\\""},
		{"another CA's node3", rogue.node(t, "node3"), "node3", "tls", "certificate signed by unknown authority"},
		{"an expired node3", ca.issue(t, certSpec{id: nodeID("node3"), notBefore: past, notAfter: past.Add(time.Hour)}), "node3", "tls", "expired"},
		{"no certificate", tls.Certificate{}, "node3", "tls", "didn't provide a certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := counter(t, n1.reg, "dlm_transport_handshakes_rejected_total", "reason", tc.reason)
			var certs []tls.Certificate
			if tc.cert.Certificate != nil {
				certs = []tls.Certificate{tc.cert}
			}
			intruderAs(t, n1.addr, certs, hello(tc.claims))
			// node1 counts a refusal before it closes the connection, and
			// intruderAs returned only after seeing the close.
			if got := counter(t, n1.reg, "dlm_transport_handshakes_rejected_total", "reason", tc.reason) - before; got != 1 {
				t.Errorf("handshakes_rejected_total{reason=%s} went up by %v, want 1", tc.reason, got)
			}
			if !strings.Contains(log1.String(), tc.log) {
				t.Errorf("no refusal logged with %q; log:\n%s", tc.log, log1.String())
			}
		})
	}

	// A node that dials "node4" at an address where node2's certificate
	// answers (gossip pointed it there) refuses it before its Hello.
	impostor, _ := tlsNode(t, "node4", ca, certs["node2"], nil)
	defer impostor.links.Close()
	before := counter(t, n1.reg, "dlm_transport_handshakes_rejected_total", "reason", "identity")
	if err := n1.links.SetPeer("node4", impostor.addr); err != nil {
		t.Fatal(err)
	}
	_ = n1.links.Send("node4", lockReq(666)) // queued for the first dial, then lost
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := n1.links.WaitConnected(ctx, "node4"); err == nil {
		t.Error("node1 connected to node2's certificate as node4")
	}
	n1.links.RemovePeer("node4")
	if got := counter(t, n1.reg, "dlm_transport_handshakes_rejected_total", "reason", "identity") - before; got < 1 {
		t.Errorf("the dialler counted no identity refusal")
	}
	if !strings.Contains(log1.String(), `msg="refused peer"`) || !strings.Contains(log1.String(), `peer=node4`) {
		t.Errorf("the dialler logged no refusal of node4:\n%s", log1.String())
	}

	// Nor does it send anything to a server that presents a client's
	// certificate, or a node certificate of another cluster.
	for i, cert := range []tls.Certificate{
		ca.issue(t, certSpec{id: transport.Identity{Cluster: cluster, Role: transport.RoleClient, Name: "node5"}}),
		ca.issue(t, certSpec{id: transport.Identity{Cluster: "other", Role: transport.RoleNode, Name: "node5"}}),
	} {
		addr, got := listenerOf(t, cert)
		name := fmt.Sprintf("node5-%d", i)
		if err := n1.links.SetPeer(name, addr); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := n1.links.WaitConnected(ctx, name); err == nil {
			t.Errorf("node1 connected to a server with certificate %d", i)
		}
		cancel()
		n1.links.RemovePeer(name)
		if n := <-got; n != 0 {
			t.Errorf("node1 sent %d bytes to a server with certificate %d", n, i)
		}
	}

	calls, err := stop()
	if err != nil {
		t.Fatalf("the legitimate cluster failed a call meanwhile: %v", err)
	}
	if calls == 0 {
		t.Fatal("the legitimate cluster made no call while the intruders tried")
	}
	for _, n := range append(nodes, impostor) {
		for _, m := range n.rec.messages() {
			if m.lock == 666 || !strings.HasPrefix(m.from, "node") || m.from == "node4" {
				t.Errorf("%s's handler got %+v from an intruder", n.links.Name(), m)
			}
		}
	}
	if got := len(impostor.rec.messages()); got != 0 {
		t.Errorf("the impostor received %d messages", got)
	}
	callOK(t, n1, "node2", 3)
	callOK(t, nodes[2], "node1", 4)
	t.Logf("%d calls among the members while the intruders tried", calls)
}

func serial(t *testing.T, c tls.Certificate) string {
	t.Helper()
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber.String()
}

// listenerOf is a TLS server presenting cert that reports how many bytes
// of application data its first connection brought.
func listenerOf(t *testing.T, cert tls.Certificate) (addr string, got <-chan int) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAnyClientCert,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan int, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			ch <- -1
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		n, _ := io.Copy(io.Discard, c)
		ch <- int(n)
	}()
	return ln.Addr().String(), ch
}

// clientSeen is a TLS server that records the serial number of each
// client certificate it is shown.
func clientSeen(t *testing.T, ca *testCA, name string) (addr string, serials <-chan string) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{ca.node(t, name)},
		ClientAuth: tls.RequireAnyClientCert,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
			if tc.Handshake() == nil {
				select {
				case ch <- tc.ConnectionState().PeerCertificates[0].SerialNumber.String():
				default:
				}
			}
			_ = c.Close()
		}
	}()
	return ln.Addr().String(), ch
}

// TestTLSRotation: Rotate changes the certificate a node presents on the
// connections made after it, accepted and dialled, while the link made
// before keeps serving without a reconnection; CAs rotate through a
// bundle, after which a certificate of the old CA is refused; a
// certificate of another identity is not taken.
func TestTLSRotation(t *testing.T) {
	ca1, ca2 := newCA(t, "CA 1"), newCA(t, "CA 2")
	probe := ca1.node(t, "probe")
	a, atls := tlsNode(t, "a", ca1, ca1.node(t, "a"), nil)
	b, btls := tlsNode(t, "b", ca1, ca1.node(t, "b"), nil)
	defer a.links.Close()
	defer b.links.Close()
	for _, p := range [][2]*node{{a, b}, {b, a}} {
		if err := p[0].links.SetPeer(p[1].links.Name(), p[1].addr); err != nil {
			t.Fatal(err)
		}
	}
	callOK(t, a, "b", 1)
	old := tlsprobe.Serial(t, b.addr, probe)

	renewed := ca1.node(t, "b")
	if err := btls.Rotate(renewed, ca1.pool); err != nil {
		t.Fatal(err)
	}
	if got := tlsprobe.Serial(t, b.addr, probe); got != serial(t, renewed) || got == old {
		t.Errorf("after Rotate b presents serial %s, want the new %s (old %s)", got, serial(t, renewed), old)
	}
	// The dialling side: a's next dial presents its new certificate.
	aNew := ca1.node(t, "a")
	if err := atls.Rotate(aNew, ca1.pool); err != nil {
		t.Fatal(err)
	}
	seenAddr, seen := clientSeen(t, ca1, "c")
	if err := a.links.SetPeer("c", seenAddr); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-seen:
		if got != serial(t, aNew) {
			t.Errorf("a dialled with serial %s, want its new %s", got, serial(t, aNew))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a did not dial c")
	}
	a.links.RemovePeer("c")
	callOK(t, a, "b", 2)
	callOK(t, b, "a", 3)
	if got := counter(t, a.reg, "dlm_transport_reconnects_total"); got != 0 {
		t.Errorf("the established link was re-made %v times across the rotations", got)
	}

	// Another identity is refused, and the current credentials stay.
	if err := btls.Rotate(ca1.node(t, "c"), ca1.pool); err == nil || !strings.Contains(err.Error(), "rotation keeps the identity") {
		t.Errorf("Rotate to c's certificate: %v", err)
	}
	if err := btls.Rotate(ca1.issue(t, certSpec{}), ca1.pool); !errors.Is(err, transport.ErrNoIdentity) {
		t.Errorf("Rotate to a certificate without an identity: %v", err)
	}
	if got := tlsprobe.Serial(t, b.addr, probe); got != serial(t, renewed) {
		t.Errorf("a refused rotation changed b's certificate to serial %s", got)
	}

	// A new CA: trust both, move to certificates of the new one, drop the
	// old one. The link serves throughout; new connections are made at
	// each step (a's link is dropped and redialled).
	both := x509.NewCertPool()
	both.AddCert(ca1.cert)
	both.AddCert(ca2.cert)
	steps := []struct {
		name   string
		a, b   tls.Certificate
		trust  *x509.CertPool
		redial bool
	}{
		{"trust both CAs", aNew, renewed, both, true},
		{"certificates of the new CA", ca2.node(t, "a"), ca2.node(t, "b"), both, true},
		{"drop the old CA", ca2.node(t, "a"), ca2.node(t, "b"), ca2.pool, true},
	}
	for i, st := range steps {
		if err := atls.Rotate(st.a, st.trust); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if err := btls.Rotate(st.b, st.trust); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		callOK(t, a, "b", uint64(10+i))
		// A new connection: a's peer b is removed and set again.
		a.links.RemovePeer("b")
		if err := a.links.SetPeer("b", b.addr); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := a.links.WaitConnected(ctx, "b")
		cancel()
		if err != nil {
			t.Fatalf("%s: a new connection a→b: %v", st.name, err)
		}
		callOK(t, a, "b", uint64(20+i))
		callOK(t, b, "a", uint64(30+i))
	}
	before := counter(t, b.reg, "dlm_transport_handshakes_rejected_total", "reason", "tls")
	intruderAs(t, b.addr, []tls.Certificate{ca1.node(t, "a")}, &wire.Hello{Version: wire.LinkVersion, ClusterID: cluster, Node: "a", BootID: 9, Session: 1})
	if got := counter(t, b.reg, "dlm_transport_handshakes_rejected_total", "reason", "tls") - before; got != 1 {
		t.Errorf("a certificate of the dropped CA: tls refusals went up by %v, want 1", got)
	}
	callOK(t, a, "b", 40)
}

// TestIdentity: identities round-trip through a certificate's URI; a
// certificate with none, two, or a malformed one has none; cluster IDs
// that a URI host cannot carry are refused up front.
func TestIdentity(t *testing.T) {
	for _, id := range []transport.Identity{
		{Cluster: "dlm", Role: transport.RoleNode, Name: "node1"},
		{Cluster: "prod.eu-1", Role: transport.RoleClient, Name: "billing worker/7 %"},
		{Cluster: "A_b~c", Role: transport.RoleNode, Name: strings.Repeat("n", wire.MaxNodeName)},
	} {
		if err := id.Validate(); err != nil {
			t.Fatalf("%+v: %v", id, err)
		}
		ca := newCA(t, "ca")
		c := ca.issue(t, certSpec{id: id})
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatalf("%+v: %v", id, err)
		}
		got, err := transport.IdentityOf(leaf)
		if err != nil || got != id {
			t.Errorf("round trip of %+v: %+v, %v", id, got, err)
		}
	}
	for _, bad := range []transport.Identity{
		{Cluster: "", Role: transport.RoleNode, Name: "a"},
		{Cluster: "my cluster", Role: transport.RoleNode, Name: "a"},
		{Cluster: "a..b", Role: transport.RoleNode, Name: "a"},
		{Cluster: "a:1", Role: transport.RoleNode, Name: "a"},
		{Cluster: "dlm", Role: "admin", Name: "a"},
		{Cluster: "dlm", Role: transport.RoleNode, Name: ""},
		{Cluster: "dlm", Role: transport.RoleNode, Name: strings.Repeat("n", wire.MaxNodeName+1)},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
	leafWith := func(uris ...string) *x509.Certificate {
		c := &x509.Certificate{}
		for _, u := range uris {
			p, err := url.Parse(u)
			if err != nil {
				t.Fatal(err)
			}
			c.URIs = append(c.URIs, p)
		}
		return c
	}
	for _, uris := range [][]string{
		nil,
		{"spiffe://dlm/node/a"},
		{"dlm://dlm/node/a", "dlm://dlm/node/b"},
		{"dlm://dlm/node"},
		{"dlm://dlm/peer/a"},
		{"dlm://dlm:7/node/a"},
		{"dlm://dlm/node/a?x=1"},
		{"dlm:node/a"},
	} {
		if id, err := transport.IdentityOf(leafWith(uris...)); !errors.Is(err, transport.ErrNoIdentity) {
			t.Errorf("%v: %+v, %v; want ErrNoIdentity", uris, id, err)
		}
	}
	if id, err := transport.IdentityOf(leafWith("spiffe://x/y", "dlm://c/client/z")); err != nil || id.Name != "z" || id.Role != transport.RoleClient {
		t.Errorf("another scheme beside a dlm identity: %+v, %v", id, err)
	}
	// A link listener takes node certificates only.
	ca := newCA(t, "ca")
	client := ca.issue(t, certSpec{id: transport.Identity{Cluster: cluster, Role: transport.RoleClient, Name: "x"}})
	if _, err := transport.ListenTCP(transport.TCPConfig{Addr: "127.0.0.1:0", TLS: &transport.TLSConfig{Certificate: client, CAs: ca.pool}}); err == nil {
		t.Error("a link listener started with a client certificate")
	}
}
