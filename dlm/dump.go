package dlm

import (
	"slices"
	"strings"
	"time"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/modes"
)

// DumpOptions selects what LockDump returns.
type DumpOptions struct {
	// Lockspace, if set, dumps only that lockspace.
	Lockspace string
	// Prefix, if set, dumps only resources whose names start with it.
	Prefix string
	// Limit, if positive, dumps at most that many resources (the first by
	// lockspace and name); LockDump says when more matched.
	Limit int
}

// LockDump is the state of the resources a node masters, in the spirit of
// dlm_tool lockdump. dlmnode's /v1/locks serves it as JSON (durations in
// nanoseconds).
type LockDump struct {
	Node  string `json:"node"`
	Epoch uint64 `json:"epoch"`
	// Resources are sorted by lockspace, then name.
	Resources []ResourceDump `json:"resources"`
	// Truncated says Limit cut the dump short: more resources matched.
	Truncated bool `json:"truncated,omitempty"`
}

// ResourceDump is one resource at its master: its value block and its
// queues, each in queue order.
type ResourceDump struct {
	Lockspace string     `json:"lockspace"`
	Name      string     `json:"name"`
	Master    string     `json:"master"`
	Epoch     uint64     `json:"epoch"`
	Value     ValueBlock `json:"value"`
	// Permits is, for a semaphore (Lockspace.Semaphore), its number of
	// permits; 0 for a resource locked in modes.
	Permits    int        `json:"permits,omitempty"`
	Granted    []LockInfo `json:"granted"`
	Converting []LockInfo `json:"converting"`
	Waiting    []LockInfo `json:"waiting"`
	// Omitted counts the locks left out of a very long queue, from the end
	// of the waiting queue (Describe carries at most wire.Limits.MaxReport;
	// Dump leaves none out).
	Omitted int `json:"omitted,omitempty"`
}

// ValueBlock describes a resource's lock value block (its bytes are not
// dumped).
type ValueBlock struct {
	// Valid is false when the value may be stale (a writer was lost).
	Valid bool `json:"valid"`
	// Seq counts writes to the value.
	Seq uint64 `json:"seq"`
	// Len is the value's length in bytes.
	Len int `json:"len"`
}

// LockInfo is one lock on a resource, as its master sees it.
type LockInfo struct {
	// ID is the lock's id, unique on its node.
	ID uint64 `json:"id"`
	// Node is the name of the node that holds or requests the lock.
	Node string `json:"node"`
	// Owner is the lock's owner (0: the lock is its own owner).
	Owner uint64 `json:"owner"`
	// Mode is the granted mode (NL for a request waiting for its first
	// grant); Requested the mode asked for (equal to Mode once granted).
	Mode      modes.Mode `json:"mode"`
	Requested modes.Mode `json:"requested"`
	// Token is the fencing token of the lock's latest grant (0 while it
	// waits for its first).
	Token uint64 `json:"token"`
	// Permits is, on a semaphore, the permits the lock holds or asks for
	// (its Mode and Requested are NL).
	Permits int `json:"permits,omitempty"`
	// Wait is how long a queued request or conversion has waited.
	Wait time.Duration `json:"wait_ns,omitempty"`
	// TTL is how long a lock with a TTL has left before its master
	// releases it, unless renewed.
	TTL time.Duration `json:"ttl_ns,omitempty"`
}

// LockDump returns the resources this node masters that opts selects. It
// takes each shard's mutex twice, briefly: once to list the matching
// names, once per resource for its state. It is not an atomic snapshot
// across resources.
func (n *Node) LockDump(opts DumpOptions) LockDump {
	vw := n.view.Load()
	d := LockDump{Node: n.cfg.Name, Epoch: vw.epoch}
	type entry struct {
		ls   *Lockspace
		name string
	}
	var names []entry
	for _, ls := range n.lockspaceList() {
		if opts.Lockspace != "" && ls.name != opts.Lockspace {
			continue
		}
		start := len(names)
		for _, sh := range ls.shards {
			sh.mu.Lock()
			for name := range sh.table.Resources() {
				if strings.HasPrefix(name, opts.Prefix) {
					names = append(names, entry{ls, name})
				}
			}
			sh.mu.Unlock()
		}
		slices.SortFunc(names[start:], func(a, b entry) int { return strings.Compare(a.name, b.name) })
	}
	if opts.Limit > 0 && len(names) > opts.Limit {
		names, d.Truncated = names[:opts.Limit], true
	}
	for _, e := range names {
		if rd, ok := e.ls.Dump(e.name); ok {
			d.Resources = append(d.Resources, rd)
		}
	}
	return d
}

// Dump returns the state of resource if this node masters it and it has
// locks: its value block and its queues (the lock dump of dlm_tool).
func (ls *Lockspace) Dump(resource string) (ResourceDump, bool) {
	n := ls.node
	vw := n.view.Load()
	sh := ls.shardOf(resourceHash(ls.seed, resource))
	sh.mu.Lock()
	now := n.now()
	rs, ok := sh.table.Resource(resource)
	sh.mu.Unlock()
	if !ok {
		return ResourceDump{}, false
	}
	rd := ResourceDump{
		Lockspace: ls.name, Name: rs.Name, Master: n.cfg.Name, Epoch: vw.epoch,
		Value:   ValueBlock{Valid: rs.LVB.Valid, Seq: rs.LVB.Seq, Len: len(rs.LVB.Data)},
		Granted: []LockInfo{}, Converting: []LockInfo{}, Waiting: []LockInfo{},
	}
	for _, l := range rs.Locks {
		li := LockInfo{
			ID: l.Lock.ID, Node: vw.nodeName(l.Lock.Node), Owner: uint64(l.Owner),
			Mode: l.Granted, Requested: l.Requested, Token: l.Token, Permits: int(l.Count),
		}
		rd.Permits = max(rd.Permits, int(l.Permits))
		if l.Queue != master.QueueGranted && now > l.Since {
			li.Wait = tickDuration(now - l.Since)
		}
		if l.Expires != 0 && l.Expires > now {
			li.TTL = tickDuration(l.Expires - now)
		}
		switch l.Queue {
		case master.QueueGranted:
			rd.Granted = append(rd.Granted, li)
		case master.QueueConverting:
			rd.Converting = append(rd.Converting, li)
		default:
			li.Token = 0
			rd.Waiting = append(rd.Waiting, li)
		}
	}
	return rd, true
}

// tickDuration converts table ticks (microseconds, see Node.now) back to a
// duration.
func tickDuration(t master.Tick) time.Duration { return time.Duration(t) * time.Microsecond }

// ID returns the lock's id, unique on its node: what LockDump and the
// logs call it.
func (lk *Lock) ID() uint64 { return lk.id }
