package workload

import (
	"context"
	"fmt"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// register is a writer of the fenced register: it takes one of the
// registers' locks in EX, holds it a few milliseconds, writes the register
// under its token if the lock was not lost, and unlocks.
func (r *Runner) register(ctx context.Context, c *client) {
	for ctx.Err() == nil {
		res, lk, ok := r.takeRegister(ctx, c)
		if !ok {
			continue
		}
		t := time.NewTimer(time.Duration(5+c.rng.IntN(35)) * time.Millisecond)
		lost := false
		select {
		case <-t.C:
		case <-lk.Lost():
			lost = true
			c.lost(res, lk)
		case <-ctx.Done():
		}
		t.Stop()
		if !lost {
			select {
			case <-lk.Lost():
				c.lost(res, lk)
			default:
				c.write(res, lk.Token())
			}
		}
		c.unlock(res, lk)
	}
}

// longHolder holds a register's EX lock for a second or more, writing
// under its token every 50-100 ms, each time after looking whether the
// lock was lost: a holder with writes in flight when a nemesis strikes its
// node, the situation in which a lock service that re-grants too early
// lets two writers at once. The nemeses aim at these holds (Holder), and
// may stop one at the point of writing (Arm) before they freeze its
// process, or keep it holding while they cut its node off (Pin).
func (r *Runner) longHolder(ctx context.Context, c *client) {
	arm := make(chan chan Armed, 1)
	pin := make(chan time.Duration, 1)
	for ctx.Err() == nil {
		res, lk, ok := r.takeRegister(ctx, c)
		if !ok {
			continue
		}
		r.mu.Lock()
		agent := c.svc.agent()
		select {
		case <-pin: // a pin of the previous hold, taken too late
		default:
		}
		r.holds[c.id] = &hold{agent: agent, resource: res, token: lk.Token(), arm: arm, pin: pin}
		r.mu.Unlock()
		span := r.cfg.LongHoldMax - r.cfg.LongHoldMin
		d := r.cfg.LongHoldMin + time.Duration(c.rng.Int64N(int64(max(span, 1))))
		end := time.Now().Add(d)
		if r.hooks.Hold != nil {
			r.hooks.Hold(c.id, agent, res, lk.Token(), d)
		}
		lost := false
		for !lost && ctx.Err() == nil && time.Now().Before(end) {
			t := time.NewTimer(time.Duration(50+c.rng.IntN(50)) * time.Millisecond)
			select {
			case <-t.C:
				select {
				case <-lk.Lost():
					lost = true
					c.lost(res, lk)
				default:
					c.write(res, lk.Token())
				}
			case <-lk.Lost():
				lost = true
				c.lost(res, lk)
			case reply := <-arm:
				lost = r.frozenWrite(c, res, lk, reply)
			case p := <-pin:
				if later := time.Now().Add(p); later.After(end) {
					end = later
					if r.hooks.Hold != nil {
						r.hooks.Hold(c.id, agent, res, lk.Token(), p)
					}
				}
			case <-ctx.Done():
			}
			t.Stop()
		}
		r.mu.Lock()
		delete(r.holds, c.id)
		r.mu.Unlock()
		if r.hooks.Unhold != nil {
			r.hooks.Unhold(c.id)
		}
		c.unlock(res, lk)
	}
}

// takeRegister takes one of the registers in EX; false after a failure
// (recorded, and slept off).
func (r *Runner) takeRegister(ctx context.Context, c *client) (string, Lock, bool) {
	res := fmt.Sprintf("%s%d", RegisterPrefix, c.rng.IntN(max(1, r.cfg.Registers)))
	op := r.h.Acquire(c.id, c.svc.Node, res, modes.EX)
	octx, cancel := c.opCtx(ctx)
	lk, err := c.svc.LS.Acquire(octx, res, modes.EX)
	cancel()
	if err != nil {
		resolve(op, err)
		sleep(ctx, time.Duration(10+c.rng.IntN(40))*time.Millisecond)
		return "", nil, false
	}
	op.Granted(lk.Mode(), lk.Token())
	return res, lk, true
}

// frozenWrite is an armed holder: it looks once more whether the lock was
// lost, answers Arm, and waits for its process to be stopped and
// continued; then it writes under the token without looking again, and
// records what the register said. It reports whether the lock was lost
// before it armed.
func (r *Runner) frozenWrite(c *client, res string, lk Lock, reply chan Armed) bool {
	select {
	case <-lk.Lost():
		reply <- Armed{}
		c.lost(res, lk)
		return true
	default:
	}
	token := lk.Token()
	reply <- Armed{OK: true, Token: token, Resource: res}
	woke := r.hooks.WaitWake != nil && r.hooks.WaitWake(30*time.Second)
	at := r.h.Elapsed()
	ok, newer := c.write(res, token)
	r.addFrozen(FrozenWrite{Client: c.id, Node: c.svc.Node, Resource: res, Token: token, Woke: at,
		Accepted: ok, Newer: newer, Paused: woke})
	return false
}
