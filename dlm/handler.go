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
	case *wire.Mastery:
		n.onMastery(in, m)
		return
	case *wire.DescribeRequest:
		n.onDescribe(in, m)
		return
	case *wire.Completion:
		n.onCompletion(m)
		return
	case *wire.Blocking:
		n.onBlocking(m)
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
	n.handleRequest(in, false)
}

// handleRequest admits and runs a lock request, conversion, unlock, cancel
// or renewal; replay says it was held back and is handed on again.
func (n *Node) handleRequest(in transport.Inbound, replay bool) {
	var ls *Lockspace
	var h uint64
	switch m := in.Msg.(type) {
	case *wire.LockRequest:
		ls, h = n.target(m.Lockspace, m.Resource)
	case *wire.SemaphoreRequest:
		ls, h = n.target(m.Lockspace, m.Resource)
	case *wire.ConvertRequest:
		ls, h = n.target(m.Lockspace, m.Resource)
	case *wire.UnlockRequest:
		ls, h = n.target(m.Lockspace, m.Resource)
	case *wire.CancelRequest:
		ls, h = n.target(m.Lockspace, m.Resource)
	case *wire.Renew:
		ls = n.lockspace(m.Lockspace)
	default:
		n.log.Debug("unexpected message", "from", in.From, "type", in.Msg.Type().String())
		return
	}
	from := n.admit(in, h, replay)
	if from == nil {
		return
	}
	switch m := in.Msg.(type) {
	case *wire.LockRequest:
		n.onLockRequest(from, m, ls, h)
	case *wire.SemaphoreRequest:
		n.onSemaphoreRequest(from, m, ls, h)
	case *wire.ConvertRequest:
		n.onConvertRequest(from, m, ls, h)
	case *wire.UnlockRequest:
		n.onUnlockRequest(from, m, ls, h)
	case *wire.CancelRequest:
		n.onCancelRequest(from, m, ls, h)
	case *wire.Renew:
		n.onRenew(from, in, m, ls, replay)
	}
}

// target returns the lockspace (created on a master's first request for
// it) and the hash of a resource.
func (n *Node) target(lockspace, resource string) (*Lockspace, uint64) {
	ls := n.lockspace(lockspace)
	return ls, resourceHash(ls.seed, resource)
}

// admit decides what happens to a lock message about the resource with
// hash h (0 for a Renew, which names no resource), and returns its sender
// if it is to be run now.
//
//   - Of a newer epoch than this node's: held until this node installs
//     that view (its Suspend).
//   - From a node that is not a member of the view (or another boot of
//     it), or of an epoch before this node purged the sender's locks:
//     dropped, as older than the purge.
//   - About a bucket rebuilt here since its epoch, or being rebuilt now
//     with an earlier epoch: dropped; the reports the bucket is rebuilt
//     from say whatever the sender still holds or waits for.
//   - About a bucket being rebuilt here, of the current epoch: held until
//     Resume.
//   - Without quorum, a request or a conversion is refused (ErrNoQuorum),
//     while releases and cancels, always safe, go through.
//
// Everything else runs now, whatever its epoch: the bucket's table was
// kept, and the message is in the order its sender sent it.
func (n *Node) admit(in transport.Inbound, h uint64, replay bool) *member {
	rs := &n.recov
	if !replay && rs.replaying.Load() && n.holdIf(in, replay, func() bool { return false }) {
		return nil // queued behind the messages being replayed
	}
	e := requestEpoch(in.Msg)
	if cur := n.epoch(); e > cur && n.holdIf(in, replay, func() bool { return e > n.epoch() }) {
		return nil
	}
	cur := n.epoch()
	from := n.view.Load().byName[in.From]
	if from == nil || from.bootID != in.BootID {
		return nil
	}
	if e < cur {
		if pm := rs.purgedAt.Load(); pm != nil && e < (*pm)[from.id] {
			return nil
		}
	}
	if _, renew := in.Msg.(*wire.Renew); !renew {
		if e < rs.rebuiltAt[bucketOf(h)].Load() {
			return nil
		}
		if rs.plan.Load().rebuildsHere(h) {
			if e < cur {
				return nil
			}
			if n.holdIf(in, replay, func() bool { return rs.plan.Load().rebuildsHere(h) }) {
				return nil
			}
		}
	}
	if n.serving() {
		return from
	}
	switch m := in.Msg.(type) {
	case *wire.LockRequest:
		n.refuseNoQuorum(in.From, m.Lockspace, m.Lock)
		return nil
	case *wire.SemaphoreRequest:
		n.refuseNoQuorum(in.From, m.Lockspace, m.Lock)
		return nil
	case *wire.ConvertRequest:
		n.refuseNoQuorum(in.From, m.Lockspace, m.Lock)
		return nil
	case *wire.Renew:
		if in.ReplyTo.IsRequest() {
			_ = n.links.Reply(in.ReplyTo, &wire.Completion{Epoch: cur, Lockspace: m.Lockspace, Lock: renewNames(m), Status: wire.StatusError, Err: ErrNoQuorum.Error()})
		}
		return nil
	}
	return from
}

// holdIf holds the message back if still() says it must wait (checked
// under rs.mu, against a Suspend or Resume that changes the answer) or a
// replay is under way (it then queues behind it), and reports whether it
// did; if not, the caller runs its checks again.
func (n *Node) holdIf(in transport.Inbound, replay bool, still func() bool) bool {
	rs := &n.recov
	rs.mu.Lock()
	defer rs.mu.Unlock()
	switch {
	case !replay && rs.replaying.Load():
		rs.holdLocked(n, &rs.incoming, in)
		return true
	case still():
		rs.holdLocked(n, &rs.held, in)
		return true
	}
	return false
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

// masters reports whether this node masters the resource with hash h in
// the current view. A request of an older view may still reach the node
// that mastered it then; its sender reports the lock to the new master.
func (n *Node) masters(ls *Lockspace, resource string, h uint64) bool {
	if n.view.Load().masterOf(h).name == n.self.name {
		return true
	}
	n.log.Debug("request for a resource this node does not master; dropped", "lockspace", ls.name, "resource", resource)
	return false
}

func (n *Node) onLockRequest(from *member, m *wire.LockRequest, ls *Lockspace, h uint64) {
	n.masterRequest(from, ls, h, m.Lock, master.Request{
		Resource: m.Resource, Lock: master.LockID{Node: from.id, ID: m.Lock}, Owner: master.OwnerID(m.Owner),
		Mode: m.Mode, Flags: master.Flags(m.Flags), Timeout: ticks(time.Duration(m.Timeout)), TTL: ticks(time.Duration(m.TTL)),
		Session: m.Session,
	})
}

// masterRequest runs another node's new request on the table of its
// resource (hash h) and answers it if it ended at once (granted or
// refused); a queued one is answered when it ends.
func (n *Node) masterRequest(from *member, ls *Lockspace, h uint64, lock uint64, req master.Request) {
	if !n.masters(ls, req.Resource, h) {
		return
	}
	sh := ls.shardOf(h)
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

func (n *Node) onConvertRequest(from *member, m *wire.ConvertRequest, ls *Lockspace, h uint64) {
	if !n.masters(ls, m.Resource, h) {
		return
	}
	sh := ls.shardOf(h)
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

func (n *Node) onUnlockRequest(from *member, m *wire.UnlockRequest, ls *Lockspace, h uint64) {
	sh := ls.shardOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	err := ls.tableRelease(sh, master.Release{
		Lock: master.LockID{Node: from.id, ID: m.Lock}, Owner: master.OwnerID(m.Owner), LVBOp: master.LVBOp(m.LVBOp), LVB: m.LVB,
	})
	if err != nil {
		n.log.Debug("unlock refused", "from", from.name, "lock", m.Lock, "err", err)
	}
}

func (n *Node) onCancelRequest(from *member, m *wire.CancelRequest, ls *Lockspace, h uint64) {
	sh := ls.shardOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// A cancel that finds nothing queued lost a race with the grant, whose
	// completion is already on its way; the requester gives the lock back.
	_ = ls.tableCancel(sh, master.LockID{Node: from.id, ID: m.Lock}, master.OwnerID(m.Owner))
}

// onRenew renews the sender's session, if the message names one, in every
// table of the lockspace, and restarts the TTL of each lock in the batch.
// It answers with a granted completion when every lock was renewed,
// expired when one was not (the table no longer has it). While this node
// rebuilds buckets, a lock not found may be in one of them: the renewal
// then waits for the end of the rebuild (the locks found are renewed now,
// and again then). A session needs no such wait: a lock of it rebuilt
// here joins its lease with a TTL counted from then.
func (n *Node) onRenew(from *member, in transport.Inbound, m *wire.Renew, ls *Lockspace, replay bool) {
	status := wire.StatusGranted
	if m.Session != 0 {
		ls.renewSession(from.id, m.Session)
	}
	for _, id := range m.Locks {
		if !ls.renew(master.LockID{Node: from.id, ID: id}) {
			status = wire.StatusExpired
		}
	}
	rs := &n.recov
	if status != wire.StatusGranted && rs.plan.Load() != nil && !rs.plan.Load().here.empty() {
		if m.Epoch < n.epoch() || n.holdIf(in, replay, func() bool { p := rs.plan.Load(); return p != nil && !p.here.empty() }) {
			return // an older renewal is resent by its holder; this one waits
		}
	}
	if in.ReplyTo.IsRequest() {
		_ = n.links.Reply(in.ReplyTo, &wire.Completion{Epoch: n.epoch(), Lockspace: m.Lockspace, Lock: renewNames(m), Status: status})
	}
}

// renewNames is what the answer to a Renew names: its first lock, or its
// session when it names none (a Completion names something other than 0).
func renewNames(m *wire.Renew) uint64 {
	if len(m.Locks) > 0 {
		return m.Locks[0]
	}
	return m.Session
}

// renewSession renews a node's session in every shard's table that keeps
// a lease of it.
func (ls *Lockspace) renewSession(node master.NodeID, session uint64) {
	now := ls.node.now()
	for _, sh := range ls.shards {
		sh.mu.Lock()
		sh.table.Tick(now)
		sh.table.RenewSession(node, session)
		ls.deliver(sh)
		sh.mu.Unlock()
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

// onCompletion takes a master's answer. An answer of an epoch before this
// node reported the lock to a new master is dropped: it comes from the old
// master, and the report said the lock stood as it did before it.
func (n *Node) onCompletion(m *wire.Completion) {
	ls := n.existingLockspace(m.Lockspace)
	if ls == nil {
		return
	}
	sh := ls.shardOfLock(m.Lock)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	lk := sh.locks[m.Lock]
	if lk == nil || m.Epoch < lk.reportedAt {
		return
	}
	if m.Status == wire.StatusExpired {
		// The master no longer has the lock (its TTL ran out, or it could
		// not be restored after a view change): whatever the lock was
		// doing, it is lost.
		why := error(ErrLockLost)
		if m.Err != "" {
			why = errors.New(m.Err)
		}
		lk.released(sh, why)
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
	if lk := sh.locks[m.Lock]; lk != nil && m.Epoch >= lk.reportedAt {
		lk.blocked(m.Mode)
	}
}
