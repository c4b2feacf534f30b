package clientport

import (
	"errors"
	"fmt"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// hold is a client's hold on the agent's shared-lock cache: readers of
// many clients share the agent's one PR lock per resource.
type hold struct {
	h    *dlm.Hold
	done chan struct{} // closed on release: the watch of its loss ends
}

func (h *hold) release() {
	close(h.done)
	_ = h.h.Release()
}

// cached takes a hold on the cache of lockspace m.Lockspace for a
// ClientLock with ClientCached: at once if the cache's lock is granted, on
// a goroutine if it must be requested from the master.
func (ss *session) cached(id uint64, ls *dlm.Lockspace, m *wire.ClientLock) {
	switch {
	case m.Mode != modes.PR:
		ss.fail(id, fmt.Errorf("%w: a cached lock is PR, not %v", dlm.ErrInvalidArgument, m.Mode))
		return
	case m.Flags&(wire.ClientExpedite|wire.ClientNotify) != 0 || m.Owner != 0 || m.TTL != 0:
		ss.fail(id, fmt.Errorf("%w: a cached hold takes no expedite, notification, owner or TTL", dlm.ErrInvalidArgument))
		return
	}
	c, err := ss.srv.cache(ls)
	if err != nil {
		ss.fail(id, err)
		return
	}
	h, err := c.TryAcquire(ss.srv.ctx, m.Resource)
	if m.Flags&wire.ClientTry != 0 || !errors.Is(err, dlm.ErrNotQueued) {
		ss.held(id, h, err, false)
		return
	}
	ctx, err := ss.startOp(id, m.Timeout)
	if err != nil {
		ss.fail(id, err)
		return
	}
	resource := m.Resource // m is the decoder's, reused by the next frame
	go func() {
		defer ss.endOp(id)
		h, err := c.Acquire(ctx, resource)
		ss.held(id, h, err, true)
	}()
}

// held answers a cached lock request and hands the hold to the client; a
// loss of the cache's lock is pushed as for a lock.
func (ss *session) held(id uint64, dh *dlm.Hold, err error, block bool) {
	if err != nil {
		ss.fail(id, err)
		return
	}
	h := &hold{h: dh, done: make(chan struct{})}
	hid := ss.srv.holdID()
	ss.mu.Lock()
	if ss.over {
		ss.mu.Unlock()
		_ = dh.Release()
		ss.fail(id, dlm.ErrSessionEnded)
		return
	}
	if ss.x().holds == nil {
		ss.x().holds = map[uint64]*hold{}
	}
	ss.x().holds[hid] = h
	ss.mu.Unlock()
	go ss.watchHold(hid, h)
	ss.reply(id, holdGrant(hid, dh), block)
}

func holdGrant(id uint64, h *dlm.Hold) *wire.ClientGrant {
	v, ok := h.Value()
	g := &wire.ClientGrant{Lock: id, Mode: h.Mode(), Token: h.Token(), LVB: v, LVBFlags: wire.LVBPresent}
	if ok {
		g.LVBFlags |= wire.LVBValid
	}
	return g
}

// watchHold tells the client if the cache's lock under a hold is lost
// before the hold is released.
func (ss *session) watchHold(id uint64, h *hold) {
	select {
	case <-h.done:
	case <-h.h.Lost():
		ss.mu.Lock()
		_, ok := ss.x().holds[id]
		delete(ss.x().holds, id)
		ss.mu.Unlock()
		if ok {
			close(h.done)
			ss.pushLost(id, h.h.Err())
		}
	}
}

// releaseHold releases hold id, if the session has it.
func (ss *session) releaseHold(id uint64) bool {
	ss.mu.Lock()
	h := ss.x().holds[id]
	delete(ss.x().holds, id)
	ss.mu.Unlock()
	if h == nil {
		return false
	}
	h.release()
	return true
}

// holdState answers a ClientValue for a hold.
func (ss *session) holdState(id uint64) (*wire.ClientGrant, bool) {
	ss.mu.Lock()
	h := ss.x().holds[id]
	ss.mu.Unlock()
	if h == nil {
		return nil, false
	}
	return holdGrant(id, h.h), true
}
