// Package recovery keeps a dlm cluster consistent across membership
// changes: it agrees on views (membership epochs), keeps every node's
// quorum lease, holds back a removed node's locks for the lock-delay, and
// runs the recovery of each new view in phases separated by barriers. It
// decides when; the node (the Host) moves the locks. Package dlm is its
// user; applications use dlm.
//
// # Views and epochs
//
// Membership events (memberlist's gossip) only propose. The coordinator,
// the lowest-named member of the committed view that membership sees up,
// proposes (epoch, members) whenever those differ from the committed view;
// a proposal commits when every member of the new view promised it and
// they are a quorum (a majority) of the configured cluster. A round ends
// at the first member that cannot promise, and at once when membership
// reports one of its members gone or running another boot (it asked the
// boot that is gone); the next round names what membership then sees. Every lock
// message carries its epoch, by which a node drops those older than what
// they could change (see below). The first view waits up to Config.Settle for every configured
// member once a quorum is up, so that a cluster starting together forms one
// view. A node that finds views were agreed without it (a zombie) drops
// all lock state and rejoins with nothing.
//
// # The quorum lease and the lock-delay
//
// A node serves (masters, grants, holds) only while a quorum of the
// configured members, itself included, acknowledged as a member a
// heartbeat it sent within the last Lease (L), on its own monotonic clock.
// When the lease runs out the Host is told (LeaseLost): it stops granting,
// fails its waiting requests and reports its locks lost.
//
// A removed node's locks are re-granted only when its lease has certainly
// run out: a survivor that last acknowledged it at time a waits until
//
//	a + L·(1+ρ)/(1−ρ) + δ + s
//
// (Config.LockDelay), where ρ is ClockDrift and δ+s is MaxDelay. With the
// defaults (L = 1.5 s, ρ = 1%, δ+s = 250 ms) that is about 1.78 s after
// the last acknowledgement; with failure detection, a crashed node's locks
// are free again roughly 1.8 to 2.2 s after it stopped.
//
// # Recovery phases
//
//	member:       Prepare (every member's lock state); Suspend; Report;
//	              wait out the lock-delay of every node not in the view;
//	              status 1
//	coordinator:  every member at 1: phase 1
//	member:       Rebuild; status 2
//	coordinator:  every member at 2: phase 2
//	member:       Resume
//
// A newer view aborts a recovery wherever it stands and the next starts
// over; runs never overlap. Lost statuses or phases are repeated. The Host
// (dlm) moves only what changes master: from every member's state, learned
// in Prepare, each member computes the same plan; the resources whose
// master keeps their table are served throughout, the others wait from
// Suspend to Resume. A removed node's locks in the tables kept are purged
// at Rebuild, after every member waited out the lock-delay.
//
// # Why serving the others during a view change is safe
//
// A resource is granted on by at most one table at a time: a table is kept
// only by the resource's master in the new view, and only if that master
// rebuilt it itself and no member holding locks reported it elsewhere since
// (a member that went through a view the master did not is a zombie and
// drops its lock state; the others purge it). Every other table of the
// resource was dropped before any member reported it, and its new master
// grants only after the barrier that follows every member's report and
// lock-delay. Messages older than what they could change are dropped: a
// holder drops answers of an epoch before it reported the lock, a master
// requests of an epoch before it rebuilt the bucket or purged the sender.
// A removed node's locks go only after every member waited out the
// lock-delay from its own last acknowledgement of that node, so its lease
// has ended. The argument, step by step, and the invariants the nemesis
// tests check, are in docs/design/recovery.md in the repository.
//
// # What is assumed
//
// Clock rates differ by at most ρ; messages and scheduling take at most
// δ+s; a node's monotonic clock never stops while it runs. dlm's fencing
// tokens start from the wall clock (see "Fencing tokens" in dlm's package
// doc): for them to increase across a restart of the whole cluster, wall
// clocks must agree to better than the time such a restart takes. The
// protocol's rules, the derivation of the lock-delay and why the safety of
// locks does not rest on epochs being unique are in
// docs/design/recovery.md in the repository.
package recovery
