// Package workload drives a lockbench.System with the comparison's four
// workloads and measures what happens.
//
// # Workloads
//
//	uncontended  closed loop: exclusive lock+unlock on a resource picked
//	             uniformly from Config.Resources (100,000): collisions are rare,
//	             so this measures the cost of one grant and one release.
//	hot          closed loop: every client locks and unlocks the same
//	             resource: this measures hand-off under contention and queue
//	             fairness.
//	readers      closed loop: Config.SharedFraction (95 %) shared and the rest
//	             exclusive, on Config.SharedResources (16) resources. Systems
//	             without a shared mode serve shared requests as exclusive, and
//	             the Result says so.
//	coupon       open loop, the seed's scenario: Config.Coupons first-come
//	             coupons, Config.Rate requests/s offered in total and dealt
//	             round-robin to the clients (each client stands for one server
//	             instance's worker). Each request takes the exclusive lock on
//	             the coupon event, reads the remaining count from a store and,
//	             if it is positive, writes it back one lower and issues a coupon.
//
// # Measuring
//
// Every run lasts Config.Duration, of which the first Config.Warmup is not
// measured (connections, sessions, JIT and caches settle). A cycle counts
// when its unlock completes inside the measured window, so throughput is the
// completion rate; acquire latency is from calling Lock to its return, cycle
// latency from calling Lock to Unlock's return. Each client records into its
// own histograms, merged at the end.
//
// Coupon requests are measured from their scheduled arrival, not from when
// the client got to them, so queueing inside an overloaded client is counted
// (no coordinated omission). A request gives up when it has not been granted
// the lock within Config.CouponWait of its arrival (the seed's "retry 10 times
// 5 ms apart, then answer try-again-later"): it is "busy" if it was still
// waiting, "expired" if its client only got to it after that deadline (it is
// shed without contacting the lock service, as a server with a request
// timeout would). Systems whose wait cannot be cancelled keep waiting.
//
// # Safety checks
//
// Two checks run on every workload, without injecting any fault:
//   - an in-process guard counts overlaps, i.e. grants that coexisted with a
//     conflicting grant of the same resource (possible when a lease expires
//     under a slow holder);
//   - the coupon store counts over-issued coupons. The store's read and write
//     are separate steps, as with a real database, so two holders at once can
//     issue the same last coupon twice. When the grant carries a monotonic
//     fencing token the store refuses reads and writes with a token lower than
//     the highest it has seen ("rejected stale").
//
// Config.HoldPause and Config.HoldPauseProb inject a pause between the coupon
// read and write (a GC pause, a page fault) to show what the checks catch;
// they are off by default.
//
// # Bounds and teardown
//
// Every loop is bounded by the run's deadline and by Config.MaxOpsPerClient.
// At the end, waiting clients of cancelable systems return at once; others
// are drained (every holder unlocks, so every queue empties). If draining
// takes longer than Config.DrainTimeout the clients are closed under them.
package workload
