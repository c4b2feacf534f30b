package dlm

import (
	"errors"
	"time"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// handle receives every message from another node, on the goroutine
// reading that connection (see the package doc). It never blocks for long:
// it takes one shard's mutex, runs the table, and queues replies on the
// links, which never block.
func (n *Node) handle(in transport.Inbound) {
	if n.rec.Handle(in) {
		return
	}
	switch m := in.Msg.(type) {
	case *wire.LockReport, *wire.MasterReport, *wire.PermitReport:
		n.onReport(in)
		return
	case *wire.DescribeRequest:
		n.onDescribe(in, m)
		return
	case *wire.Completion:
		if m.Epoch >= n.gate.accept.Load() {
			n.onCompletion(m)
		}
		return
	case *wire.Blocking:
		if m.Epoch >= n.gate.accept.Load() {
			n.onBlocking(m)
		}
		return
	case *wire.DeadlockReport:
		n.deadlocks.accept(in.From, m)
		return
	case *wire.DeadlockConfirm:
		n.onDeadlockConfirm(in, m)
		return
	case *wire.DeadlockFail:
		n.onDeadlockFail(in.From, m)
		return
	}
	from := n.view.Load().byName[in.From]
	if from == nil || !n.admit(in) {
		return
	}
	switch m := in.Msg.(type) {
	case *wire.LockRequest:
		n.onLockRequest(from, m)
	case *wire.SemaphoreRequest:
		n.onSemaphoreRequest(from, m)
	case *wire.ConvertRequest:
		n.onConvertRequest(from, m)
	case *wire.UnlockRequest:
		n.onUnlockRequest(from, m)
	case *wire.CancelRequest:
		n.onCancelRequest(from, m)
	case *wire.Renew:
		n.onRenew(from, in.ReplyTo, m)
	default:
		n.log.Debug("unexpected message", "from", in.From, "type", in.Msg.Type().String())
	}
}

// admit decides what happens to a lock request by its epoch. One of an
// older epoch is dropped: its sender's recovery report says whatever it
// still holds or waits for. One of the epoch being recovered, or a newer
// one, waits for the end of the recovery. Without quorum, a request or a
// conversion is refused (ErrNoQuorum), while releases and cancels, always
// safe, go through.
func (n *Node) admit(in transport.Inbound) bool {
	e := requestEpoch(in.Msg)
	cur := n.epoch()
	switch {
	case e < cur:
		return false
	case e > cur || n.recovering():
		n.park(in)
		return false
	case n.serving():
		return true
	}
	switch m := in.Msg.(type) {
	case *wire.LockRequest:
		n.refuseNoQuorum(in.From, m.Lockspace, m.Lock)
		return false
	case *wire.SemaphoreRequest:
		n.refuseNoQuorum(in.From, m.Lockspace, m.Lock)
		return false
	case *wire.ConvertRequest:
		n.refuseNoQuorum(in.From, m.Lockspace, m.Lock)
		return false
	case *wire.Renew:
		if in.ReplyTo.IsRequest() {
			_ = n.links.Reply(in.ReplyTo, &wire.Completion{Epoch: cur, Lockspace: m.Lockspace, Lock: m.Locks[0], Status: wire.StatusError, Err: ErrNoQuorum.Error()})
		}
		return false
	}
	return true
}

func requestEpoch(m wire.Message) uint64 {
	switch m := m.(type) {
	case *wire.LockRequest:
		return m.Epoch
	case *wire.SemaphoreRequest:
		return m.Epoch
	case *wire.ConvertRequest:
		return m.Epoch
	case *wire.UnlockRequest:
		return m.Epoch
	case *wire.CancelRequest:
		return m.Epoch
	case *wire.Renew:
		return m.Epoch
	}
	return 0
}

func (n *Node) refuseNoQuorum(to, lockspace string, lock uint64) {
	c := &wire.Completion{Epoch: n.epoch(), Lockspace: lockspace, Lock: lock, Status: wire.StatusError, Err: ErrNoQuorum.Error()}
	_ = n.links.Send(to, c)
}

// masterShard finds the shard that masters resource in lockspace, creating
// the lockspace if this is the first request for it.
func (n *Node) masterShard(lockspace, resource string) (*Lockspace, *shard) {
	ls := n.lockspace(lockspace)
	return ls, ls.shardOf(resourceHash(ls.seed, resource))
}

// masters reports whether this node masters resource in the current view.
// A request of the current epoch always reaches its master (every node of
// the view routes alike); this guards against a bug ever splitting one.
func (n *Node) masters(ls *Lockspace, resource string) bool {
	if n.view.Load().masterOf(resourceHash(ls.seed, resource)).name == n.self.name {
		return true
	}
	n.log.Error("request for a resource this node does not master; dropped", "lockspace", ls.name, "resource", resource)
	return false
}

func (n *Node) onLockRequest(from *member, m *wire.LockRequest) {
	n.masterRequest(from, m.Lockspace, m.Lock, master.Request{
		Resource: m.Resource, Lock: master.LockID{Node: from.id, ID: m.Lock}, Owner: master.OwnerID(m.Owner),
		Mode: m.Mode, Flags: master.Flags(m.Flags), Timeout: ticks(time.Duration(m.Timeout)), TTL: ticks(time.Duration(m.TTL)),
	})
}

// masterRequest runs another node's new request on the table of its
// resource and answers it if it ended at once (granted or refused); a
// queued one is answered when it ends.
func (n *Node) masterRequest(from *member, lockspace string, lock uint64, req master.Request) {
	ls, sh := n.masterShard(lockspace, req.Resource)
	if !n.masters(ls, req.Resource) {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	res, err := ls.tableRequest(sh, req)
	if errors.Is(err, master.ErrLockExists) {
		return // a request that a recovery report already restored
	}
	if err != nil || res.Status == master.Granted {
		ls.reply(sh, from, lock, res, err)
	}
}

func (n *Node) onConvertRequest(from *member, m *wire.ConvertRequest) {
	ls, sh := n.masterShard(m.Lockspace, m.Resource)
	if !n.masters(ls, m.Resource) {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	res, err := ls.tableConvert(sh, master.Convert{
		Lock: master.LockID{Node: from.id, ID: m.Lock}, Owner: master.OwnerID(m.Owner), Mode: m.Mode,
		Flags: master.Flags(m.Flags), Timeout: ticks(time.Duration(m.Timeout)), LVBOp: master.LVBOp(m.LVBOp), LVB: m.LVB,
	})
	if errors.Is(err, master.ErrConvertPending) {
		return // a conversion that a recovery report already restored
	}
	if err != nil || res.Status == master.Granted {
		ls.reply(sh, from, m.Lock, res, err)
	}
}

// reply answers a request at once: its grant, or why it failed.
func (ls *Lockspace) reply(sh *shard, to *member, lock uint64, res master.Result, err error) {
	c := &sh.comp
	*c = wire.Completion{Epoch: ls.node.epoch(), Lockspace: ls.name, Lock: lock, Mode: res.Mode, Token: res.Token, Demoted: res.Demoted}
	if err != nil {
		c.Status, c.Err = statusOf(err)
	} else {
		c.Status = wire.StatusGranted
		setCompletionLVB(c, res.LVBRead, res.LVB)
	}
	if err := ls.node.links.Send(to.name, c); err != nil {
		ls.node.log.Debug("reply not sent", "peer", to.name, "err", err)
	}
}

func (n *Node) onUnlockRequest(from *member, m *wire.UnlockRequest) {
	ls, sh := n.masterShard(m.Lockspace, m.Resource)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	err := ls.tableRelease(sh, master.Release{
		Lock: master.LockID{Node: from.id, ID: m.Lock}, Owner: master.OwnerID(m.Owner), LVBOp: master.LVBOp(m.LVBOp), LVB: m.LVB,
	})
	if err != nil {
		n.log.Debug("unlock refused", "from", from.name, "lock", m.Lock, "err", err)
	}
}

func (n *Node) onCancelRequest(from *member, m *wire.CancelRequest) {
	ls, sh := n.masterShard(m.Lockspace, m.Resource)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// A cancel that finds nothing queued lost a race with the grant, whose
	// completion is already on its way; the requester gives the lock back.
	_ = ls.tableCancel(sh, master.LockID{Node: from.id, ID: m.Lock}, master.OwnerID(m.Owner))
}

// onRenew restarts the TTL of each lock in the batch and answers with a
// granted completion when every one of them was renewed, expired when one
// was not (the table no longer has it).
func (n *Node) onRenew(from *member, to transport.ReplyTo, m *wire.Renew) {
	ls := n.lockspace(m.Lockspace)
	status := wire.StatusGranted
	for _, id := range m.Locks {
		if !ls.renew(master.LockID{Node: from.id, ID: id}) {
			status = wire.StatusExpired
		}
	}
	if to.IsRequest() {
		_ = n.links.Reply(to, &wire.Completion{Epoch: n.epoch(), Lockspace: m.Lockspace, Lock: m.Locks[0], Status: status})
	}
}

// renew renews another node's lock in whichever shard's table has it: the
// id does not name the resource. Renewals are rare (a third of a TTL per
// lock), so looking through the shards costs little.
func (ls *Lockspace) renew(id master.LockID) bool {
	now := ls.node.now()
	for _, sh := range ls.shards {
		sh.mu.Lock()
		sh.table.Tick(now)
		err := sh.table.Renew(id)
		ls.deliver(sh)
		sh.mu.Unlock()
		if err == nil {
			return true
		}
	}
	return false
}

func (n *Node) onCompletion(m *wire.Completion) {
	ls := n.existingLockspace(m.Lockspace)
	if ls == nil {
		return
	}
	sh := ls.shardOfLock(m.Lock)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	lk := sh.locks[m.Lock]
	if lk == nil {
		return
	}
	if m.Status == wire.StatusExpired && lk.state != stWaiting && lk.state != stConverting {
		lk.released(sh, ErrLockLost)
		return
	}
	o := outcome{mode: m.Mode, token: m.Token, demoted: m.Demoted}
	if m.Status == wire.StatusGranted {
		o.granted = true
		if m.LVBFlags&wire.LVBPresent != 0 {
			o.lvbRead, o.lvb, o.lvbSeq, o.lvbValid = true, m.LVB, m.LVBSeq, m.LVBFlags&wire.LVBValid != 0
		}
	} else {
		o.err = completionError(m)
	}
	lk.finish(sh, o)
}

func completionError(m *wire.Completion) error {
	switch m.Status {
	case wire.StatusNotQueued:
		return ErrNotQueued
	case wire.StatusDeadlock:
		if m.Err != "" {
			return remoteError(m.Err) // ErrDeadlock, saying which deadlock
		}
		return ErrDeadlock
	case wire.StatusTimeout:
		return ErrTimeout
	case wire.StatusCancelled:
		return ErrCancelled
	case wire.StatusExpired:
		return ErrLockLost
	}
	return remoteError(m.Err)
}

func (n *Node) onBlocking(m *wire.Blocking) {
	ls := n.existingLockspace(m.Lockspace)
	if ls == nil {
		return
	}
	sh := ls.shardOfLock(m.Lock)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if lk := sh.locks[m.Lock]; lk != nil {
		lk.blocked(m.Mode)
	}
}
