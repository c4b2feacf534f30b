package dlm

import (
	"context"
	"fmt"
	"time"

	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Describe asks resource's master, wherever it is, for the resource's
// state, and returns it as the master's Dump would: who holds it (mode,
// node, owner, token; permits on a semaphore), who is converting, who
// waits and for how long, each queue in the master's order (the order it
// grants in). A resource nobody holds or waits for has empty queues. It
// waits, as long as ctx allows, while the master is unreachable or
// recovering; a node without quorum fails with ErrNoQuorum.
func (ls *Lockspace) Describe(ctx context.Context, resource string) (ResourceDump, error) {
	if err := ls.checkResource(resource); err != nil {
		return ResourceDump{}, err
	}
	n := ls.node
	backoff := describeBackoffMin
	for {
		if n.quorumLost() {
			return ResourceDump{}, fmt.Errorf("%w: describe %q", ErrNoQuorum, resource)
		}
		if err := n.waitServing(ctx); err != nil {
			return ResourceDump{}, err
		}
		vw := n.view.Load()
		m := vw.masterOf(resourceHash(ls.seed, resource))
		var rd ResourceDump
		done := false
		if m == n.self {
			rd, done = ls.describeLocal(resource)
		} else {
			reply := new(wire.DescribeReply)
			err := n.links.CallInto(ctx, m.name, &wire.DescribeRequest{Epoch: n.epoch(), Lockspace: ls.name, Resource: resource}, reply)
			if err == nil && reply.Status != wire.DescribeRetry {
				rd, done = describeDump(ls.name, resource, m.name, reply), true
			}
		}
		if done {
			return rd, nil
		}
		if ctx.Err() != nil {
			return ResourceDump{}, ctxError(ctx.Err())
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ResourceDump{}, fmt.Errorf("%w: describe %q at %s: %w", ErrUnavailable, resource, m.name, ctxError(ctx.Err()))
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

// describeLocal describes a resource this node masters; false if it
// cannot answer now (it is not serving).
func (ls *Lockspace) describeLocal(resource string) (ResourceDump, bool) {
	n := ls.node
	if !n.serving() {
		return ResourceDump{}, false
	}
	rd, ok := ls.Dump(resource)
	if !ok {
		rd = emptyDump(ls.name, resource, n.cfg.Name, n.view.Load().epoch)
	}
	capDump(&rd, wire.DefaultLimits().MaxReport)
	return rd, true
}

// capDump leaves the first limit locks of rd, in queue order, and counts
// the rest in Omitted: what one DescribeReply carries, wherever the master
// is.
func capDump(rd *ResourceDump, limit int) {
	for _, q := range []*[]LockInfo{&rd.Granted, &rd.Converting, &rd.Waiting} {
		if keep := min(len(*q), limit); keep < len(*q) {
			rd.Omitted += len(*q) - keep
			*q = (*q)[:keep]
		}
		limit -= len(*q)
	}
}

func emptyDump(lockspace, resource, masterName string, epoch uint64) ResourceDump {
	return ResourceDump{
		Lockspace: lockspace, Name: resource, Master: masterName, Epoch: epoch, Value: ValueBlock{Valid: true},
		Granted: []LockInfo{}, Converting: []LockInfo{}, Waiting: []LockInfo{},
	}
}

// onDescribe answers a DescribeRequest, as the resource's master.
func (n *Node) onDescribe(in transport.Inbound, m *wire.DescribeRequest) {
	if !in.ReplyTo.IsRequest() {
		return
	}
	retry := &wire.DescribeReply{Epoch: max(n.epoch(), 1), Status: wire.DescribeRetry}
	reply := retry
	ls := n.existingLockspace(m.Lockspace)
	switch {
	case m.Epoch != n.epoch() || !n.serving():
		// Another view: once both are in the same one, they agree on the
		// master.
	case ls == nil:
		reply = &wire.DescribeReply{Epoch: n.epoch(), Status: wire.DescribeNone, ValueValid: true}
	case n.view.Load().masterOf(resourceHash(ls.seed, m.Resource)) != n.self,
		n.recov.plan.Load().rebuildsHere(resourceHash(ls.seed, m.Resource)):
		// Not the master, or the resource's table is being rebuilt here.
	default:
		if rd, ok := ls.describeLocal(m.Resource); ok {
			reply = describeReply(n.epoch(), rd)
		}
	}
	if err := n.links.Reply(in.ReplyTo, reply); err != nil {
		n.log.Debug("describe reply not sent", "peer", in.From, "err", err)
	}
}

// describeReply puts a master's dump of a resource, capped (capDump), in a
// reply.
func describeReply(epoch uint64, rd ResourceDump) *wire.DescribeReply {
	reply := &wire.DescribeReply{
		Epoch: epoch, Status: wire.DescribeNone,
		ValueValid: rd.Value.Valid, ValueSeq: rd.Value.Seq, ValueLen: uint32(rd.Value.Len),
	}
	reply.Omitted = uint32(rd.Omitted)
	if rd.Omitted > 0 {
		reply.Status = wire.DescribeFound
	}
	for q, locks := range [][]LockInfo{rd.Granted, rd.Converting, rd.Waiting} {
		for _, li := range locks {
			reply.Status = wire.DescribeFound
			d := wire.DescribedLock{
				Node: li.Node, Lock: li.ID, Owner: li.Owner, Queue: uint8(q + 1),
				Granted: li.Mode, Requested: li.Requested, Token: li.Token,
				Waited: int64(li.Wait), TTL: int64(li.TTL),
			}
			if li.Permits > 0 {
				d.Permits, d.Count = uint32(rd.Permits), uint32(li.Permits)
			}
			reply.Locks = append(reply.Locks, d)
		}
	}
	return reply
}

// describeDump turns a master's reply into the dump it was made from.
func describeDump(lockspace, resource, masterName string, r *wire.DescribeReply) ResourceDump {
	rd := emptyDump(lockspace, resource, masterName, r.Epoch)
	rd.Value = ValueBlock{Valid: r.ValueValid, Seq: r.ValueSeq, Len: int(r.ValueLen)}
	rd.Omitted = int(r.Omitted)
	for _, d := range r.Locks {
		li := LockInfo{
			ID: d.Lock, Node: d.Node, Owner: d.Owner,
			Mode: d.Granted, Requested: d.Requested, Token: d.Token, Permits: int(d.Count),
			Wait: time.Duration(d.Waited), TTL: time.Duration(d.TTL),
		}
		rd.Permits = max(rd.Permits, int(d.Permits))
		switch d.Queue {
		case wire.QueueGranted:
			rd.Granted = append(rd.Granted, li)
		case wire.QueueConverting:
			rd.Converting = append(rd.Converting, li)
		default:
			rd.Waiting = append(rd.Waiting, li)
		}
	}
	return rd
}
