package workload

import (
	"context"
	"fmt"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// mixModes weights the VMS modes towards the interesting conflicts.
var mixModes = []modes.Mode{modes.NL, modes.CR, modes.CR, modes.CW, modes.PR, modes.PR, modes.PW, modes.PW, modes.EX, modes.EX}

// mix takes one of the mixed resources in a random mode, sometimes
// converts it up or down, writes the register under its token while it
// holds PW or EX, and unlocks: the VMS-mode workload that the modes model
// checks.
func (r *Runner) mix(ctx context.Context, c *client) {
	for ctx.Err() == nil {
		res := fmt.Sprintf("%s%d", MixPrefix, c.rng.IntN(max(1, r.cfg.Mixes)))
		mode := mixModes[c.rng.IntN(len(mixModes))]
		op := r.h.Acquire(c.id, c.svc.Node, res, mode)
		octx, cancel := c.opCtx(ctx)
		lk, err := c.svc.LS.Acquire(octx, res, mode)
		cancel()
		if err != nil {
			resolve(op, err)
			sleep(ctx, time.Duration(10+c.rng.IntN(40))*time.Millisecond)
			continue
		}
		op.Granted(lk.Mode(), lk.Token())
		lost := r.holdFor(ctx, c, res, lk)
		if !lost && c.rng.IntN(3) == 0 {
			to := mixModes[c.rng.IntN(len(mixModes))]
			if to != lk.Mode() {
				cop := r.h.Convert(c.id, c.svc.Node, res, to)
				octx, cancel := c.opCtx(ctx)
				lost, err := c.convert(octx, res, lk, to)
				cancel()
				switch {
				case err != nil:
					resolve(cop, err)
				default:
					cop.Granted(lk.Mode(), lk.Token())
					if !lost {
						r.holdFor(ctx, c, res, lk) // a Lost is recorded there; the unlock follows either way
					}
				}
			}
		}
		c.unlock(res, lk)
	}
}

// holdFor holds lk a few milliseconds, writing under its token if it is
// held in PW or EX; it records and reports a Lost.
func (r *Runner) holdFor(ctx context.Context, c *client, res string, lk Lock) bool {
	t := time.NewTimer(time.Duration(1+c.rng.IntN(20)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-lk.Lost():
		c.lost(res, lk)
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	if m := lk.Mode(); m == modes.PW || m == modes.EX {
		select {
		case <-lk.Lost():
			c.lost(res, lk)
			return true
		default:
			c.write(res, lk.Token())
		}
	}
	return false
}
