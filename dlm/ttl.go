package dlm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// A lock with a TTL (WithTTL) lives at its master only as long as it is
// renewed. The holder keeps its own lease on its own clock and gives the
// lock up first:
//
//	holder:  lease ends at  sent + TTL·(1−ρ)/(1+ρ)
//	master:  releases at    received + TTL  (measured on its clock)
//
// where sent is when the request or renewal that the master acknowledged
// left this node (so received ≥ sent) and ρ is Config.ClockDrift, the worst
// rate error between two clocks: even if the holder's clock runs slow and
// the master's fast, TTL·(1−ρ)/(1+ρ) of the holder's time passes before TTL
// of the master's. Lost closes when the lease ends. A holder paused past
// that point may still act on the lock before it notices; only the fencing
// token stops its writes then.

// leaseFor is how long after sent the holder's lease lasts.
func (lk *Lock) leaseFor() time.Duration {
	rho := lk.ls.node.cfg.ClockDrift
	return time.Duration(float64(lk.ttl()) * (1 - rho) / (1 + rho))
}

// startLease starts the holder's lease as the first request is sent.
// Caller holds sh.mu.
func (lk *Lock) startLease(sent time.Time) {
	e := lk.extLocked()
	e.leaseEnds = sent.Add(lk.leaseFor())
	e.lease = time.AfterFunc(time.Until(e.leaseEnds), lk.leaseTimer)
}

// extendLease moves the lease's end after an acknowledged renewal sent at
// sent. Caller holds sh.mu.
func (lk *Lock) extendLease(sent time.Time) {
	e := lk.ext.Load()
	if e == nil || e.lease == nil {
		return // no lease was started: nothing to extend
	}
	if end := sent.Add(lk.leaseFor()); end.After(e.leaseEnds) {
		e.leaseEnds = end
		e.lease.Reset(time.Until(end))
	}
}

func (lk *Lock) leaseTimer() {
	sh := lk.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if lk.state == stReleased || lk.lostErr() != nil {
		return
	}
	e := lk.ext.Load()
	if d := time.Until(e.leaseEnds); d > 0 { // renewed while the timer fired
		e.lease.Reset(d)
		return
	}
	lk.loseLocked(fmt.Errorf("%w: TTL of %v ran out before a renewal", ErrLockLost, lk.ttl()))
}

// Renew restarts the lock's TTL at its master and extends the holder's
// lease. It fails for a lock without a TTL, and with ErrLockLost if the
// lease already ended.
func (lk *Lock) Renew(ctx context.Context) error {
	if lk.ttl() <= 0 {
		return fmt.Errorf("%w: the lock has no TTL", ErrInvalidArgument)
	}
	sh := lk.sh
	if err := lk.ls.node.waitFor(ctx, lk.hash); err != nil {
		return err
	}
	sent := time.Now()
	sh.mu.Lock()
	if err := lk.checkAlive(); err != nil {
		sh.mu.Unlock()
		return err
	}
	if lk.local() {
		sh.table.Tick(lk.ls.node.now())
		err := fromMaster(sh.table.Renew(lk.key()))
		if err == nil {
			lk.extendLease(sent)
		}
		sh.mu.Unlock()
		return err
	}
	m := lk.masterName()
	sh.mu.Unlock()
	reply, err := lk.ls.node.links.Call(ctx, m, &wire.Renew{Epoch: lk.ls.node.epoch(), Lockspace: lk.ls.name, Locks: []uint64{lk.id}})
	if err != nil {
		return fmt.Errorf("%w: renew: %w", ErrUnavailable, err)
	}
	c, ok := reply.(*wire.Completion)
	if !ok || c.Status != wire.StatusGranted {
		return fmt.Errorf("%w: master did not renew the lock", ErrLockLost)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if err := lk.checkAlive(); err != nil {
		return err
	}
	lk.extendLease(sent)
	return nil
}

// checkAlive reports whether the lock can still be renewed. Caller holds
// sh.mu.
func (lk *Lock) checkAlive() error {
	switch {
	case lk.lostErr() != nil:
		return lk.lostErr()
	case lk.state == stGranted || lk.state == stConverting:
		return nil
	}
	return ErrNotHeld
}

// KeepAlive renews the lock every third of its TTL until ctx ends (it then
// returns nil) or the lock is released or lost (it returns why). Run it on
// a goroutine of your own: if that goroutine stalls, the renewals stop and
// the lock is given up, which is the point of a TTL.
func (lk *Lock) KeepAlive(ctx context.Context) error {
	if lk.ttl() <= 0 {
		return fmt.Errorf("%w: the lock has no TTL", ErrInvalidArgument)
	}
	t := time.NewTicker(lk.ttl() / 3)
	defer t.Stop()
	lost := lk.Lost()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-lost:
			return lk.Err()
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, lk.ttl()/3)
			err := lk.Renew(rctx)
			cancel()
			if err != nil && ctx.Err() == nil && lk.Err() != nil {
				return lk.Err()
			}
			if err != nil && ctx.Err() == nil && !isTransient(err) {
				return err
			}
		}
	}
}

// isTransient reports whether a failed renewal may succeed if tried again
// before the lease ends.
func isTransient(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNoQuorum)
}
