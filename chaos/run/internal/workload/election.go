package workload

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/modes"
)

// candidate campaigns, leads a few hundred milliseconds writing the
// leader's key under its token, and resigns. The history records a
// leadership as an EX acquire of the election's lock granted PW (what the
// leader holds while it leads) and the resignation as its release.
func (r *Runner) candidate(ctx context.Context, c *client) {
	for ctx.Err() == nil {
		op := r.h.Acquire(c.id, c.svc.Node, ElectionRes, modes.EX)
		octx, cancel := c.opCtx(ctx)
		l, err := c.svc.LS.Campaign(octx, ElectionName, []byte(fmt.Sprintf("client %d", c.id)))
		cancel()
		if err != nil {
			resolve(op, err)
			sleep(ctx, time.Duration(50+c.rng.IntN(100))*time.Millisecond)
			continue
		}
		op.Granted(modes.PW, l.Token())
		end := time.Now().Add(time.Duration(100+c.rng.IntN(400)) * time.Millisecond)
		// Between writes the leader waits on Lost, not a sleep: the
		// moment its leadership ends is the moment it is told.
		for lost := false; !lost && time.Now().Before(end) && ctx.Err() == nil; {
			select {
			case <-l.Lost():
				r.h.Lost(c.id, c.svc.Node, ElectionRes)
				lost = true
				continue
			default:
			}
			c.write(LeaderKey, l.Token())
			t := time.NewTimer(20 * time.Millisecond)
			select {
			case <-l.Lost():
				r.h.Lost(c.id, c.svc.Node, ElectionRes)
				lost = true
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
		rop := r.h.Release(c.id, c.svc.Node, ElectionRes)
		octx, cancel = c.opCtx(context.Background())
		err = l.Resign(octx)
		cancel()
		if releaseGone(err) {
			rop.Released()
		} else if outcome(err) == check.Unknown {
			rop.Unknown()
		} else {
			rop.Failed(err)
		}
		sleep(ctx, time.Duration(c.rng.IntN(100))*time.Millisecond)
	}
}

// reader asks who leads, over and over.
func (r *Runner) reader(ctx context.Context, c *client) {
	for ctx.Err() == nil {
		o := check.Observation{Client: c.id, Node: c.svc.Node, Call: r.h.Elapsed()}
		octx, cancel := c.opCtx(ctx)
		l, err := c.svc.LS.Leader(octx, ElectionName)
		cancel()
		o.Return = r.h.Elapsed()
		switch {
		case err == nil:
			o.Leader, o.Token, o.Valid = true, l.Token, l.Valid
		case errors.Is(err, ErrNoLeader):
		default:
			sleep(ctx, 50*time.Millisecond)
			continue
		}
		r.addObservation(o)
		sleep(ctx, 50*time.Millisecond)
	}
}
