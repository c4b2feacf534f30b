package workload

import (
	"context"
	"fmt"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// register is a writer of the fenced register: it takes one of the
// registers' locks in EX, holds it a few milliseconds, writes the register
// under its token if the lock was not lost, and unlocks. A nemesis may
// freeze it while it holds the lock (Freeze): it then sleeps through the
// pause and writes once more without looking at Lost, as a process that
// was paused past its lease would.
func (r *Runner) register(ctx context.Context, c *client) {
	freeze := make(chan time.Duration, 1)
	for ctx.Err() == nil {
		res := fmt.Sprintf("%s%d", RegisterPrefix, c.rng.IntN(max(1, r.cfg.Registers)))
		op := r.h.Acquire(c.id, c.svc.Node, res, modes.EX)
		octx, cancel := c.opCtx(ctx)
		lk, err := c.svc.LS.Acquire(octx, res, modes.EX)
		cancel()
		if err != nil {
			resolve(op, err)
			sleep(ctx, time.Duration(10+c.rng.IntN(40))*time.Millisecond)
			continue
		}
		op.Granted(lk.Mode(), lk.Token())
		r.mu.Lock()
		r.holds[c.id] = &hold{agent: c.svc.Agent, resource: res, freeze: freeze}
		r.mu.Unlock()

		lost := false
		t := time.NewTimer(time.Duration(5+c.rng.IntN(35)) * time.Millisecond)
		select {
		case <-t.C:
		case <-lk.Lost():
			lost = true
			r.h.Lost(c.id, c.svc.Node, res)
		case d := <-freeze:
			lost = r.frozenWrite(ctx, c, res, lk, d)
		case <-ctx.Done():
		}
		t.Stop()
		r.mu.Lock()
		delete(r.holds, c.id)
		r.mu.Unlock()
		if !lost {
			select {
			case <-lk.Lost():
				lost = true
				r.h.Lost(c.id, c.svc.Node, res)
			default:
				c.write(res, lk.Token())
			}
		}
		c.unlock(res, lk)
	}
}

// frozenWrite sleeps through a pause, then writes under the old token. The
// client's lock library tells it the lock is lost when the lease runs out
// on its clock (recorded then: the belief ends there); the paused
// application just does not look before it writes. It reports whether
// the lock was lost.
func (r *Runner) frozenWrite(ctx context.Context, c *client, res string, lk Lock, d time.Duration) bool {
	lostC, lost := lk.Lost(), false
	t := time.NewTimer(d)
	defer t.Stop()
wait:
	for {
		select {
		case <-lostC:
			r.h.Lost(c.id, c.svc.Node, res)
			lost, lostC = true, nil
		case <-t.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	woke := r.h.Elapsed()
	token := lk.Token()
	newer := r.store.MaxToken(res) > token
	ok := c.write(res, token)
	r.mu.Lock()
	r.frozen = append(r.frozen, FrozenWrite{Client: c.id, Node: c.svc.Node, Resource: res, Token: token,
		Woke: woke, Accepted: ok, Newer: newer})
	r.mu.Unlock()
	return lost
}
