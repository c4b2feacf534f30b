package clientport

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/dlm/dlmtest"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// port is a client port on a node of a test cluster.
type port struct {
	t     testing.TB
	nodes []*dlm.Node
	srv   *Server
	reg   *prometheus.Registry
	addr  string
	done  chan error
}

func startPort(t testing.TB, nodes int, mut func(*Config)) *port {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := dlmtest.New(ctx, nodes, dlmtest.TCP())
	if err != nil {
		t.Fatal(err)
	}
	p := &port{t: t, nodes: cl.Nodes(), reg: prometheus.NewRegistry(), done: make(chan error, 1)}
	cfg := DefaultConfig()
	cfg.Node, cfg.Registerer = p.nodes[0], p.reg
	if mut != nil {
		mut(&cfg)
	}
	if p.srv, err = New(cfg); err != nil {
		_ = cl.Close()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	go func() { p.done <- p.srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = p.srv.Close()
		if err := <-p.done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
		_ = cl.Close()
	})
	return p
}

// metric returns the value of a counter or gauge of the port, labels in
// any order; -1 if there is none.
func (p *port) metric(name string, labels map[string]string) float64 {
	p.t.Helper()
	mfs, err := p.reg.Gather()
	if err != nil {
		p.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				if m.Counter != nil {
					return m.Counter.GetValue()
				}
				return m.Gauge.GetValue()
			}
		}
	}
	return -1
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := labels[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}

// raw is a client that speaks the protocol frame by frame.
type raw struct {
	t    testing.TB
	nc   net.Conn
	dec  *wire.Decoder
	l    wire.Limits
	next uint64
}

func (p *port) dialRaw() *raw {
	p.t.Helper()
	nc, err := net.Dial("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { _ = nc.Close() })
	return &raw{t: p.t, nc: nc, dec: wire.NewClientDecoder(wire.DefaultLimits()), l: wire.DefaultLimits()}
}

// hello opens a session.
func (p *port) hello(token string) *raw {
	p.t.Helper()
	r := p.dialRaw()
	id := r.send(&wire.ClientHello{Name: "test", Token: token})
	if _, ok := r.reply(id).(*wire.ClientWelcome); !ok {
		r.t.Fatal("no welcome")
	}
	return r
}

// send sends a request and returns its id.
func (r *raw) send(m wire.Message) uint64 {
	r.t.Helper()
	r.next++
	r.sendID(r.next, m)
	return r.next
}

func (r *raw) sendID(id uint64, m wire.Message) {
	r.t.Helper()
	frame, err := wire.AppendFrame(nil, wire.Header{ID: id}, m, &r.l)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.nc.Write(frame); err != nil {
		r.t.Fatal(err)
	}
}

// read returns the next frame's header and message (owned), or an error
// (EOF once the agent closed the connection).
func (r *raw) read(within time.Duration) (wire.Header, wire.Message, error) {
	_ = r.nc.SetReadDeadline(time.Now().Add(within))
	var prefix [4]byte
	if _, err := io.ReadFull(r.nc, prefix[:]); err != nil {
		return wire.Header{}, nil, err
	}
	n, err := wire.FrameLength(prefix[:], &r.l)
	if err != nil {
		return wire.Header{}, nil, err
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r.nc, payload); err != nil {
		return wire.Header{}, nil, err
	}
	return r.dec.DecodeOwned(payload)
}

// reply reads frames until the reply to id, and returns it.
func (r *raw) reply(id uint64) wire.Message {
	r.t.Helper()
	for {
		h, m, err := r.read(10 * time.Second)
		if err != nil {
			r.t.Fatalf("waiting for the reply to %d: %v", id, err)
		}
		if h.Reply && h.ID == id {
			return m
		}
	}
}

// closedWith reads until the agent closes the connection, and returns the
// last one-way ClientError it sent before (nil if none).
func (r *raw) closedWith(within time.Duration) *wire.ClientError {
	r.t.Helper()
	var last *wire.ClientError
	deadline := time.Now().Add(within)
	for {
		h, m, err := r.read(time.Until(deadline))
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				r.t.Fatalf("the agent did not close the connection within %v", within)
			}
			return last
		}
		if e, ok := m.(*wire.ClientError); ok && !h.Reply {
			last = e
		}
	}
}

func codeOfReply(t testing.TB, m wire.Message) wire.ClientCode {
	t.Helper()
	if e, ok := m.(*wire.ClientError); ok {
		return e.Code
	}
	return 0
}
