package transport

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// pendingCall is a request waiting for its reply: either a blocked Call
// (slot; into, for a CallInto, is where its reply is decoded) or an
// asynchronous Go (cb).
type pendingCall struct {
	slot *callSlot
	into wire.Message
	cb   func(wire.Message, error)
}

// callSlot is where a Call's outcome lands: in res if it arrives before the
// caller blocks for it (a caller that read its own reply), else through ch.
// state says which (slotWaiting, slotBlocked, slotArrived), and Done, the
// Call's Waiter for Await, whether it came. Slots are recycled.
type callSlot struct {
	ch    chan callResult
	state atomic.Uint32
	res   callResult
}

const (
	slotWaiting uint32 = iota // no outcome yet, the caller not blocked
	slotBlocked               // the caller waits on ch
	slotArrived               // the outcome is in res (and in ch if the caller was blocked)
)

func (s *callSlot) Done() bool { return s.state.Load() == slotArrived }

type callResult struct {
	msg wire.Message
	err error
}

// finish delivers the outcome; it runs on a library goroutine.
func (pc pendingCall) finish(m wire.Message, err error) {
	if pc.cb != nil {
		pc.cb(m, err)
		return
	}
	s := pc.slot
	s.res = callResult{m, err}
	if s.state.Swap(slotArrived) == slotBlocked {
		s.ch <- s.res // buffered, and the only send
	}
}

// send queues a one-way message, or a request whose reply goes to cb.
func (p *peer) send(h wire.Header, m wire.Message, cb func(wire.Message, error)) error {
	p.mu.Lock()
	if err := p.writableLocked(); err != nil {
		p.mu.Unlock()
		return err
	}
	if cb != nil {
		h.ID = p.l.nextID.Add(1)
	}
	wake, err := p.appendLocked(h, m)
	if err == nil && cb != nil {
		p.pending[h.ID] = pendingCall{cb: cb}
	}
	p.mu.Unlock()
	if wake {
		p.kick()
	}
	return err
}

// reply queues an answer to a request from this peer's boot to.BootID.
func (p *peer) reply(to ReplyTo, m wire.Message) error {
	p.mu.Lock()
	err := p.writableLocked()
	switch {
	case err != nil:
	case p.state == up && p.remoteBoot != to.BootID,
		p.state == down && p.sessBoot != to.BootID,
		p.state == connecting && p.queuedBoot != 0 && p.queuedBoot != to.BootID:
		err = fmt.Errorf("%w: %s boot %x", ErrStaleReply, p.name, to.BootID)
	case p.state == connecting:
		p.queuedBoot = to.BootID // checked against the Hello when connected
	}
	var wake bool
	if err == nil {
		wake, err = p.appendLocked(wire.Header{ID: to.ID, Reply: true}, m)
	}
	p.mu.Unlock()
	if wake {
		p.kick()
	}
	return err
}

// call sends a request and waits for its reply, decoded into into if it is
// not nil.
func (p *peer) call(ctx context.Context, m, into wire.Message) (wire.Message, error) {
	slot := p.l.getCallSlot()
	defer p.l.putCallSlot(slot) // once nobody can send on it any more
	p.mu.Lock()
	if err := p.writableLocked(); err != nil {
		p.mu.Unlock()
		return nil, err
	}
	id := p.l.nextID.Add(1)
	wake, err := p.appendLocked(wire.Header{ID: id}, m)
	if err != nil {
		p.mu.Unlock()
		return nil, err
	}
	p.pending[id] = pendingCall{slot: slot, into: into}
	p.mu.Unlock()
	if wake {
		p.kick()
	}
	w := p.lender().Await(ctx, slot)
	if !slot.state.CompareAndSwap(slotWaiting, slotBlocked) {
		w.End() // it arrived: most often, read by this goroutine itself
		return slot.res.msg, slot.res.err
	}
	if ctx.Done() == nil { // a receive costs less than a select
		r := <-slot.ch
		w.End()
		return r.msg, r.err
	}
	select {
	case r := <-slot.ch:
		w.End()
		return r.msg, r.err
	case <-ctx.Done():
		w.End()
	}
	p.mu.Lock()
	_, mine := p.pending[id]
	delete(p.pending, id)
	p.mu.Unlock()
	if !mine { // someone took it to finish it: wait for that
		r := <-slot.ch
		return r.msg, r.err
	}
	return nil, ctx.Err()
}

// take removes and returns the pending call for a reply's id.
func (p *peer) take(id uint64) (pendingCall, bool) {
	p.mu.Lock()
	pc, ok := p.pending[id]
	delete(p.pending, id)
	p.mu.Unlock()
	return pc, ok
}

// failPending fails every pending call with err; run on a library goroutine.
func (p *peer) failPending(err error) {
	p.mu.Lock()
	failed := p.pending
	p.pending = map[uint64]pendingCall{}
	p.mu.Unlock()
	for _, pc := range failed {
		pc.finish(nil, err)
	}
}

// getCallSlot and putCallSlot recycle the slots of blocked Calls.
func (l *Links) getCallSlot() *callSlot {
	if s, ok := l.callSlots.Get().(*callSlot); ok {
		s.state.Store(slotWaiting)
		return s
	}
	return &callSlot{ch: make(chan callResult, 1)}
}

func (l *Links) putCallSlot(s *callSlot) {
	s.res = callResult{} // do not keep the reply alive in the pool
	l.callSlots.Put(s)
}
