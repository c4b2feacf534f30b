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
// completed, while it holds its quorum lease.
//
//	recovering  a view's recovery is under way: operations wait for it
//	noQuorum    the lease is lost (or the node was evicted): operations fail
//	            with ErrNoQuorum at once, except new requests, which wait
//	            for quorum to return unless FailFast (quorum_wait.go)
//	closed      Close was called: operations fail with ErrClosed
type gate struct {
	serving atomic.Bool // the fast path's one load
	// inRecovery mirrors recovering for readers that need only it (every
	// incoming lock message asks), without the mutex.
	inRecovery atomic.Bool

	mu         sync.Mutex
	recovering bool
	noQuorum   bool
	closed     bool
	resumed    chan struct{} // closed when recovery ends
	changed    chan struct{} // closed (and replaced) at every change of state

	epoch  atomic.Uint64 // epoch lock messages carry
	accept atomic.Uint64 // completions of an older epoch are dropped
}

func (g *gate) init() {
	g.recovering, g.noQuorum = true, true
	g.resumed = make(chan struct{})
	g.updateLocked() // not shared yet
}

func (g *gate) updateLocked() {
	g.serving.Store(!g.recovering && !g.noQuorum && !g.closed)
	g.inRecovery.Store(g.recovering)
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

// waitServing returns nil once the node serves, waiting while a recovery is
// under way; ErrNoQuorum or ErrClosed if it cannot serve.
func (n *Node) waitServing(ctx context.Context) error {
	for {
		if n.gate.serving.Load() {
			return nil
		}
		g := &n.gate
		g.mu.Lock()
		closed, noQuorum, recovering, ch := g.closed, g.noQuorum, g.recovering, g.resumed
		g.mu.Unlock()
		switch {
		case closed:
			return ErrClosed
		case !recovering && noQuorum:
			return ErrNoQuorum
		case !recovering:
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctxError(ctx.Err())
		}
	}
}

// epoch returns the epoch this node's lock messages carry.
func (n *Node) epoch() uint64 { return n.gate.epoch.Load() }

// serving reports whether the node serves lock traffic now. Senders check
// it under their shard's mutex: Suspend sweeps every shard after closing
// the gate, so a message either leaves before the sweep (and the lock is
// reported as it then stood) or not at all.
func (n *Node) serving() bool { return n.gate.serving.Load() }

// recovering reports whether a recovery is under way (the tables are being
// rebuilt).
func (n *Node) recovering() bool { return n.gate.inRecovery.Load() }

// deferUnlock keeps the release of lk for after the recovery; lk leaves this
// node's books now, so it is not reported (or, if it was already, the
// release reaches the new master after Resume). Caller holds sh.mu.
func (n *Node) deferUnlock(lk *Lock, op wire.LVBOp, val []byte) {
	d := deferredUnlock{
		ls: lk.ls, hash: lk.hash,
		msg:   wire.UnlockRequest{Lockspace: lk.ls.name, Resource: lk.resource, Lock: lk.id, Owner: uint64(lk.ownerID), LVB: slices.Clone(val), LVBOp: op},
		local: master.Release{Lock: lk.key(), Owner: lk.ownerID, LVBOp: master.LVBOp(op), LVB: slices.Clone(val)},
	}
	n.recov.mu.Lock()
	n.recov.deferred = append(n.recov.deferred, d)
	n.recov.mu.Unlock()
}
