package dlm

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// gate says whether this node serves lock traffic, and lets operations wait
// for it. A node serves once it is a member of a view whose recovery it has
// completed, while it holds its quorum lease. During a later recovery it
// goes on serving, except the buckets that move (recoveryState.plan): an
// operation on one of those waits until the recovery is done.
//
//	joined      a recovery completed here since the node started (or since
//	            it last dropped its lock state): until then operations wait
//	noQuorum    the lease is lost (or the node was evicted): operations fail
//	            with ErrNoQuorum at once, except new requests, which wait
//	            for quorum to return unless FailFast (quorum_wait.go)
//	closed      Close was called: operations fail with ErrClosed
type gate struct {
	serving atomic.Bool // the fast path's one load

	mu       sync.Mutex
	joined   bool
	noQuorum bool
	closed   bool
	joinedCh chan struct{} // closed when joined becomes true
	changed  chan struct{} // closed (and replaced) at every change of state

	epoch atomic.Uint64 // epoch lock messages carry: the view installed last
}

func (g *gate) init() {
	g.noQuorum = true
	g.joinedCh = make(chan struct{})
	g.updateLocked() // not shared yet
}

func (g *gate) updateLocked() {
	g.serving.Store(g.joined && !g.noQuorum && !g.closed)
	if g.changed != nil {
		close(g.changed)
	}
	g.changed = make(chan struct{})
}

func (g *gate) close() {
	g.mu.Lock()
	g.closed = true
	g.updateLocked()
	g.mu.Unlock()
}

// join: a recovery completed here.
func (g *gate) join() {
	g.mu.Lock()
	if !g.joined {
		g.joined = true
		close(g.joinedCh)
	}
	g.updateLocked()
	g.mu.Unlock()
}

// unjoin: the node has no lock state of its own (it was evicted, or found
// itself a zombie, or is new in the view): it serves nothing until the
// recovery under way completes, since the others purge whatever it held
// meanwhile.
func (g *gate) unjoin() {
	g.mu.Lock()
	if g.joined {
		g.joined = false
		g.joinedCh = make(chan struct{})
	}
	g.updateLocked()
	g.mu.Unlock()
}

func (g *gate) setQuorum(ok bool) {
	g.mu.Lock()
	g.noQuorum = !ok
	g.updateLocked()
	g.mu.Unlock()
}

// waitServing returns nil once the node serves, waiting while it has not
// joined; ErrNoQuorum or ErrClosed if it cannot serve.
func (n *Node) waitServing(ctx context.Context) error {
	for {
		if n.gate.serving.Load() {
			return nil
		}
		g := &n.gate
		g.mu.Lock()
		closed, noQuorum, joined, ch := g.closed, g.noQuorum, g.joined, g.joinedCh
		g.mu.Unlock()
		switch {
		case closed:
			return ErrClosed
		case joined && noQuorum:
			return ErrNoQuorum
		case joined:
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctxError(ctx.Err())
		}
	}
}

// waitFor is waitServing for an operation on the resource with hash h: it
// also waits while a recovery rebuilds the resource's bucket.
func (n *Node) waitFor(ctx context.Context, h uint64) error {
	for {
		if err := n.waitServing(ctx); err != nil {
			return err
		}
		p := n.recov.plan.Load()
		if !p.heldBack(h) {
			return nil
		}
		select {
		case <-p.resumed:
		case <-ctx.Done():
			return ctxError(ctx.Err())
		}
	}
}

// epoch returns the epoch this node's lock messages carry.
func (n *Node) epoch() uint64 { return n.gate.epoch.Load() }

// serving reports whether the node serves lock traffic now (some buckets
// may still be held back: heldBack). Senders check it under their shard's
// mutex. Besides the gate it asks the clock: the gate closes when the
// recovery Manager notices the lease ended, which may be late (its timer
// runs late after a process pause, or on a starved machine), and from the
// lease's end on this node may grant nothing, since the others re-grant
// what it masters or holds once their lock-delay after it has passed.
func (n *Node) serving() bool { return n.gate.serving.Load() && n.rec.LeaseHeld() }

// heldBack reports whether a recovery holds back operations on the
// resource with hash h now. Senders check it under their shard's mutex:
// Report sweeps every shard after the plan is installed, so a message about
// a moving bucket either leaves before the sweep (and the lock is reported
// as it then stood) or not at all.
func (n *Node) heldBack(h uint64) bool { return n.recov.plan.Load().heldBack(h) }

// settled reports whether the node serves and no recovery is under way:
// what deadlock detection needs, since tables being rebuilt say nothing
// of the waits on them.
func (n *Node) settled() bool { return n.serving() && n.recov.plan.Load() == nil }

// deferUnlock keeps the release of lk for after the recovery; lk leaves this
// node's books now, so it is not reported (or, if it was already, the
// release reaches the new master after Resume). Caller holds sh.mu.
func (n *Node) deferUnlock(lk *Lock, op wire.LVBOp, val []byte) {
	d := deferredUnlock{
		ls: lk.ls, hash: lk.hash,
		msg:   wire.UnlockRequest{Lockspace: lk.ls.name, Resource: lk.resource, Lock: lk.id, Owner: uint64(lk.ownerID()), LVB: slices.Clone(val), LVBOp: op},
		local: master.Release{Lock: lk.key(), Owner: lk.ownerID(), LVBOp: master.LVBOp(op), LVB: slices.Clone(val)},
	}
	n.recov.mu.Lock()
	n.recov.deferred = append(n.recov.deferred, d)
	n.recov.mu.Unlock()
}
