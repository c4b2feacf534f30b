package clientport

import (
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// acquire takes permits of a semaphore for a ClientAcquire, in the
// session: they are the session's dlm locks, renewed with it and lost
// with it. The acquisition waits (for its turn, for a master, for quorum
// unless ClientFailFast) on a goroutine of its own.
func (ss *session) acquire(id uint64, m *wire.ClientAcquire) {
	ls := ss.lockspaceWithRoom(id, m.Lockspace)
	if ls == nil {
		return
	}
	sem, err := ls.Semaphore(m.Semaphore, int(m.Permits))
	if err != nil {
		ss.fail(id, err)
		return
	}
	opts := []dlm.LockOption{ss.in}
	if m.Owner != 0 {
		o, err := ss.owner(ls, m.Owner)
		if err != nil {
			ss.fail(id, err)
			return
		}
		opts = append(opts, dlm.WithOwner(o))
	}
	if m.TTL > 0 {
		opts = append(opts, dlm.WithTTL(time.Duration(m.TTL)))
	}
	if m.Flags&wire.ClientFailFast != 0 {
		opts = append(opts, dlm.FailFast())
	}
	try, count := m.Flags&wire.ClientTry != 0, int(m.Count)
	ctx, err := ss.startOp(id, m.Timeout)
	if err != nil {
		ss.fail(id, err)
		return
	}
	go func() {
		defer ss.endOp(id)
		var p *dlm.Permit
		var err error
		if try {
			p, err = sem.TryAcquire(ctx, count, opts...)
		} else {
			p, err = sem.Acquire(ctx, count, opts...)
		}
		ss.acquired(id, p, err)
	}()
}

// acquired answers a ClientAcquire and hands the permits to the client.
func (ss *session) acquired(id uint64, p *dlm.Permit, err error) {
	if err != nil {
		ss.reply(id, errorMsg(err), true)
		return
	}
	ss.mu.Lock()
	over := ss.over
	if !over {
		if ss.x().permits == nil {
			ss.x().permits = map[uint64]*dlm.Permit{}
		}
		ss.x().permits[p.ID()] = p
	}
	ss.mu.Unlock()
	if over {
		_ = p.Release()
		ss.reply(id, errorMsg(dlm.ErrSessionEnded), true)
		return
	}
	if err := p.Err(); err != nil {
		// Lost before the client was told of it (lockLost told it of an id
		// it never saw, which it ignores).
		ss.forgetPermit(p.ID())
		_ = p.Release()
		ss.reply(id, errorMsg(err), true)
		return
	}
	ss.reply(id, &wire.ClientGrant{Lock: p.ID(), Mode: modes.NL, Token: p.Token()}, true)
}

// permit returns the session's permits of that id, or nil.
func (ss *session) permit(id uint64) *dlm.Permit {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.seen().permits[id]
}

// forgetPermit drops permits from the session's books, reporting whether
// they were there.
func (ss *session) forgetPermit(id uint64) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	_, ok := ss.x().permits[id]
	delete(ss.x().permits, id)
	return ok
}

// releasePermit gives back permits of the session for a ClientUnlock.
func (ss *session) releasePermit(id uint64) (bool, error) {
	ss.mu.Lock()
	p := ss.x().permits[id]
	delete(ss.x().permits, id)
	ss.mu.Unlock()
	if p == nil {
		return false, nil
	}
	return true, p.Release()
}
