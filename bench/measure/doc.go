// Package measure holds the harness's arithmetic: a log-linear latency
// histogram, per-client fairness figures and the open-loop arrival schedule.
// It has no I/O, no clock and no goroutines, so it is tested exactly.
//
// # Histogram
//
// Histogram is an HDR-style log-linear histogram over nanoseconds: values
// below 2^SubBits are counted exactly, and every power-of-two range above is
// split into 2^(SubBits-1) equal sub-buckets, so a reported percentile is
// within 1/2^(SubBits-1) (< 1.6 %) of the recorded value. Each client records
// into its own Histogram (no locking on the hot path) and the runner merges
// them at the end. Percentiles report the upper bound of the bucket holding
// the rank, capped at the recorded maximum: a percentile is never understated.
//
// # Fairness
//
// Fairness summarises how evenly acquisitions were spread over clients: min,
// max, mean and standard deviation of per-client counts, and Jain's index
// (Σx)²/(n·Σx²), which is 1 when every client got the same share and 1/n when
// one client got everything.
//
// # Schedule
//
// Schedule is the open-loop arrival plan of the coupon workload: requests at
// a constant total rate, dealt round-robin to the clients, so arrival i
// (0-based, over all clients) is due at i/rate and belongs to client
// i mod clients. Latency is measured from that due time, not from when a
// client got round to the request, which is what keeps a slow system from
// hiding its queueing delay (coordinated omission).
package measure
