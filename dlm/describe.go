package dlm

import (
	"context"
	"fmt"
	"time"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// ResourceInfo is what a resource's master says of it: who holds it, who
// is converting, who waits, each queue in the master's order (the order
// it grants in).
type ResourceInfo struct {
	Resource string
	// Master is the node that masters the resource and answered.
	Master string
	// Permits is the semaphore's number of permits when the resource is a
	// semaphore (its locks hold permits, not modes); 0 otherwise.
	Permits    int
	Granted    []LockInfo
	Converting []LockInfo
	Waiting    []LockInfo
	// Omitted counts the locks left out of a very long queue (past
	// wire.Limits.MaxReport in all), from the end of the waiting queue.
	Omitted int
}

// LockInfo describes one lock on a resource, as its master has it.
type LockInfo struct {
	// Node is the member that holds the lock or asked for it.
	Node string
	// ID is the lock's id on that node.
	ID uint64
	// Owner is the lock's owner (Owner.ID), 0 for a lock that is its own.
	Owner uint64
	// Mode is the granted mode: NL while waiting, and on a semaphore.
	Mode modes.Mode
	// Requested is the mode asked for: the target of a conversion, the
	// mode of a waiting request; Mode for a granted lock.
	Requested modes.Mode
	// Permits is, on a semaphore, the permits the lock holds or asks for.
	Permits int
	// Token is the fencing token of the lock's grant; 0 while waiting.
	Token Token
	// Waited is how long a converting or waiting lock's request has been
	// queued (on the master's clock, since the master queued it or last
	// rebuilt its queue); 0 for a granted lock.
	Waited time.Duration
}

// Describe asks resource's master for the resource's locks and returns
// them. A resource nobody holds or waits for has none. It waits, as long
// as ctx allows, while the master is unreachable or recovering; a node
// without quorum fails with ErrNoQuorum.
func (ls *Lockspace) Describe(ctx context.Context, resource string) (ResourceInfo, error) {
	if err := ls.checkResource(resource); err != nil {
		return ResourceInfo{}, err
	}
	n := ls.node
	backoff := describeBackoffMin
	for {
		if n.quorumLost() {
			return ResourceInfo{}, fmt.Errorf("%w: describe %q", ErrNoQuorum, resource)
		}
		if err := n.waitServing(ctx); err != nil {
			return ResourceInfo{}, err
		}
		vw := n.view.Load()
		m := vw.masterOf(resourceHash(ls.seed, resource))
		var reply *wire.DescribeReply
		var err error
		if m == n.self {
			reply = ls.describeLocal(resource)
		} else {
			reply = new(wire.DescribeReply)
			err = n.links.CallInto(ctx, m.name, &wire.DescribeRequest{Epoch: n.epoch(), Lockspace: ls.name, Resource: resource}, reply)
		}
		if err == nil && reply.Status != wire.DescribeRetry {
			return describeInfo(resource, m.name, reply, vw), nil
		}
		if ctx.Err() != nil {
			return ResourceInfo{}, ctxError(ctx.Err())
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ResourceInfo{}, fmt.Errorf("%w: describe %q at %s: %w", ErrUnavailable, resource, m.name, ctxError(ctx.Err()))
		}
		backoff = min(2*backoff, describeBackoffMax)
	}
}

// A master that cannot answer yet (recovering, or in another view) is
// asked again after a pause that doubles from describeBackoffMin to
// describeBackoffMax.
const (
	describeBackoffMin = 5 * time.Millisecond
	describeBackoffMax = 200 * time.Millisecond
)

// onDescribe answers a DescribeRequest, as the resource's master.
func (n *Node) onDescribe(in transport.Inbound, m *wire.DescribeRequest) {
	if !in.ReplyTo.IsRequest() {
		return
	}
	var reply *wire.DescribeReply
	ls := n.existingLockspace(m.Lockspace)
	switch {
	case m.Epoch != n.epoch() || !n.serving():
		// Another view: once both are in the same one, they agree on the
		// master.
		reply = &wire.DescribeReply{Epoch: max(n.epoch(), 1), Status: wire.DescribeRetry}
	case ls == nil:
		reply = &wire.DescribeReply{Epoch: n.epoch(), Status: wire.DescribeNone}
	case n.view.Load().masterOf(resourceHash(ls.seed, m.Resource)) != n.self:
		reply = &wire.DescribeReply{Epoch: n.epoch(), Status: wire.DescribeRetry}
	default:
		reply = ls.describeLocal(m.Resource)
	}
	if err := n.links.Reply(in.ReplyTo, reply); err != nil {
		n.log.Debug("describe reply not sent", "peer", in.From, "err", err)
	}
}

// describeLocal describes a resource this node masters, in the form of a
// master's reply.
func (ls *Lockspace) describeLocal(resource string) *wire.DescribeReply {
	n := ls.node
	reply := &wire.DescribeReply{Epoch: max(n.epoch(), 1), Status: wire.DescribeNone}
	if !n.serving() {
		reply.Status = wire.DescribeRetry
		return reply
	}
	sh := ls.shardOf(resourceHash(ls.seed, resource))
	sh.mu.Lock()
	now := n.now()
	sh.table.Tick(now)
	ls.deliver(sh)
	rs, ok := sh.table.Resource(resource)
	sh.mu.Unlock()
	if !ok {
		return reply
	}
	reply.Status = wire.DescribeFound
	limit := wire.DefaultLimits().MaxReport
	for i, l := range rs.Locks {
		if i == limit {
			reply.Omitted = uint32(len(rs.Locks) - limit)
			break
		}
		d := wire.DescribedLock{
			Node: uint32(l.Lock.Node), Lock: l.Lock.ID, Owner: uint64(l.Owner), Queue: uint8(l.Queue),
			Granted: l.Granted, Requested: l.Requested, Permits: l.Permits, Count: l.Count,
		}
		if l.Queue != master.QueueWaiting {
			d.Token = l.Token
		}
		if l.Queue != master.QueueGranted && l.Since != 0 && now > l.Since {
			d.Waited = int64(time.Duration(now-l.Since) * time.Microsecond)
		}
		reply.Locks = append(reply.Locks, d)
	}
	return reply
}

// describeInfo turns a master's reply into the public description.
func describeInfo(resource, masterName string, r *wire.DescribeReply, vw *view) ResourceInfo {
	info := ResourceInfo{Resource: resource, Master: masterName, Omitted: int(r.Omitted)}
	for _, d := range r.Locks {
		li := LockInfo{
			Node: nodeName(vw, master.NodeID(d.Node)), ID: d.Lock, Owner: d.Owner,
			Mode: d.Granted, Requested: d.Requested, Permits: int(d.Count),
			Token: Token(d.Token), Waited: time.Duration(d.Waited),
		}
		if d.Permits != 0 {
			info.Permits = int(d.Permits)
		}
		switch d.Queue {
		case wire.QueueGranted:
			info.Granted = append(info.Granted, li)
		case wire.QueueConverting:
			info.Converting = append(info.Converting, li)
		default:
			info.Waiting = append(info.Waiting, li)
		}
	}
	return info
}

// nodeName names a node of the view by its id; one that has left is named
// by its id.
func nodeName(vw *view, id master.NodeID) string {
	if m := vw.byID[id]; m != nil {
		return m.name
	}
	return fmt.Sprintf("node#%08x", uint32(id))
}
