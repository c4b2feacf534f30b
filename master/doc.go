// Package master is the lock table of the resources one node masters in one
// lockspace: the heart of a VMS-style distributed lock manager.
//
// # A pure state machine
//
// A Table has no goroutines, clock, network or context. Calls go in
// (Request, Convert, Release, Cancel, Renew, RenewSession, Tick, and the
// recovery calls);
// what they cause comes out. The call's own outcome is its return value;
// what it did to other locks (a queued request granted, a conversion failed,
// a holder asked to give way) accumulates as Effects, which the caller takes
// with Effects and delivers to the nodes that own those locks. This is the
// pattern of etcd's raft: the table decides, the caller does the I/O. Time
// enters only as ticks given to Tick. A Table is not safe for concurrent
// use; its owner serialises calls (the dlm package holds a mutex per table).
//
// # Resources and queues
//
// A resource exists while it has a lock. It has three FIFO queues:
//
//	granted     locks holding their granted mode
//	converting  granted locks waiting to change mode (they still hold the old one)
//	waiting     new requests not yet granted
//
// and a lock value block (LVB) with a sequence number and a valid flag.
//
// # Grant rules
//
// The VAXcluster rules, as the Linux DLM's _can_be_granted states them:
//
//   - A new request is granted at once only if its mode is compatible with
//     the granted mode of every lock on the granted and converting queues
//     and both queues are empty: no barging past a waiter. EXPEDITE (new NL
//     requests only) skips the queues.
//   - A conversion processed for the first time is granted in place if the
//     new mode is compatible with the granted mode of every other lock, even
//     when other conversions are queued. With QUECVT it queues behind them.
//     A down-conversion (to a weaker mode) is always granted in place.
//   - When locks leave or change mode, the converting queue is served first,
//     strictly in order from its head, then the waiting queue, strictly in
//     order, each stopping at the first request that cannot be granted.
//   - NOQUEUE fails a request (ErrNotQueued) instead of queueing it.
//   - A conversion that would wait behind a conversion its own granted mode
//     blocks is a conversion deadlock: it fails at once with ErrDeadlock,
//     keeping its granted mode, or with CONVDEADLK its lock is demoted to NL
//     (Result.Demoted) and the conversion goes on from there.
//   - Cancel ends a queued request (a conversion reverts to its granted
//     mode); a timeout does the same when Tick passes its deadline.
//
// Every request that is queued ends with exactly one effect for its lock:
// EffectGranted or EffectFailed (or EffectReleased, when the table itself
// releases the lock, ending any conversion with it).
//
// # Blocking notifications
//
// When a request is blocked, each granted lock that blocks it (including
// converting locks, which still hold their granted mode) gets an
// EffectBlocking carrying the strongest mode it blocks. A lock hears once
// per blocking episode: again only for a stronger mode, or after it is
// granted anew, which starts a new episode (the Linux DLM's highbast rule).
//
// # TTLs and sessions
//
// A lock with a TTL is released by Tick (EffectReleased, ErrExpired) once
// its TTL has passed since its grant or its last Renew. A lock in a
// session of its node (Request.Session) lives instead by the session's
// lease in the table: a granted lock of the session points at the lease's
// one timer and costs the lease an id, and RenewSession renews every lock
// of the session at once. The lease runs out a TTL after its last renewal
// or its latest grant, whichever is later, and takes the session's granted
// and converting locks with it; a request of the session still waiting
// then stays, and its TTL runs from its grant.
//
// # Semaphores
//
// A request with Permits set asks for Count permits of a counting
// semaphore instead of a lock in a mode. A semaphore is a resource like
// any other (mastered, queued, timed out, purged, restored), with its own
// rule: a request is granted at once only if nobody waits and its permits
// are free, and waiting requests are granted strictly in order, so a
// request for 3 permits is never overtaken by a later one for 1. Every
// grant gets a fencing token. A resource is a semaphore or a lock resource
// while it has locks (ErrKind), and every request carries the semaphore's
// permit count, so one that disagrees is refused (ErrPermitsMismatch) and
// the count survives recovery in the reports. semaphore.go has the rest.
//
// # Lock value block
//
// Read (copied to the holder) when a lock is granted a mode above NL from a
// weaker one, and written (from the holder) when a PW or EX lock converts
// down or is released with LVBWrite, following the Linux DLM's
// dlm_lvb_operations table. Each write bumps the sequence. LVBInvalidate
// marks it not valid; so does the loss of a PW or EX holder (purge, TTL
// expiry) and a rebuild with no trustworthy copy. The next write makes it
// valid again. Its size is capped per lockspace (Config.MaxLVB).
//
// # Fencing tokens
//
// Every grant of a new lock and every up-conversion (including the middle
// conversions PR<->CW) gets a fencing token: a uint64 from one counter per
// table, so tokens strictly increase per resource, and also across a
// resource being freed and created again. RaiseTokenFloor sets a floor below
// which the table never issues; recovery raises it above anything an
// earlier master could have issued (the dlm package sets it from the wall
// clock and the survivors' reports). A down-conversion keeps the lock's
// token.
//
// # Owners and deadlock detection
//
// Every lock has an owner (OwnerID zero: the lock is its own owner).
// WaitEdges reports, for every queued request, the holders it waits for and
// the request queued just ahead of it, so a detector can follow owners
// across resources and nodes and find cycles; WaitEdgesQueuedBy reports
// those of the requests queued before a given tick only, oldest first, at
// the cost of what it reports (the table keeps its queued requests in a
// list by age).
//
// Each edge carries identities: every request or conversion queued gets a
// generation, new in the table, and the blocker is named by its fencing
// token (a holder) or its request's generation (a request queued ahead).
// EdgeHolds confirms from them alone that an edge observed earlier has held
// without a break since (docs/design/deadlocks.md in the repository says
// why), and FailRequest fails a
// request only if it is still the request of the generation given. A
// detector that observes edges, then confirms them, then fails one request
// of a cycle can thus neither report a cycle that did not exist nor fail a
// request it did not observe. The dlm package runs that protocol across
// nodes.
//
// # Recovery
//
// LocksOf lists a node's locks; PurgeNode removes them (marking values that
// a purged PW/EX holder could have been changing not valid); Restore and
// RestoreValue rebuild resources from what survivors report, and
// FinishRecovery resolves them (value from the freshest copy held above CR,
// conversions granted without regard to order, conversion deadlocks
// broken); Resources enumerates what the table masters; Drop gives a
// resource up when its mastery moves.
//
// # Invariants
//
// After every call:
//   - granted modes on a resource (granted and converting queues) are
//     pairwise compatible;
//   - each lock is on exactly one queue of exactly one resource;
//   - the head of the converting queue cannot be granted, and if that queue
//     is empty, neither can the head of the waiting queue (no lost wakeup);
//   - tokens issued on a resource strictly increase;
//   - a resource's value sequence never goes back while the resource exists;
//   - on a semaphore, the permits granted are at most its permits, and the
//     head of its queue asks for more than are free.
//
// TestTableProperties checks them on random histories, and
// TestSemaphoreProperties those of semaphores, against a plain model.
//
// # Limits and bad input
//
// Names are capped (Config.MaxNameLen), values too (Config.MaxLVB), locks
// per requesting node (Config.MaxLocksPerNode) and queued requests per
// resource (Config.MaxWaitersPerResource). Every bad input returns a
// distinct sentinel error and leaves the table exactly as it was.
//
// # Memory
//
// A lock and a resource are 64 bytes each; locks are indexed per
// requesting node by the id the node chose; freed locks and resources are
// recycled. BenchmarkMillionLocks measures what a granted lock on its own
// resource costs all told; docs/BENCHMARKS.md has the figure.
package master
