package workload

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/modes"
)

// counter increments a counter kept in the value block of CounterRes, the
// VMS way: it holds the resource in NL for good (so the resource, and its
// value, outlive every increment), and per increment converts up to EX,
// reads the value, sets it one higher and converts back down to NL, which
// the master answers once the value is written back: the acknowledgement.
func (r *Runner) counter(ctx context.Context, c *client) {
	for ctx.Err() == nil {
		op := r.h.Acquire(c.id, c.svc.Node, CounterRes, modes.NL)
		octx, cancel := c.opCtx(ctx)
		lk, err := c.svc.LS.Acquire(octx, CounterRes, modes.NL)
		cancel()
		if err != nil {
			resolve(op, err)
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		op.Granted(lk.Mode(), lk.Token())
		for ctx.Err() == nil && r.increment(ctx, c, lk) {
			sleep(ctx, time.Duration(c.rng.IntN(20))*time.Millisecond)
		}
		c.unlock(CounterRes, lk)
	}
}

// increment does one increment; false means the NL lock is gone or broken
// and must be taken again.
func (r *Runner) increment(ctx context.Context, c *client, lk Lock) bool {
	select {
	case <-lk.Lost():
		c.lost(CounterRes, lk)
		return false
	default:
	}
	called := r.h.Elapsed()
	up := r.h.Convert(c.id, c.svc.Node, CounterRes, modes.EX)
	octx, cancel := c.opCtx(ctx)
	lost, err := c.convert(octx, CounterRes, lk, modes.EX)
	cancel()
	if err != nil {
		resolve(up, err)
		return !lost && outcome(err) != check.Unknown && ctx.Err() == nil
	}
	if lost || isClosed(lk.Lost()) {
		// Granted, but the lock is lost by the time the grant is seen
		// (a process frozen after the grant came, woken past its
		// lease): the value was current when the grant came, not now,
		// and a client that heeds Lost does not use it.
		up.Granted(lk.Mode(), lk.Token())
		if !lost {
			c.lost(CounterRes, lk)
		}
		return false
	}
	// The grant's time is taken before anything else is done: a process
	// frozen (SIGSTOP) in between would otherwise date its read to its
	// thaw, after increments that other clients made meanwhile.
	granted := r.h.Elapsed()
	up.Granted(lk.Mode(), lk.Token())
	v, valid := lk.Value()
	var read int64
	if len(v) >= 8 {
		read = int64(binary.BigEndian.Uint64(v))
	}
	inc := check.Increment{Client: c.id, Node: c.svc.Node, Called: called, Granted: granted, Read: read, Valid: valid, Empty: len(v) == 0}
	if err := lk.SetValue(binary.BigEndian.AppendUint64(nil, uint64(read+1))); err != nil {
		inc.Outcome = check.Fail
	} else {
		// Recorded before the write-back may happen, as pending: a
		// process killed before its answer leaves this read, and an
		// increment that may have been written, in its results.
		r.addIncrement(inc)
		down := r.h.Convert(c.id, c.svc.Node, CounterRes, modes.NL)
		// A down-conversion does not wait for others, but its answer
		// waits for the master, which has the value by then. Its own
		// deadline is not the workload's: the run ending must not turn
		// an increment unknown.
		dctx, cancel := context.WithTimeout(context.Background(), r.cfg.OpTimeout)
		_, err := c.convert(dctx, CounterRes, lk, modes.NL)
		cancel()
		switch {
		case err == nil:
			down.Granted(lk.Mode(), lk.Token())
			inc.Outcome = check.OK
		default:
			resolve(down, err)
			inc.Outcome = check.Unknown
		}
	}
	r.addIncrement(inc)
	return inc.Outcome == check.OK
}

// keep takes the runner's own NL lock on the counter before the clients
// start: a resource, and its value block, lives only while some lock is on
// it, and the value must outlive the counter clients for Finish to read it.
func (r *Runner) keep(ctx context.Context) {
	svc := r.services[0]
	c := &client{r: r, id: r.newID(), svc: svc}
	op := r.h.Acquire(c.id, svc.Node, CounterRes, modes.NL)
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lk, err := svc.LS.Acquire(octx, CounterRes, modes.NL)
	if err != nil {
		resolve(op, err)
		return
	}
	op.Granted(lk.Mode(), lk.Token())
	r.keeper, r.keeperClient = lk, c
	// The keeper's belief ends the moment its lock is lost, not when
	// Finish looks: the checker reads the gaps in the counter's locks to
	// tell a resource that may have been recreated from a lost update.
	r.witnesses.Go(func() {
		select {
		case <-lk.Lost():
			r.keeperLost.Do(func() { c.lost(CounterRes, lk) })
		case <-ctx.Done():
		}
	})
}

// Finish reads the counter once more, under EX, after the run: the value
// every acknowledged increment must be in. It converts the keeper's lock
// up, or takes a new one if that was lost.
func (r *Runner) Finish(ctx context.Context) error {
	c, lk := r.keeperClient, r.keeper
	lost := lk == nil
	if !lost {
		select {
		case <-lk.Lost():
			r.keeperLost.Do(func() { c.lost(CounterRes, lk) })
			lost = true
		default:
		}
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if lost {
		// A lost keeper (its node lost quorum) may still be on the
		// master's books, and with the clients gone it is what keeps the
		// value: let it go only once the new lock holds the resource.
		oldClient, old := c, lk
		c = &client{r: r, id: r.newID(), svc: r.services[0]}
		op := r.h.Acquire(c.id, c.svc.Node, CounterRes, modes.EX)
		var err error
		lk, err = c.svc.LS.Acquire(octx, CounterRes, modes.EX)
		if old != nil {
			oldClient.unlock(CounterRes, old)
		}
		if err != nil {
			resolve(op, err)
			return err
		}
		op.Granted(lk.Mode(), lk.Token())
	} else {
		op := r.h.Convert(c.id, c.svc.Node, CounterRes, modes.EX)
		if err := lk.Convert(octx, modes.EX); err != nil {
			resolve(op, err)
			c.unlock(CounterRes, lk)
			return err
		}
		op.Granted(lk.Mode(), lk.Token())
	}
	at := r.h.Elapsed()
	v, valid := lk.Value()
	var val int64
	if len(v) >= 8 {
		val = int64(binary.BigEndian.Uint64(v))
	}
	r.mu.Lock()
	r.final = &check.CounterRead{Value: val, Valid: valid, Empty: len(v) == 0, At: at}
	r.mu.Unlock()
	c.unlock(CounterRes, lk)
	return nil
}

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
