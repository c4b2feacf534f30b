package workload

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/bench/lockbench"
)

// CouponResult is the outcome of the coupon workload.
type CouponResult struct {
	// Total is the number of coupons the event started with.
	Total int `json:"total"`
	// Offered is the number of requests scheduled in the window; every one
	// ends up in exactly one of the counts below.
	Offered uint64 `json:"offered"`
	// Issued coupons, and OverIssued = max(0, Issued-Total).
	Issued     uint64 `json:"issued"`
	OverIssued uint64 `json:"over_issued"`
	// SoldOut counts requests that held the lock and found none left.
	SoldOut uint64 `json:"sold_out"`
	// RejectedStale counts requests whose read or write the store refused
	// because a higher fencing token had been seen.
	RejectedStale uint64 `json:"rejected_stale"`
	// Busy requests were not granted the lock within the coupon wait;
	// Expired ones were shed because their client reached them only after
	// that deadline; Failed ones got an error from the lock service;
	// Unanswered ones were still pending when the run ended.
	Busy       uint64 `json:"busy"`
	Expired    uint64 `json:"expired"`
	Failed     uint64 `json:"failed"`
	Unanswered uint64 `json:"unanswered"`
	// Remaining is the store's count at the end (negative only if writes
	// were lost or doubled).
	Remaining int `json:"remaining"`
	// SoldOutAfter is the time from the event opening to the last coupon,
	// zero if coupons remained.
	SoldOutAfter time.Duration `json:"sold_out_after_ns"`
	// Fenced says whether the store checked fencing tokens.
	Fenced bool `json:"fenced"`
}

// couponTally is one worker's count of request outcomes.
type couponTally struct {
	issued, soldOut, stale, busy, expired, failed uint64
}

// errStale is the store's refusal of a token lower than one it has seen.
var errStale = errors.New("workload: stale fencing token")

// store is the coupon database. Read and write are separate calls, as they
// would be against a real database, so two holders at once can both read the
// same count. With fencing on, every access carries the holder's token and
// the store refuses one lower than the highest it has seen ("token ≥
// highest", not "=", so that one holder's read and write both pass).
type store struct {
	mu        sync.Mutex
	total     int
	remaining int
	issued    int
	fenced    bool
	highest   uint64
	opened    time.Time
	soldOutAt time.Time
}

func newStore(total int, fenced bool) *store {
	return &store{total: total, remaining: total, fenced: fenced}
}

// open records when the event opened.
func (s *store) open(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opened.IsZero() {
		s.opened = t
	}
}

// check applies the fencing rule; the caller holds s.mu.
func (s *store) check(f lockbench.Fence) error {
	if !s.fenced {
		return nil
	}
	if f.Token < s.highest {
		return errStale
	}
	s.highest = f.Token
	return nil
}

// read returns the remaining count.
func (s *store) read(f lockbench.Fence) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(f); err != nil {
		return 0, err
	}
	return s.remaining, nil
}

// write stores the new remaining count and hands out one coupon.
func (s *store) write(f lockbench.Fence, remaining int, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(f); err != nil {
		return err
	}
	s.remaining = remaining
	s.issued++
	if s.issued == s.total {
		s.soldOutAt = now
	}
	return nil
}

// couponLoop warms up on a separate resource, then serves the worker's share
// of the arrival schedule.
func (r *run) couponLoop(w *worker) {
	warm, cancel := context.WithDeadline(r.ctx, r.measure0)
	for range r.cfg.MaxOpsPerClient {
		if warm.Err() != nil {
			break
		}
		r.cycleOnce(warm, w, 1, lockbench.Exclusive, false)
	}
	cancel()
	r.store.open(r.measure0)
	n := min(r.sched.Count(w.id, r.end.Sub(r.measure0)), r.cfg.MaxOpsPerClient)
	for k := range n {
		due := r.measure0.Add(r.sched.At(w.id, k))
		if !r.sleep(w, due) {
			return
		}
		r.request(w, due)
	}
}

// request serves one coupon request that arrived at due.
func (r *run) request(w *worker, due time.Time) {
	deadline := due.Add(r.cfg.CouponWait)
	if !time.Now().Before(deadline) {
		w.coupon.expired++
		return
	}
	lctx, cancel := context.WithDeadline(r.ctx, deadline)
	held, err := w.client.Lock(lctx, r.names[0], lockbench.Exclusive)
	t1 := time.Now()
	timedOut := ended(lctx)
	cancel()
	if err != nil {
		switch {
		case ended(r.ctx): // the run ended: counted as unanswered
		case timedOut:
			w.coupon.busy++
		default:
			w.coupon.failed++
			r.noteErr(w, "lock", err)
		}
		return
	}
	if !r.guard.enter(0, lockbench.Exclusive) {
		w.overlaps++
	}
	r.serve(w, held.Fence())
	r.guard.leave(0, lockbench.Exclusive)
	r.unlock(w, held)
	t2 := time.Now()
	r.live.Add(1)
	if r.inWindow(t2) {
		w.acquire.Record(t1.Sub(due))
		w.cycle.Record(t2.Sub(due))
		w.cycles++
	}
}

// serve is the critical section: read, maybe stall, write.
func (r *run) serve(w *worker, f lockbench.Fence) {
	left, err := r.store.read(f)
	if err != nil {
		w.coupon.stale++
		return
	}
	if left <= 0 {
		w.coupon.soldOut++
		return
	}
	if r.cfg.HoldPauseProb > 0 && w.rng.Float64() < r.cfg.HoldPauseProb {
		time.Sleep(r.cfg.HoldPause) // injected fault: a holder stalls mid-update
	}
	if err := r.store.write(f, left-1, time.Now()); err != nil {
		w.coupon.stale++
		return
	}
	w.coupon.issued++
}

// couponResult sums the workers' tallies and the store's state.
func (r *run) couponResult() *CouponResult {
	s := r.store
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &CouponResult{
		Total:     s.total,
		Offered:   uint64(r.sched.Total(r.end.Sub(r.measure0))),
		Remaining: s.remaining,
		Fenced:    s.fenced,
	}
	if !s.soldOutAt.IsZero() {
		c.SoldOutAfter = s.soldOutAt.Sub(s.opened)
	}
	for _, w := range r.workers {
		t := w.coupon
		c.Issued += t.issued
		c.SoldOut += t.soldOut
		c.RejectedStale += t.stale
		c.Busy += t.busy
		c.Expired += t.expired
		c.Failed += t.failed
	}
	if c.Issued > uint64(s.total) {
		c.OverIssued = c.Issued - uint64(s.total)
	}
	answered := c.Issued + c.SoldOut + c.RejectedStale + c.Busy + c.Expired + c.Failed
	if c.Offered > answered {
		c.Unanswered = c.Offered - answered
	}
	return c
}
