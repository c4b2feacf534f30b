package transport

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/internal/promreg"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// metrics are created even without a Registerer, so that the hot path never
// checks for nil. The per-message counters are the package's own, collected
// into Prometheus metrics at scrape time (trafficCollector): a sent message
// is counted with plain additions under its peer's mutex, which the sender
// holds anyway, and a received one with an atomic add, where a Prometheus
// counter would cost an interface call and a float conversion each (four
// of them per message cost 3 % of a link round trip).
type metrics struct {
	// recvMsgs and recvBytes, by type, and lentReads are added to by
	// whoever reads a connection.
	recvMsgs, recvBytes [wire.NumTypes]atomic.Uint64
	lentReads           atomic.Uint64
	traffic             *trafficCollector

	rejected          map[string]prometheus.Counter
	handshakeRejected *prometheus.CounterVec
	connsOut, connsIn prometheus.Gauge
	reconnects        prometheus.Counter
	overflows         prometheus.Counter

	group *promreg.Group // unregistered when the Links close
}

// sendCounts is what one peer sent: guarded by its peer's mu.
type sendCounts struct {
	msgs, bytes [wire.NumTypes]uint64
	writes      uint64
}

func (c *sendCounts) add(o *sendCounts) {
	for t := range c.msgs {
		c.msgs[t] += o.msgs[t]
		c.bytes[t] += o.bytes[t]
	}
	c.writes += o.writes
}

const ns = "dlm_transport"

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, labels)
	}
	rejected := counterVec("frames_rejected_total", "Frames refused as bad input, by reason; each closes its connection.", "reason")
	handshake := counterVec("handshakes_rejected_total", "Connections refused during the handshake, by reason.", "reason")
	conns := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "connections", Help: "Open connections, by direction."}, []string{"direction"})
	m := &metrics{
		rejected:          map[string]prometheus.Counter{},
		handshakeRejected: handshake,
		connsOut:          conns.WithLabelValues("out"),
		connsIn:           conns.WithLabelValues("in"),
		reconnects:        prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "reconnects_total", Help: "Connections re-established after a failure."}),
		overflows:         prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "write_buffer_overflows_total", Help: "Links failed because a peer's write buffer went over its limit."}),
	}
	m.traffic = newTrafficCollector(m)
	for _, r := range append(wire.Reasons(), "read_error", "unexpected_hello") {
		m.rejected[r] = rejected.WithLabelValues(r)
	}
	var err error
	m.group, err = promreg.Register(reg, m.traffic, rejected, handshake, conns, m.reconnects, m.overflows)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// countRecv counts a received frame of payload bytes (and its prefix).
func (m *metrics) countRecv(t wire.Type, payload int) {
	m.recvMsgs[t].Add(1)
	m.recvBytes[t].Add(uint64(payload + wire.PrefixSize))
}

// trafficCollector turns the message counters into Prometheus metrics:
// the received ones as they are, the sent ones summed over the peers that
// are set and those that are gone (retired, folded in as their manager
// goroutine ends). Lock order: mu before any peer's mu.
type trafficCollector struct {
	m                                    *metrics
	sentMsgs, sentBytes, recvMsgs, recvB *prometheus.Desc
	writes, lent                         *prometheus.Desc

	mu      sync.Mutex
	peers   map[*peer]struct{}
	retired sendCounts
}

func newTrafficCollector(m *metrics) *trafficCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, labels, nil)
	}
	return &trafficCollector{
		m:         m,
		sentMsgs:  desc("messages_sent_total", "Messages queued for sending, by type.", "type"),
		sentBytes: desc("bytes_sent_total", "Frame bytes queued for sending, by message type.", "type"),
		recvMsgs:  desc("messages_received_total", "Messages received and validated, by type.", "type"),
		recvB:     desc("bytes_received_total", "Frame bytes received, by message type.", "type"),
		writes:    desc("write_syscalls_total", "Writes to connections; messages_sent_total / this is the coalescing factor."),
		lent:      desc("reads_lent_total", "Turns at reading a connection taken by a goroutine waiting for its peer (a Call, Await) instead of the connection's reader."),
		peers:     map[*peer]struct{}{},
	}
}

// join and retire add a peer to the sum and take it out, keeping what it
// sent; retire is called once the peer can send nothing more.
func (c *trafficCollector) join(p *peer) {
	c.mu.Lock()
	c.peers[p] = struct{}{}
	c.mu.Unlock()
}

func (c *trafficCollector) retire(p *peer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.peers, p)
	p.mu.Lock()
	c.retired.add(&p.sent)
	p.mu.Unlock()
}

func (c *trafficCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.sentMsgs, c.sentBytes, c.recvMsgs, c.recvB, c.writes, c.lent} {
		ch <- d
	}
}

func (c *trafficCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sent := c.retired
	for p := range c.peers {
		p.mu.Lock()
		sent.add(&p.sent)
		p.mu.Unlock()
	}
	c.mu.Unlock()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for t := wire.Type(1); int(t) < wire.NumTypes; t++ {
		name := t.String()
		counter(c.sentMsgs, sent.msgs[t], name)
		counter(c.sentBytes, sent.bytes[t], name)
		counter(c.recvMsgs, c.m.recvMsgs[t].Load(), name)
		counter(c.recvB, c.m.recvBytes[t].Load(), name)
	}
	counter(c.writes, sent.writes)
	counter(c.lent, c.m.lentReads.Load())
}

func (m *metrics) reject(reason string) {
	if c, ok := m.rejected[reason]; ok {
		c.Inc()
		return
	}
	m.rejected["other"].Inc()
}
