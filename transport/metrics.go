package transport

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/internal/promreg"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// metrics are created even without a Registerer, so that the hot path never
// checks for nil; per-type counters are resolved once into arrays, so that
// counting a message is an atomic add, not a label lookup.
type metrics struct {
	sentMsgs, sentBytes [wire.NumTypes]prometheus.Counter
	recvMsgs, recvBytes [wire.NumTypes]prometheus.Counter
	rejected            map[string]prometheus.Counter
	handshakeRejected   *prometheus.CounterVec
	connsOut, connsIn   prometheus.Gauge
	reconnects          prometheus.Counter
	writes              prometheus.Counter
	overflows           prometheus.Counter
	lentReads           prometheus.Counter

	group *promreg.Group // unregistered when the Links close
}

const ns = "dlm_transport"

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, labels)
	}
	sentMsgs := counterVec("messages_sent_total", "Messages queued for sending, by type.", "type")
	sentBytes := counterVec("bytes_sent_total", "Frame bytes queued for sending, by message type.", "type")
	recvMsgs := counterVec("messages_received_total", "Messages received and validated, by type.", "type")
	recvBytes := counterVec("bytes_received_total", "Frame bytes received, by message type.", "type")
	rejected := counterVec("frames_rejected_total", "Frames refused as bad input, by reason; each closes its connection.", "reason")
	handshake := counterVec("handshakes_rejected_total", "Connections refused during the handshake, by reason.", "reason")
	conns := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "connections", Help: "Open connections, by direction."}, []string{"direction"})
	m := &metrics{
		rejected:          map[string]prometheus.Counter{},
		handshakeRejected: handshake,
		connsOut:          conns.WithLabelValues("out"),
		connsIn:           conns.WithLabelValues("in"),
		reconnects:        prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "reconnects_total", Help: "Connections re-established after a failure."}),
		writes:            prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "write_syscalls_total", Help: "Writes to connections; messages_sent_total / this is the coalescing factor."}),
		overflows:         prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "write_buffer_overflows_total", Help: "Links failed because a peer's write buffer went over its limit."}),
		lentReads:         prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "reads_lent_total", Help: "Turns at reading a connection taken by a goroutine waiting for its peer (a Call, Await) instead of the connection's reader."}),
	}
	for t := wire.Type(1); int(t) < wire.NumTypes; t++ {
		m.sentMsgs[t] = sentMsgs.WithLabelValues(t.String())
		m.sentBytes[t] = sentBytes.WithLabelValues(t.String())
		m.recvMsgs[t] = recvMsgs.WithLabelValues(t.String())
		m.recvBytes[t] = recvBytes.WithLabelValues(t.String())
	}
	for _, r := range append(wire.Reasons(), "read_error", "unexpected_hello") {
		m.rejected[r] = rejected.WithLabelValues(r)
	}
	var err error
	m.group, err = promreg.Register(reg, sentMsgs, sentBytes, recvMsgs, recvBytes, rejected, handshake, conns, m.reconnects, m.writes, m.overflows, m.lentReads)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) reject(reason string) {
	if c, ok := m.rejected[reason]; ok {
		c.Inc()
		return
	}
	m.rejected["other"].Inc()
}
