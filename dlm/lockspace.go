package dlm

import (
	"errors"
	"math/bits"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Lockspace is an independent namespace of resources with its own limits
// (the size of its value blocks, above all). Get one from Node.Lockspace.
type Lockspace struct {
	node      *Node
	name      string
	cfg       LockspaceConfig
	seed      uint64 // mixed into resource hashes
	shards    []*shard
	shardBits int
	contended prometheus.Counter // dlm_lock_contended_total of this lockspace
}

// A shard is one slice of a lockspace, chosen by resource hash: the lock
// table of the resources this node masters in the slice, and this node's
// own locks on resources in the slice. One mutex guards both, so the effects
// of a table call reach this node's locks without taking another lock, and
// goroutines working on different shards do not contend.
type shard struct {
	mu    sync.Mutex
	idx   uint64
	table *master.Table
	locks map[uint64]*Lock // this node's locks, by id
	// demoted remembers locks of other nodes demoted to NL (CONVDEADLK)
	// while their conversion waits, to say so when it ends.
	demoted map[master.LockID]bool
	// releases queues releases decided while effects are delivered (a
	// request given up on that was granted after all).
	releases []master.Release
	// unsent are this node's locks whose request or conversion still has to
	// reach its master (see Lock.unsent).
	unsent []*Lock

	// Scratch messages: sending under mu encodes them at once, so one of
	// each per shard saves an allocation per message.
	comp wire.Completion
	blk  wire.Blocking
	req  wire.LockRequest
	conv wire.ConvertRequest
	unl  wire.UnlockRequest
	can  wire.CancelRequest
	_    [64]byte // keep shards' hot fields on separate cache lines
}

func newLockspace(n *Node, name string, cfg LockspaceConfig) *Lockspace {
	ls := &Lockspace{node: n, name: name, cfg: cfg, seed: xxhash.Sum64String(name), contended: n.met.contended.WithLabelValues(name)}
	ls.shardBits = bits.TrailingZeros(uint(n.cfg.Shards))
	for i := range n.cfg.Shards {
		t := master.New(cfg.tableConfig())
		t.RaiseTokenFloor(tokenFloor(time.Now())) // see tokenFloor
		ls.shards = append(ls.shards, &shard{
			idx: uint64(i), table: t,
			locks: map[uint64]*Lock{}, demoted: map[master.LockID]bool{},
		})
	}
	return ls
}

// Name returns the lockspace's name.
func (ls *Lockspace) Name() string { return ls.name }

// shardOf picks the shard of a resource hash (top bits; the low bits pick
// the master).
func (ls *Lockspace) shardOf(h uint64) *shard { return ls.shards[ls.shardIndex(h)] }

// shardIndex is the index in ls.shards of shardOf(h).
func (ls *Lockspace) shardIndex(h uint64) int {
	if ls.shardBits == 0 {
		return 0
	}
	return int(h >> (64 - ls.shardBits))
}

// shardOfLock finds the shard of one of this node's locks from its id,
// whose low bits hold the shard index: a completion names only the lock.
func (ls *Lockspace) shardOfLock(id uint64) *shard {
	return ls.shards[id&uint64(len(ls.shards)-1)]
}

// newLockID hands out an id for a lock on the resource with hash h in shard
// sh: increasing, never reused by this process, with the resource's bucket
// in bits 8-19 and the shard in the low 8 bits (a completion names only the
// lock; a recovery finds the locks of a bucket from their ids alone).
func (n *Node) newLockID(sh *shard, h uint64) uint64 {
	return n.nextLockID.Add(1)<<20 | uint64(bucketOf(h))<<8 | sh.idx
}

// bucketOfLock is the bucket of the resource of one of this node's locks,
// from its id (see newLockID).
func bucketOfLock(id uint64) int { return int(id>>8) & (numBuckets - 1) }

// --- master side: the table, for this node's locks and other nodes' alike.

// tableRequest, tableConvert, tableRelease and tableCancel run one call on
// the shard's table with the clock brought up to date, and deliver the
// effects. Callers hold sh.mu.
func (ls *Lockspace) tableRequest(sh *shard, req master.Request) (master.Result, error) {
	sh.table.Tick(ls.node.now())
	res, err := sh.table.Request(req)
	if err == nil && res.Status == master.Queued {
		ls.contended.Inc()
	}
	ls.deliver(sh)
	return res, err
}

func (ls *Lockspace) tableConvert(sh *shard, c master.Convert) (master.Result, error) {
	sh.table.Tick(ls.node.now())
	res, err := sh.table.Convert(c)
	if err == nil && res.Status == master.Queued && res.Demoted && c.Lock.Node != ls.node.self.id {
		sh.demoted[c.Lock] = true
	}
	if res.Demoted || errors.Is(err, master.ErrDeadlock) {
		ls.node.met.deadlocks[deadlockConversion].Inc()
		ls.noteConversionDeadlock(sh, c.Lock, res.Demoted, err)
	}
	if err == nil && res.Status == master.Queued {
		ls.contended.Inc()
	}
	ls.deliver(sh)
	return res, err
}

func (ls *Lockspace) tableRelease(sh *shard, r master.Release) error {
	// The clock first: a request queued behind the lock whose timeout
	// passed since the table's last tick fails, rather than being granted
	// a lock its requester gave up on and would only give back.
	sh.table.Tick(ls.node.now())
	err := sh.table.Release(r)
	ls.deliver(sh)
	return err
}

func (ls *Lockspace) tableCancel(sh *shard, id master.LockID, owner master.OwnerID) error {
	sh.table.Tick(ls.node.now()) // as for tableRelease: a cancel may grant what queued behind
	err := sh.table.Cancel(id, owner)
	ls.deliver(sh)
	return err
}

func (ls *Lockspace) tick() {
	now := ls.node.now()
	serving := ls.node.serving()
	for _, sh := range ls.shards {
		sh.mu.Lock()
		sh.table.Tick(now)
		ls.deliver(sh)
		if serving && len(sh.unsent) > 0 {
			sh.resendLocked()
		}
		sh.mu.Unlock()
	}
}

// resendLocked sends again the requests that could not reach their master,
// except those a recovery holds back. Caller holds sh.mu.
func (sh *shard) resendLocked() {
	keep := sh.unsent[:0]
	for _, lk := range sh.unsent {
		if lk.unsent == nil || (lk.state != stWaiting && lk.state != stConverting) {
			lk.unsent = nil
			continue
		}
		if lk.ls.node.heldBack(lk.hash) {
			keep = append(keep, lk)
			continue
		}
		lk.sendPending(lk.unsent)
		if lk.unsent != nil {
			keep = append(keep, lk)
		}
	}
	clear(sh.unsent[len(keep):])
	sh.unsent = keep
}

// deliver hands the table's effects to the locks they are about: this
// node's locks directly, other nodes' by message. Caller holds sh.mu.
func (ls *Lockspace) deliver(sh *shard) {
	self := ls.node.self.id
	for sh.table.PendingEffects() > 0 {
		effs := sh.table.Effects()
		for i := range effs {
			e := &effs[i]
			if e.Kind == master.EffectFailed && errors.Is(e.Err, master.ErrDeadlock) {
				ls.node.countDeadlock(ls, e)
			}
			if e.Lock.Node == self {
				ls.deliverLocal(sh, e)
			} else {
				ls.deliverRemote(sh, e)
			}
		}
		// Effects may not call the table while the batch is read; what they
		// had to release waits here, and may cause effects of its own.
		for len(sh.releases) > 0 {
			r := sh.releases[len(sh.releases)-1]
			sh.releases = sh.releases[:len(sh.releases)-1]
			_ = sh.table.Release(r)
		}
	}
}

func (ls *Lockspace) deliverLocal(sh *shard, e *master.Effect) {
	lk := sh.locks[e.Lock.ID]
	if lk == nil {
		return // the lock was given up while its answer was on the way
	}
	switch e.Kind {
	case master.EffectGranted:
		lk.finish(sh, outcome{granted: true, mode: e.Mode, token: e.Token, lvbRead: e.LVBRead, lvb: e.LVB.Data, lvbSeq: e.LVB.Seq, lvbValid: e.LVB.Valid})
	case master.EffectFailed:
		lk.finish(sh, outcome{mode: e.Mode, err: fromMaster(e.Err)})
	case master.EffectBlocking:
		lk.blocked(e.Mode)
	case master.EffectReleased:
		lk.released(sh, fromMaster(e.Err))
	}
}

func (ls *Lockspace) deliverRemote(sh *shard, e *master.Effect) {
	m := ls.node.view.Load().byID[e.Lock.Node]
	if m == nil {
		return // not a member any more; recovery purges its locks
	}
	var msg wire.Message
	if e.Kind == master.EffectBlocking {
		sh.blk = wire.Blocking{Epoch: ls.node.epoch(), Lockspace: ls.name, Lock: e.Lock.ID, Mode: e.Mode}
		msg = &sh.blk
	} else {
		c := &sh.comp
		*c = wire.Completion{Epoch: ls.node.epoch(), Lockspace: ls.name, Lock: e.Lock.ID, Mode: e.Mode, Token: e.Token}
		switch e.Kind {
		case master.EffectGranted:
			c.Status = wire.StatusGranted
			setCompletionLVB(c, e.LVBRead, e.LVB)
		default:
			c.Status, c.Err = statusOf(e.Err)
		}
		if sh.demoted[e.Lock] {
			c.Demoted = true
			delete(sh.demoted, e.Lock)
		}
		msg = c
	}
	if err := ls.node.links.Send(m.name, msg); err != nil {
		ls.node.log.Debug("effect not sent", "peer", m.name, "lock", e.Lock, "err", err)
	}
}

func setCompletionLVB(c *wire.Completion, read bool, v master.LVB) {
	if !read {
		return
	}
	c.LVB, c.LVBSeq, c.LVBFlags = v.Data, v.Seq, wire.LVBPresent
	if v.Valid {
		c.LVBFlags |= wire.LVBValid
	}
}

// statusOf maps a table error to the status a completion carries, and the
// text that lets the requester rebuild the error.
func statusOf(err error) (wire.Status, string) {
	switch pub := fromMaster(err); {
	case err == nil:
		return wire.StatusGranted, ""
	case pub == ErrNotQueued:
		return wire.StatusNotQueued, ""
	case errors.Is(pub, ErrDeadlock):
		return wire.StatusDeadlock, truncate(err.Error(), wire.MaxErr) // what deadlock, for the requester
	case errors.Is(pub, ErrTimeout):
		return wire.StatusTimeout, ""
	case errors.Is(pub, ErrCancelled):
		return wire.StatusCancelled, ""
	case errors.Is(err, master.ErrExpired):
		return wire.StatusExpired, ""
	}
	return wire.StatusError, truncate(err.Error(), wire.MaxErr)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// releaseAll settles every lock of this node in the lockspace as the node
// closes: granted ones are released, queued ones cancelled, and their
// holders told (ErrClosed, Lost).
func (ls *Lockspace) releaseAll() {
	for _, sh := range ls.shards {
		sh.mu.Lock()
		for _, lk := range sh.locks {
			lk.closeLocked(sh)
		}
		sh.mu.Unlock()
	}
}

// modeWrites reports whether a lock held in m writes its value back.
func modeWrites(m modes.Mode) bool { return m == modes.PW || m == modes.EX }

// MasterOf returns the name of the node that masters resource in the
// current view.
func (ls *Lockspace) MasterOf(resource string) string {
	return ls.node.view.Load().masterOf(resourceHash(ls.seed, resource)).name
}
