package workload

import (
	"context"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// probe measures availability through its service: every ProbeEvery,
// from lag on, it takes res (nobody else's, so it never waits for a
// holder) with a ProbeWithin deadline and lets go. A slot of time in which
// no probe was granted is time in which a lock could not be had.
func (r *Runner) probe(ctx context.Context, c *client, res string, lag time.Duration) {
	next := time.Now().Add(lag)
	sleep(ctx, lag)
	for ctx.Err() == nil {
		op := r.h.Acquire(c.id, c.svc.Node, res, modes.EX)
		octx, cancel := context.WithTimeout(ctx, r.cfg.ProbeWithin)
		lk, err := c.svc.LS.Acquire(octx, res, modes.EX)
		cancel()
		if err != nil {
			resolve(op, err)
		} else {
			op.Granted(lk.Mode(), lk.Token())
			c.unlock(res, lk)
		}
		next = next.Add(r.cfg.ProbeEvery)
		if d := time.Until(next); d > 0 {
			sleep(ctx, d)
		} else {
			next = time.Now()
		}
	}
}
