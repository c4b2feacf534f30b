package dlm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// FailFast makes a Lock, TryLock or Acquire fail at once with ErrNoQuorum
// while this node (or the resource's master) has no quorum, instead of
// waiting, within its context, for quorum to return; and a Convert or
// TryConvert fail at once with ErrNoQuorum when the resource's master
// refuses it for want of quorum, instead of asking again.
func FailFast() LockOption { return func(l *lockOpts) { l.failFast = true } }

// acquireRetrying is acquireNew for a caller that waits for quorum (no
// FailFast): a request issued while this node has no quorum waits for it
// to return, as a request to an unreachable master waits for the master;
// one that quorum's loss failed, or that a master without quorum refused,
// is issued again once it is back. The request loses its place in the
// queue then (it has a new lock id); that cannot be helped, since a node
// without quorum keeps no place anywhere. ctx bounds it all.
func (ls *Lockspace) acquireRetrying(ctx context.Context, resource string, mode modes.Mode, o lockOpts) (*Lock, error) {
	backoff := quorumBackoffMin
	for {
		if !o.failFast {
			if err := ls.node.waitQuorum(ctx, nil); err != nil {
				return nil, err
			}
		} else if ls.node.quorumLost() {
			// Not even waiting for a recovery: one that started as the
			// quorum went cannot end before it is back.
			return nil, fmt.Errorf("%w: this node has no quorum (FailFast)", ErrNoQuorum)
		}
		lk, err := ls.acquireNew(ctx, resource, mode, o)
		if err == nil || o.failFast || !errors.Is(err, ErrNoQuorum) || ctx.Err() != nil {
			return lk, err
		}
		if ls.node.serving() {
			// This node serves but the master refused: it lost its quorum
			// and is about to regain it or leave the view. Ask again soon.
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, quorumCtxError(ctx)
			}
			backoff = min(2*backoff, quorumBackoffMax)
		}
	}
}

// convertRetrying is convertOnce for a caller that waits for quorum (no
// FailFast): a conversion that failed with ErrNoQuorum while the lock is
// still held (its master had no quorum and refused it, or failed it as
// the quorum went) is asked again once this node serves, after a pause
// that doubles, as acquireRetrying asks a master again: that master
// regains its quorum or leaves the view, and the resource's next master
// takes the conversion. A lock lost meanwhile (this node lost its quorum)
// ends it with the lock's error. ctx bounds it all.
func (lk *Lock) convertRetrying(ctx context.Context, mode modes.Mode, o lockOpts) error {
	backoff := quorumBackoffMin
	for {
		err := lk.convertOnce(ctx, mode, o)
		if err == nil || o.failFast || !errors.Is(err, ErrNoQuorum) || ctx.Err() != nil {
			return err
		}
		if lerr := lk.Err(); lerr != nil {
			return lerr
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-lk.Lost():
			t.Stop()
			return lk.Err()
		case <-ctx.Done():
			t.Stop()
			return quorumCtxError(ctx)
		}
		backoff = min(2*backoff, quorumBackoffMax)
		if err := lk.ls.node.waitQuorum(ctx, lk.Lost()); err != nil {
			return err
		}
		if lerr := lk.Err(); lerr != nil {
			return lerr
		}
	}
}

// The pause before asking a master without quorum again doubles from
// quorumBackoffMin up to quorumBackoffMax: a lease lasts about a second,
// so the master's state changes within a few.
const (
	quorumBackoffMin = 10 * time.Millisecond
	quorumBackoffMax = 500 * time.Millisecond
)

// waitQuorum returns nil once this node serves, waiting through recoveries
// and through a loss of quorum as long as ctx allows, or as soon as abort
// (if not nil) closes; ErrClosed if the node closes. Every change of the
// gate's state wakes it to look again.
func (n *Node) waitQuorum(ctx context.Context, abort <-chan struct{}) error {
	g := &n.gate
	for !g.serving.Load() {
		g.mu.Lock()
		closed, noQuorum, changed := g.closed, g.noQuorum, g.changed
		serving := g.serving.Load()
		g.mu.Unlock()
		switch {
		case closed:
			return ErrClosed
		case serving:
			return nil
		}
		select {
		case <-changed:
		case <-abort:
			return nil
		case <-ctx.Done():
			if noQuorum {
				return quorumCtxError(ctx)
			}
			return ctxError(ctx.Err())
		}
	}
	return nil
}

// quorumLost reports whether this node has lost its quorum lease (and not
// regained it).
func (n *Node) quorumLost() bool {
	g := &n.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.noQuorum && !g.closed
}

// quorumCtxError is the error of a request whose context ended while it
// waited for quorum: the context's (ErrTimeout or ErrCancelled), and
// ErrNoQuorum, which says what it was waiting for.
func quorumCtxError(ctx context.Context) error {
	return fmt.Errorf("%w (waiting for quorum: %w)", ctxError(ctx.Err()), ErrNoQuorum)
}
