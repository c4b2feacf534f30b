package dlm

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/internal/promreg"
	"github.com/seed-a6839e30/dlm/modes"
)

// Operations counted by dlm_requests_total.
const (
	opLock = iota
	opConvert
	opUnlock
	opCount
)

var opNames = [opCount]string{"lock", "convert", "unlock"}

// Operations on semaphores, counted by dlm_permit_requests_total.
const (
	opAcquire = iota
	opRelease
	permitOps
)

var permitOpNames = [permitOps]string{"acquire", "release"}

// Results counted by dlm_requests_total.
const (
	resOK = iota
	resNotQueued
	resDeadlock
	resTimeout
	resCancelled
	resLimit
	resLost
	resError
	resCount
)

var resNames = [resCount]string{"ok", "not_queued", "deadlock", "timeout", "cancelled", "limit", "lost", "error"}

func resultOf(err error) int {
	switch {
	case err == nil:
		return resOK
	case errors.Is(err, ErrNotQueued):
		return resNotQueued
	case errors.Is(err, ErrDeadlock):
		return resDeadlock
	case errors.Is(err, ErrTimeout):
		return resTimeout
	case errors.Is(err, ErrCancelled):
		return resCancelled
	case errors.Is(err, ErrLimit):
		return resLimit
	case errors.Is(err, ErrLockLost):
		return resLost
	}
	return resError
}

// Kinds of deadlock counted by dlm_deadlocks_total.
const (
	deadlockConversion = iota
	deadlockCycle
	deadlockKinds
)

var deadlockKindNames = [deadlockKinds]string{"conversion", "cycle"}

// Outcomes of Cache.Acquire counted by dlm_cache_acquires_total.
const (
	cacheHit  = iota // a hold on a cached lock: no message
	cacheMiss        // a new lock requested from the master
	cacheResults
)

var cacheResultNames = [cacheResults]string{"hit", "miss"}

// metrics are the node's Prometheus metrics (design.md §10, the parts that
// apply without recovery). The counters of the hot path are resolved once,
// so counting costs an atomic add, not a label lookup.
type metrics struct {
	requests [opCount][modes.Count][resCount]prometheus.Counter
	wait     [2][modes.Count]prometheus.Observer // [remote][mode]: time to a granted lock
	blocking prometheus.Counter
	limits   *prometheus.CounterVec
	lost     prometheus.Counter
	rebuilt  prometheus.Counter // locks restored from reports in recoveries
	purged   prometheus.Counter // locks of removed nodes dropped in recoveries
	// lostInRecovery counts reported locks that could not be restored;
	// moving, the buckets the recovery under way rebuilds (0 between).
	lostInRecovery prometheus.Counter
	moving         prometheus.Gauge
	group          *promreg.Group // unregistered when the node closes

	// deadlocks counts the deadlocks this node broke as a master, by kind:
	// a conversion deadlock on one resource, or a cycle across resources
	// (the request failed on this node's table).
	deadlocks [deadlockKinds]prometheus.Counter

	cache [cacheResults]prometheus.Counter // Cache.Acquire outcomes

	permits [permitOps][resCount]prometheus.Counter // semaphore operations
	// held observes how long this node's locks were held, by mode, from
	// the grant to the unlock or the loss; heldPermits the same for
	// semaphore permits.
	held        [modes.Count]prometheus.Observer
	heldPermits prometheus.Observer
	// contended counts, per lockspace, the requests and conversions this
	// node's tables queued because they could not be granted at once.
	contended       *prometheus.CounterVec
	sessions        prometheus.Gauge   // live sessions (session.go)
	sessionsExpired prometheus.Counter // sessions whose lease ran out
}

func newMetrics(n *Node) (*metrics, error) {
	m := &metrics{}
	req := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dlm_requests_total", Help: "Lock operations by operation, mode and result.",
	}, []string{"op", "mode", "result"})
	wait := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "dlm_lock_seconds", Help: "Time from a lock or convert call to its grant, by mode and by where the master is.",
		Buckets: prometheus.ExponentialBuckets(1e-6, 4, 14),
	}, []string{"mode", "master"})
	m.blocking = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dlm_blocking_notifications_total", Help: "Blocking notifications delivered to this node's locks.",
	})
	deadlocks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dlm_deadlocks_total", Help: "Deadlocks broken by failing a request on this node's tables, by kind: conversion (on one resource) or cycle (across resources and nodes).",
	}, []string{"kind"})
	for k := range deadlockKinds {
		m.deadlocks[k] = deadlocks.WithLabelValues(deadlockKindNames[k])
	}
	cache := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dlm_cache_acquires_total", Help: "Cache.Acquire calls by result: hit (a hold on a cached lock, no message) or miss (a new lock requested).",
	}, []string{"result"})
	for r := range cacheResults {
		m.cache[r] = cache.WithLabelValues(cacheResultNames[r])
	}
	m.limits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dlm_limit_rejections_total", Help: "Requests refused because a configured limit was reached, by limit.",
	}, []string{"limit"})
	m.lost = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dlm_locks_lost_total", Help: "Locks this node held that were lost (TTL, master release, node close).",
	})
	m.rebuilt = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dlm_recovery_locks_rebuilt_total", Help: "Locks this node restored, as a new master, from the survivors' reports.",
	})
	m.purged = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dlm_recovery_locks_purged_total", Help: "Locks of nodes no longer in the view (or that dropped their lock state) that this node purged from the tables it kept.",
	})
	m.lostInRecovery = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dlm_recovery_locks_lost_total", Help: "Locks reported to this node as their new master that it could not restore; each holder was told its lock is lost.",
	})
	m.moving = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dlm_recovery_moving_buckets", Help: "Buckets (of 4096) the recovery under way rebuilds at new masters: operations on them wait for its end; 0 between recoveries.",
	})
	m.sessions = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dlm_sessions", Help: "Sessions alive on this node.",
	})
	m.sessionsExpired = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dlm_sessions_expired_total", Help: "Sessions whose lease ran out before a renewal; their locks were lost and released.",
	})
	clientLocks := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "dlm_client_locks", Help: "Locks this node holds or waits for.",
	}, func() float64 { return float64(n.nlocks.Load()) })
	mastered := newTableCollector(n)
	permits := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dlm_permit_requests_total", Help: "Semaphore operations by operation (acquire, release) and result.",
	}, []string{"op", "result"})
	for op := range permitOps {
		for r := range resCount {
			m.permits[op][r] = permits.WithLabelValues(permitOpNames[op], resNames[r])
		}
	}
	heldBuckets := prometheus.ExponentialBuckets(1e-6, 4, 16)
	held := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "dlm_lock_held_seconds", Help: "Time this node's locks were held, from the grant to the unlock or the loss, by mode (the mode at the end).",
		Buckets: heldBuckets,
	}, []string{"mode"})
	for _, md := range modes.All() {
		m.held[md] = held.WithLabelValues(md.String())
	}
	heldPermits := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "dlm_permits_held_seconds", Help: "Time this node held semaphore permits, from the grant to the release or the loss.",
		Buckets: heldBuckets,
	})
	m.heldPermits = heldPermits
	m.contended = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dlm_lock_contended_total", Help: "Requests and conversions (and semaphore requests) that this node's tables, as their master, could not grant at once and queued, by lockspace.",
	}, []string{"lockspace"})
	for op := range opCount {
		for _, md := range modes.All() {
			for r := range resCount {
				m.requests[op][md][r] = req.WithLabelValues(opNames[op], md.String(), resNames[r])
			}
		}
	}
	for _, md := range modes.All() {
		m.wait[0][md] = wait.WithLabelValues(md.String(), "local")
		m.wait[1][md] = wait.WithLabelValues(md.String(), "remote")
	}
	var err error
	if m.group, err = promreg.Register(n.cfg.Registerer, req, wait, m.blocking, deadlocks, cache, m.limits, m.lost, m.rebuilt, m.purged, m.lostInRecovery, m.moving, clientLocks, mastered,
		permits, held, heldPermits, m.contended, m.sessions, m.sessionsExpired); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) count(op int, mode modes.Mode, err error) {
	if mode.Valid() {
		m.requests[op][mode][resultOf(err)].Inc()
	}
}

func (m *metrics) countPermits(op int, err error) { m.permits[op][resultOf(err)].Inc() }

// tableCollector reports, on each scrape, the resources and locks this node
// masters, by queue.
type tableCollector struct {
	n         *Node
	resources *prometheus.Desc
	locks     *prometheus.Desc
}

func newTableCollector(n *Node) *tableCollector {
	return &tableCollector{
		n: n,
		resources: prometheus.NewDesc("dlm_mastered_resources", "Resources this node masters, by lockspace.",
			[]string{"lockspace"}, nil),
		locks: prometheus.NewDesc("dlm_mastered_locks", "Locks on the resources this node masters, by lockspace.",
			[]string{"lockspace"}, nil),
	}
}

func (c *tableCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.resources
	ch <- c.locks
}

func (c *tableCollector) Collect(ch chan<- prometheus.Metric) {
	for _, ls := range c.n.lockspaceList() {
		var res, locks int
		for _, sh := range ls.shards {
			sh.mu.Lock()
			r, l := sh.table.Len()
			sh.mu.Unlock()
			res, locks = res+r, locks+l
		}
		ch <- prometheus.MustNewConstMetric(c.resources, prometheus.GaugeValue, float64(res), ls.name)
		ch <- prometheus.MustNewConstMetric(c.locks, prometheus.GaugeValue, float64(locks), ls.name)
	}
}
