// Package dlm is a distributed lock manager in the tradition of the OpenVMS
// lock manager and the Linux kernel DLM: VMS lock modes with conversions,
// FIFO queues, lock value blocks, blocking callbacks and fencing tokens, on
// a cluster of nodes that each master a share of the resources.
//
// # Using it
//
//	cfg := dlm.DefaultConfig()
//	cfg.Name, cfg.Members, cfg.Seeds = "node1", []string{"node1", "node2", "node3"}, seeds
//	node, err := dlm.Start(ctx, cfg)   // returns once a quorum of Members agreed a view with this node
//	defer node.Close()                 // releases this node's locks
//	ls, _ := node.Lockspace("fs1")
//	lk, err := ls.Lock(ctx, "inode/42", modes.PR, dlm.OnBlocking(func(want modes.Mode) { ... }))
//	store.Write(lk.Token(), data)      // the store refuses older tokens
//	err = lk.Convert(ctx, modes.EX)
//	lk.SetValue(v)                     // the value block, written back on unlock
//	err = lk.Unlock()
//
// Start returns once this node is a member of a view agreed by a quorum (a
// majority) of Members and holds its quorum lease, not once every member
// is up: the first view waits about a second for the members not up yet,
// and members that start later join the cluster in a later view.
//
// TryLock fails at once (ErrNotQueued) instead of waiting; a context ends a
// wait (ErrCancelled or ErrTimeout, which also match the context's error).
// A request made while this node has no quorum waits for quorum to return,
// as one to an unreachable master waits for the master, and a conversion
// that the resource's master refuses for want of quorum is asked again
// (FailFast fails at once with ErrNoQuorum instead). Owners group the locks of one
// transaction, optionally reentrant; Election is leader election on one
// lock.
//
// # What else is built on the locks
//
//   - Lock.Context: a context cancelled the moment the lock is lost or
//     unlocked, to run the protected work under.
//   - Semaphore: a counting semaphore of N permits, FIFO across nodes with
//     no barging, a fencing token per acquisition, mastered and recovered
//     like any resource (its permit count comes with every request).
//   - RWMutex: a reader/writer lock over PR and EX, shaped like
//     sync.RWMutex, with Upgrade (PR→EX in place; two upgraders at once
//     is a conversion deadlock, and one fails with ErrDeadlock) and
//     Downgrade (EX→PR in place). Mutex is a sync.Locker over EX, with
//     LockContext.
//   - Lockspace.LockAll: several locks, all or none, taken in one order by
//     resource name so that LockAll calls never deadlock each other.
//   - Lockspace.Describe: the granted, converting and waiting locks of a
//     resource, from its master: mode, node, owner, token, how long each
//     request has waited.
//
// Package dlm/dlmtest starts a cluster inside one process, on an in-process
// network (inside testing/synctest, on fake time) or on loopback TCP, for
// the tests of code that uses dlm.
//
// # Lock value blocks
//
// Every resource has a value block of up to the lockspace's MaxLVB bytes
// (64 by default), kept by its master, with a sequence number that counts
// writes and a valid flag. A grant or up-conversion to a mode above NL
// copies it to the lock (Value, ValueSeq); a PW or EX holder sets a new
// value (SetValue) that is written when it converts down or unlocks, or
// marks it not valid (InvalidateValue). The rules, in the VMS and Linux
// DLM tradition:
//
//   - The value lives as long as the resource has a lock, in any mode: an
//     NL lock holds nothing but keeps the value. When the last lock goes
//     (released, or lost with its node), the value goes with the resource,
//     and a resource created anew starts with an empty value (zero bytes,
//     sequence 0) that is valid. An empty value therefore says "never
//     written since the resource was created"; an application whose value
//     must outlive its users keeps an NL lock on the resource.
//   - The value is not valid after the loss of a holder that could have
//     been writing it: a PW or EX lock purged with its node, or expired
//     (TTL), while other locks keep the resource. It stays not valid,
//     through grants, until a PW or EX holder writes it again.
//   - When a resource's master is lost and the resource is rebuilt at a new
//     master from its holders' reports, the value is the freshest copy held
//     by a survivor granted above CR (CW, PR, PW or EX: such a holder read
//     it, and nobody can have changed it since). If only NL and CR locks
//     survive, no one can vouch for the value: it is not valid. Nor does a
//     holder whose conversion down to CR or below was on its way when the
//     master was lost (the master may have granted it and let another
//     writer in). It is never handed out as valid and empty unless it was.
//
// # Where requests go
//
// Every resource has one master node, chosen by a hash of the lockspace and
// the resource name over the members of the current view (MasterOf says
// which). A request for a resource this node masters is served in-process;
// otherwise it is one message to the master and one back. An unlock or a
// cancel is one message nobody waits for; the unlock of a lock no other
// request waited for may wait up to 20 µs in a busy process (a millisecond
// in an idle one) to leave with this node's next message to the same
// master, so the master may count the lock as held that much longer.
// Messages between two nodes are delivered in the order they were sent: an
// unlock cannot overtake the lock request it follows.
//
// Lock, Convert and Unlock are safe for concurrent use; goroutines working
// on different resources rarely contend. Blocking callbacks (OnBlocking)
// run on one goroutine per node, never under the library's locks: the
// callbacks of one lock come in the order the master sent them, and a
// callback may call the lock API. A slow callback delays the others, so it
// should hand long work to a goroutine of its own.
//
// The design (mastering, shards, which goroutine handles a message) is in
// docs/design/mastering.md in the repository.
//
// # Caching shared locks
//
// A Cache (Lockspace.NewCache) shares one lock per resource among this
// node's readers, the way GFS2's glocks sit over the kernel DLM: the node
// takes one lock in a shared mode (PR by default; CR or CW also share) at
// the master, and every Acquire while it is granted is a Hold on it,
// granted with no message. The lock stays cached when its last hold ends,
// up to MaxIdle idle locks, until a writer wants the resource: the
// writer's request retires the cached lock and waits its turn in FIFO
// order, as any request does, so readers cannot starve it.
//
// A hold is not a lock at the master: it shares the fencing token and
// value block of the node's grant, has no TTL or conversion, and has no
// owner that deadlock detection could follow (see Cache for what that
// rules out). dlm_cache_acquires_total{result="hit"|"miss"} counts holds
// taken on cached locks and locks requested. docs/design/caching.md has
// the invariants.
//
// # Fencing tokens
//
// Lock.Token is a uint64 that strictly increases for every grant or
// up-conversion of a resource (and Permit.Token for every acquisition of a
// semaphore), across recoveries and across a restart of the whole
// cluster. A store that remembers the highest token it has accepted and
// refuses lower ones is safe against a holder that paused past the end of
// its lock (a GC pause, a partition): the lock manager cannot stop a
// paused process from acting, but the store can refuse it.
//
// Tokens stay below 2^53, so a JSON decoder into float64, JavaScript and
// Redis Lua compare them exactly. Each lock table (one per shard of a
// lockspace on a node) starts its tokens, when it is made (at the node's
// start and at every recovery), at the number of half-microseconds since
// 2000-01-01 UTC or above the highest token issued before, whichever is
// higher, and counts up by one per grant. Hence:
//
//   - the bound: a token is below 2^53 until the year 2142 as long as no
//     table issues more than two million tokens a second on average since
//     it was made; at 100,000 grants a second (on one resource, or on all
//     of a table's together), a table made at any time in the next fifty
//     years stays below 2^53 for fifty years of uptime;
//   - across recoveries, tokens increase because the survivors report the
//     highest token their tables issued to the new masters;
//   - across a restart of the whole cluster (nothing survives), tokens
//     increase provided the nodes' wall clocks agree to better than the
//     time between the last grant before the restart and the first after
//     it (a restart takes seconds), and no table issued more than two
//     million tokens a second on average since it was made (one that does
//     runs its counter ahead of the clock by the excess, and a restart
//     must come that much later). No data directory is needed.
//
// Token is the same number as a type that marshals to JSON as a decimal
// string, for stores that take no chances with numbers.
//
// # TTL and Lost
//
// A lock may carry a TTL (WithTTL): its master releases it unless it is
// renewed (Renew, KeepAlive). The holder's lease ends earlier, on its own
// clock, by the configured clock drift, and Lost is closed then, so a
// holder that watches Lost stops before any master could release the lock.
// Lost also closes when the master releases the lock, the node loses its
// quorum lease, or the node closes.
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
// owner. Owner A waits for owner B when a request of A is queued behind a
// lock of B that holds a conflicting mode, or behind a request of B queued
// ahead of it (the queues are FIFO). A cycle of owners each waiting for the
// next can never be granted, so one request of it fails with ErrDeadlock,
// naming the cycle: the waiting request of the owner with the largest id
// on it. The victim's granted locks stay; a conversion victim keeps its
// mode. That includes a cycle of one: an owner (not Reentrant) asking again
// for a resource it holds in a conflicting mode.
//
// The model is the transaction's: an owner waiting for a lock changes none
// of its other locks until the wait ends. An owner whose goroutines lock
// and unlock independently may be chosen as the victim of a cycle another
// of its goroutines was about to break.
//
// Only requests that have waited Config.DeadlockWait are looked at (zero
// turns detection across resources off); a cycle is broken about
// DeadlockWait plus one or two report intervals (DeadlockWait/4, at least
// TickInterval) after it formed. A request is failed only if its cycle
// existed: there are no false positives. dlm_deadlocks_total{kind} counts
// both kinds. The algorithm, and the proof that a reported cycle is real,
// are in docs/design/deadlocks.md in the repository.
//
// # Errors and limits
//
// Errors are sentinels to test with errors.Is. Configured limits (locks
// per node, locks per node in a lockspace, waiters per resource, value
// block size) refuse requests with ErrLimit and count them in
// dlm_limit_rejections_total, so a flood of requests costs errors, not
// memory. An empty name, or one longer than LockspaceConfig.MaxNameLen, is
// ErrInvalidName; an option that makes no sense for the call is
// ErrInvalidArgument.
//
// # Membership changes and failures
//
// The nodes agree on views (membership epochs) and each node keeps a quorum
// lease: it serves only while a majority of Members acknowledged it
// recently. A node that loses its lease (a partition's minority side, a
// node that was paused) stops granting, ends its waiting requests with
// ErrNoQuorum (a new request made without FailFast is made again once
// quorum is back) and reports its locks lost (Lost closes). A view change
// moves only the resources whose master changes (a leaving node's share,
// or a joining node's): their holders report them to the new master, which
// rebuilds them, and calls on them wait for the recovery; every other
// resource keeps its table and is served throughout. A removed node's
// locks and permits go to others only after the lock-delay, when its lease
// has certainly run out: with the default timing a crashed node's locks
// are free again about 1.8 to 2.2 s after it stopped; only what waits
// behind them waits that long. A broken connection between two members
// loses nothing (the next one resends it); a request whose master cannot
// be reached waits (within its context) and is sent again, or is carried
// by the recovery. A reported lock its new master cannot restore is lost,
// and its holder is told (Lost closes).
//
// The protocol, its timing and what it assumes are in
// docs/design/recovery.md in the repository.
//
// # Metrics
//
// A node registers its metrics with Config.Registerer (none if nil): its
// own (dlm_requests_total by operation, mode and result; dlm_lock_seconds,
// the time to a grant by mode and by whether the master was local;
// dlm_blocking_notifications_total; dlm_deadlocks_total by kind;
// dlm_limit_rejections_total by limit; dlm_cache_acquires_total by
// result; dlm_locks_lost_total; dlm_lock_held_seconds, the time from a
// grant to the unlock or the loss, by mode, and dlm_permits_held_seconds
// for semaphore permits; dlm_lock_contended_total, the requests this node's
// tables could not grant at once and queued, by lockspace;
// dlm_permit_requests_total by operation and result; dlm_client_locks;
// dlm_mastered_resources and dlm_mastered_locks per lockspace;
// dlm_recovery_locks_rebuilt_total, dlm_recovery_locks_purged_total,
// dlm_recovery_locks_lost_total and dlm_recovery_moving_buckets), the
// recovery package's (dlm_epoch,
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
