// Package dlm is a distributed lock manager in the tradition of the OpenVMS
// lock manager and the Linux kernel DLM: VMS lock modes with conversions,
// FIFO queues, lock value blocks, blocking callbacks and fencing tokens, on
// a cluster of nodes that each master a share of the resources.
//
// # Using it
//
//	cfg := dlm.DefaultConfig()
//	cfg.Name, cfg.Members, cfg.Seeds = "node1", []string{"node1", "node2", "node3"}, seeds
//	node, err := dlm.Start(ctx, cfg)   // returns once every member is up
//	defer node.Close()                 // releases this node's locks
//	ls, _ := node.Lockspace("fs1")
//	lk, err := ls.Lock(ctx, "inode/42", modes.PR, dlm.OnBlocking(func(want modes.Mode) { ... }))
//	store.Write(lk.Token(), data)      // the store refuses older tokens
//	err = lk.Convert(ctx, modes.EX)
//	lk.SetValue(v)                     // the value block, written back on unlock
//	err = lk.Unlock()
//
// TryLock fails at once (ErrNotQueued) instead of waiting; a context ends a
// wait (ErrCancelled or ErrTimeout, which also match the context's error).
// Owners group the locks of one transaction, optionally reentrant; Mutex is
// a sync.Locker; Election is leader election on one lock.
//
// # Mastering
//
// Every resource has one master node: the member of the current view that
// wins a rendezvous (highest random weight) hash of the lockspace and the
// resource name. The master keeps the resource's queues in a master.Table.
// A request for a resource this node masters goes straight into the local
// table: no encoding, no network, no goroutine. Otherwise it is one message
// to the master and one back (a grant, or a failure); an unlock or a
// cancel is one message nobody waits for. All traffic between two nodes
// travels in send order (transport: one connection per direction), so an
// unlock cannot overtake the lock request it follows, nor a grant the
// blocking notification that follows it.
//
// # Concurrency
//
// A lockspace is split into shards by resource hash. A shard holds, under
// one mutex, the lock table of the resources this node masters in it and
// this node's own locks on resources in it, so a table call delivers its
// effects to local locks without taking another lock, and goroutines on
// different resources rarely contend. Lock ids carry their shard in the low
// bits, so a completion from a master finds its lock at once.
//
// Incoming messages are handled on the transport's reader goroutines, which
// take one shard mutex, run the table and queue replies (never blocking).
// Blocking callbacks run on one dispatcher goroutine per node, never under
// a shard mutex: the callbacks of one lock come in the order the master
// sent them, and a callback may call the lock API. A slow callback delays
// the others, so it should hand long work to a goroutine of its own.
//
// # Fencing tokens
//
// Lock.Token is a uint64 that strictly increases for every grant or
// up-conversion of a resource. A store that remembers the highest token it
// has accepted and refuses lower ones is safe against a holder that paused
// past the end of its lock (a GC pause, a partition): the lock manager
// cannot stop a paused process from acting, but the store can refuse it.
//
// # TTL and Lost
//
// A lock may carry a TTL (WithTTL): its master releases it unless it is
// renewed (Renew, KeepAlive). The holder's lease ends earlier, on its own
// clock (see ttl.go for the arithmetic), and Lost is closed then. Lost also
// closes when the master releases the lock or the node closes.
//
// # Errors and limits
//
// Errors are sentinels to test with errors.Is. Configured limits (locks
// per node, waiters per resource, name and value block sizes) refuse
// requests with ErrLimit and count them in dlm_limit_rejections_total, so a
// flood of requests costs errors, not memory.
//
// # Membership changes and failures
//
// The recovery package agrees views (membership epochs) and keeps each
// node's quorum lease; this package carries out each view's recovery
// (recovery.go): suspend, report every lock to its master in the new view,
// rebuild every table from the reports, resume. A request whose master
// cannot be reached waits (within its context) and is sent again, or is
// carried by the next recovery; a lost connection asks for a recovery, since
// messages on it may have been lost. A node that loses its lease stops
// granting, fails its waiting requests (ErrNoQuorum) and reports its locks
// lost; a removed node's locks go to others only after the lock-delay. See
// the recovery package for the protocol, the timing and what it assumes.
//
// Fencing tokens are time-based at the top (tokenFloor): milliseconds since
// 2000 in the high 44 bits, a per-table counter in the low 20. Every table
// starts above the floor of the moment it is made, so tokens keep
// increasing across any number of recoveries and across a restart of the
// whole cluster, provided wall clocks agree to better than a recovery's
// lock-delay (over a second). No data directory is needed.
//
// # Metrics
//
// A node registers its metrics with Config.Registerer (none if nil): its
// own (dlm_requests_total by operation, mode and result; dlm_lock_seconds,
// the time to a grant by mode and by whether the master was local;
// dlm_blocking_notifications_total; dlm_limit_rejections_total by limit;
// dlm_locks_lost_total; dlm_client_locks; dlm_mastered_resources and
// dlm_mastered_locks per lockspace; dlm_recovery_locks_rebuilt_total and
// dlm_recovery_locks_purged_total), the recovery package's (dlm_epoch,
// dlm_quorum, dlm_recoveries_total, dlm_recovery_phase_seconds by phase,
// dlm_evictions_total, dlm_view_proposals_total, dlm_resyncs_requested_total)
// and the transport's (dlm_transport_* and dlm_membership_*).
package dlm
