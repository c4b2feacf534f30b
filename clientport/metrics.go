package clientport

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/internal/promreg"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Reasons a client port refuses something, the labels of
// dlm_client_refused_total (see the package documentation).
const (
	refusedConnections  = "connections"
	refusedLocks        = "locks"
	refusedPending      = "pending"
	refusedFrame        = "frame"
	refusedHandshake    = "handshake"
	refusedCertificate  = "certificate"
	refusedUnauthorized = "unauthorized"
	refusedProtocol     = "protocol"
	refusedSlowClient   = "slow_client"
	// refusedUnacknowledged: a protocol 2 session whose client does not
	// acknowledge what it reads (ClientAck) ended once the agent kept
	// MaxOutbox for it.
	refusedUnacknowledged = "unacknowledged"
	// refusedUnknownRequest: a resume named a request the agent has no
	// answer of (CodeUnknownRequest).
	refusedUnknownRequest = "unknown_request"
)

var refusedReasons = []string{refusedConnections, refusedLocks, refusedPending, refusedFrame,
	refusedHandshake, refusedCertificate, refusedUnauthorized, refusedProtocol, refusedSlowClient,
	refusedUnacknowledged, refusedUnknownRequest}

type metrics struct {
	connections prometheus.Gauge
	parked      prometheus.Gauge
	sessions    prometheus.Gauge
	resumed     prometheus.Counter
	replayed    prometheus.Counter // requests resumes named as waited for
	requests    [wire.NumTypes]prometheus.Counter
	refused     map[string]prometheus.Counter
	rejected    map[string]prometheus.Counter // frames, by wire.Reason
	group       *promreg.Group
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dlm_client_connections", Help: "Open client connections."}),
		parked: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dlm_client_connections_parked",
			Help: "Idle client connections watched by the agent's poller: no goroutine reads them until they have something to read."}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{Name: "dlm_client_sessions", Help: "Client sessions, connected or waiting to be resumed."}),
		resumed:  prometheus.NewCounter(prometheus.CounterOpts{Name: "dlm_client_sessions_resumed_total", Help: "Sessions resumed by a client that reconnected within their TTL."}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{Name: "dlm_client_resume_waiting_total", Help: "Requests that resuming clients (protocol 2) named as still waited for, each answered again or in time."}),
		refused:  map[string]prometheus.Counter{},
		rejected: map[string]prometheus.Counter{},
	}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dlm_client_requests_total", Help: "Client requests, by type.",
	}, []string{"type"})
	for t := wire.TypeClientHello; t.Client(); t++ {
		m.requests[t] = requests.WithLabelValues(t.String())
	}
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dlm_client_refused_total", Help: "Connections, frames and requests the client port refused, by the limit or rule that refused them.",
	}, []string{"reason"})
	for _, r := range refusedReasons {
		m.refused[r] = refused.WithLabelValues(r)
	}
	rejected := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dlm_client_frames_rejected_total", Help: "Client frames refused as bad input, by reason; each closes its connection.",
	}, []string{"reason"})
	for _, r := range append(wire.Reasons(), "read_error") {
		m.rejected[r] = rejected.WithLabelValues(r)
	}
	var err error
	m.group, err = promreg.Register(reg, m.connections, m.parked, m.sessions, m.resumed, m.replayed, requests, refused, rejected)
	if err != nil {
		return nil, err
	}
	return m, nil
}
