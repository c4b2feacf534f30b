package recovery

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/internal/promreg"
)

type metrics struct {
	epoch      prometheus.Gauge
	quorum     prometheus.Gauge
	recoveries prometheus.Counter
	evictions  prometheus.Counter
	proposals  *prometheus.CounterVec
	resyncs    prometheus.Counter
	// configVersion is the version of the cluster configuration in force here.
	configVersion prometheus.Gauge
	phase         *prometheus.HistogramVec
	group         *promreg.Group // unregistered when the Manager closes
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		epoch: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dlm_epoch", Help: "The membership epoch of the latest committed view."}),
		quorum: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dlm_quorum", Help: "1 while this node holds its quorum lease, else 0."}),
		recoveries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dlm_recoveries_total", Help: "Recoveries started (one per committed view)."}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dlm_evictions_total", Help: "Times this node found itself left out of a view and dropped its lock state."}),
		resyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dlm_resyncs_requested_total", Help: "Recoveries asked for because a connection to a peer broke."}),
		configVersion: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dlm_config_version", Help: "Version of the cluster configuration (member set) this node runs with."}),
		proposals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dlm_view_proposals_total", Help: "View proposals this node made, by outcome."}, []string{"outcome"}),
		phase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "dlm_recovery_phase_seconds", Help: "Duration of recovery phases (report includes the lock-delay).",
			Buckets: prometheus.ExponentialBuckets(1e-4, 4, 12)}, []string{"phase"}),
	}
	var err error
	if m.group, err = promreg.Register(reg, m.epoch, m.quorum, m.recoveries, m.evictions, m.proposals, m.resyncs, m.phase, m.configVersion); err != nil {
		return nil, err
	}
	return m, nil
}
