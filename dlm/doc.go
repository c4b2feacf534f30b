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
// cancel is one message nobody waits for. The unlock of a lock no other
// request waited for may wait a few microseconds to leave with this node's
// next message to that master (Lock.postUnlock): a loop that unlocks and
// locks again there pays one write per iteration, not two. All traffic between two nodes
// travels in send order (transport: one connection per pair, ordered each
// way), so an unlock cannot overtake the lock request it follows, nor a
// grant the blocking notification that follows it.
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
// Incoming messages are handled on whichever goroutine reads their
// connection: the transport's reader goroutine, or a goroutine of this node
// waiting for an answer from that peer, which reads the connection while it
// waits (transport's Await: a Lock or Convert waiting for its remote
// master, a Call in recovery or lease renewal), so that its answer wakes it
// straight from the network. Handling takes one shard mutex, runs the table
// and queues replies (never blocking), so it runs the same on either; a
// Lock waits holding no mutex. An answer that reaches a waiting Lock some
// other way (locally, from a new master after recovery) interrupts its
// reading (transport's Lender.Interrupt, in signalDone).
// Blocking callbacks run on one dispatcher goroutine per node, never under
// a shard mutex: the callbacks of one lock come in the order the master
// sent them, and a callback may call the lock API. A slow callback delays
// the others, so it should hand long work to a goroutine of its own.
//
// # Caching shared locks
//
// A Cache (Lockspace.NewCache) shares one lock per resource among this
// node's readers, the way GFS2's glocks sit over the kernel DLM: the node
// takes one lock in a shared mode (PR by default; CR or CW also share) at
// the master, and every Acquire while it is granted is a Hold on it,
// granted under one cache mutex with no message (about a seventh of a
// local Lock). The lock stays cached when its last hold ends, up to
// MaxIdle idle locks, so a node re-reading a resource never asks again
// until a writer comes. Invariants:
//
//   - exclusion is the master's: a hold exists only while the node's lock
//     is granted, and the lock is released only once no hold is left;
//   - FIFO is the master's too: the blocking notification a waiting
//     writer causes retires the cached lock, so no new hold joins it;
//     Acquires from then on request a new lock, which the master queues
//     behind the writer, like any request;
//   - a retired lock is released by its last hold, or at once if idle;
//     a lost lock (quorum, node closed) is never joined again.
//
// A hold is not a lock at the master: it shares the fencing token and
// value block of the node's grant, has no TTL or conversion, and has no
// owner that deadlock detection could follow (see Cache for what that
// rules out). dlm_cache_acquires_total{result="hit"|"miss"} counts holds
// taken on cached locks and locks requested.
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
// # Deadlocks
//
// A conversion deadlock on one resource (two PR holders both converting to
// EX) is found by the resource's master at once: the second conversion
// fails with ErrDeadlock and keeps its mode, or, with DemoteOnDeadlock, is
// demoted to NL.
//
// Deadlocks across resources and nodes are found by following owners. An
// Owner (a transaction, a process) can hold and wait on many locks on many
// resources mastered on many nodes; a lock taken without one is its own
// owner. Party A waits for party B when a request of A is queued behind a
// lock of B that holds a conflicting mode, or behind a request of B queued
// ahead of it (the queues are FIFO). A cycle of parties each waiting for
// the next can never be granted: one request of it must fail. That includes
// a cycle of one: an owner (not Reentrant) asking again for a resource it
// holds in a conflicting mode. The model is the transaction's: an owner
// waiting for a lock changes none of its other locks until the wait ends.
// An owner whose goroutines lock and unlock independently may be chosen as
// the victim of a cycle another of its goroutines was about to break.
//
// Detection is a periodic collection of wait-for edges by one node, the
// detector: the lowest-named member of the current view (Config.DeadlockWait
// sets its pace; zero turns it off):
//
//  1. every node, every DeadlockWait/4 (at least TickInterval), takes from
//     the tables it masters the wait-for edges of the requests that have
//     waited at least DeadlockWait, and sends them to the detector in a
//     DeadlockReport stamped with the view's epoch (and an empty report
//     once it has none left);
//  2. the detector keeps the latest report of each member (dropping those
//     of other epochs, older ones, and any not renewed for three report
//     intervals), and, when a report came in, searches their union for
//     cycles of parties, deterministically;
//  3. it asks the master of every edge of every cycle found whether the
//     edge still holds, and has held without a break since it was
//     observed (DeadlockConfirm);
//  4. for every cycle all of whose edges are confirmed, it picks the
//     victim, the waiting request of the party with the largest key (owner
//     id, else lock id) on the cycle, and asks its master to fail it
//     (DeadlockFail). The master fails it with ErrDeadlock, naming the
//     cycle, only if it is still the queued request that was confirmed.
//     The victim's granted locks stay; a conversion victim keeps its mode.
//     dlm_deadlocks_total{kind="cycle"} counts it on the victim's master,
//     and the detector logs every cycle it finds (debug) and breaks (info).
//
// Why one node, and why that one: edge chasing (probes sent from master to
// master along the edges) needs no central node, but it sends a probe per
// blocked request and hop, finds a cycle once per request on it (so the
// masters must agree on who breaks it), and still has to confirm what it
// finds, since the probes follow edges at different times. Collecting the
// edges at one node sends one message per node per interval, and only
// while requests wait long; the detector sees the whole graph, breaks
// every cycle of a round at once, and takes the victims out of the graph
// as it goes, so that a request is never failed to break a cycle an
// earlier victim broke already. The lowest-named member of the view is
// known to every member from the agreed view alone, without a message or
// an election, and changes only with the view; a view change drops every
// report and round, whose epochs then differ from the masters'. Safety
// does not rest on there being one detector: a stale or second detector
// can only fail requests on cycles that it confirmed, and picks the same
// victim of the same cycle.
//
// No false positives: a cycle reported existed when it was reported. Each
// edge carries identities that prove continuity: the waiter's lock and the
// generation of its queued request (every request or conversion queued
// gets a new one, gone once it leaves the queue), and the blocker's lock
// with its fencing token (a holder) or its request's generation (a
// request queued ahead). Fencing tokens strictly increase per resource and
// every grant or up-conversion gets a new one, so the same token means the
// blocker has been granted all along, only converting down, and conflict
// is monotone in the VMS lattice: if its mode still conflicts with the
// waiter's, every mode it held since did. Two requests queued all along
// keep their order. So a master confirms an edge only if it held at every
// moment between its observation and the confirmation (master.EdgeHolds;
// its property test checks exactly this). Every observation was made before
// its report was sent, so before the detector started the round; every
// confirmation is made after the detector asked for it, so after the round
// started. Hence at the instant the round started, every edge of the cycle
// held: the cycle existed then, and since each party on it was waiting, it
// still exists until a request of it ends. Masters confirm and fail only in
// the epoch of the edges, checked under the shard mutex that a recovery
// takes after it closes the gate, so a rebuilt table (whose generations
// start over) is never asked. TestDeadlockPhantomNotConfirmed has a cycle
// in the reports that is gone by confirmation time; TestDeadlockRandomized
// checks, each time a victim is chosen, that it is on a cycle of every
// table's edges taken at that moment.
//
// One victim per cycle: the master fails a request only by its
// generation, so a second attempt (a stale round, a duplicated message)
// finds a request already failed, or another one, and does nothing. The
// detector runs one round at a time and sends a round's failures before
// the next round's confirmations, on the same ordered connections, so a
// later round cannot confirm a cycle through a request already failed.
//
// Timing and limits: a cycle is broken about DeadlockWait plus one to two
// report intervals after it formed (2.75 s with the defaults in the tests),
// plus a confirmation round trip. A report carries at most wire.MaxEdges
// (1024) edges and about 256 KiB: a node with more long waits reports
// those of the oldest requests, and a cycle among the rest is found once
// older waits end. A round breaks at most 64 cycles; more wait for the
// next round.
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
// dlm_blocking_notifications_total; dlm_deadlocks_total by kind;
// dlm_limit_rejections_total by limit; dlm_cache_acquires_total by
// result; dlm_locks_lost_total; dlm_client_locks; dlm_mastered_resources and
// dlm_mastered_locks per lockspace; dlm_recovery_locks_rebuilt_total and
// dlm_recovery_locks_purged_total), the recovery package's (dlm_epoch,
// dlm_quorum, dlm_recoveries_total, dlm_recovery_phase_seconds by phase,
// dlm_evictions_total, dlm_view_proposals_total, dlm_resyncs_requested_total)
// and the transport's (dlm_transport_* and dlm_membership_*).
//
// # Status and lock dumps
//
// Node.Status says what a node is doing (serving, recovering, without
// quorum), its epoch and quorum, every configured member as it sees it
// (with the Tags each gossips), per lockspace the resources and locks it
// masters and the locks it holds, and its latest recoveries and deadlocks.
// Node.LockDump lists the resources it masters with their queues, as
// dlm_tool lockdump does; Lockspace.Dump one of them. dlmnode agent serves
// both as JSON (docs/operations.md).
package dlm
