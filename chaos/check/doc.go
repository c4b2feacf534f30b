// Package check decides whether a fault-injection run of the lock manager
// was safe. A test records into a History what its clients did and saw
// while nodes were killed, paused and partitioned; afterwards Check (or
// Require) looks for violations and explains each one.
//
// # Recording
//
// Every operation is a call and exactly one resolution:
//
//	op := h.Acquire(client, node, "r", modes.EX) // just before calling Lock
//	lk, err := ls.Lock(ctx, "r", modes.EX)
//	switch {
//	case err == nil:
//		op.Granted(lk.Mode(), lk.Token())
//	case errors.Is(err, context.DeadlineExceeded):
//		op.Unknown() // it may have been granted after all
//	default:
//		op.Failed(err) // definitely not granted
//	}
//	...
//	h.Write(client, node, "r", lk.Token(), v).Accepted() // the fenced store's answer
//	h.Release(client, node, "r").Released()
//
// and, when they happen, h.Lost(client, node, "r") (the lock's Lost
// channel closed), h.Crash(node) (just before the node is killed if it
// runs in the test's process, whose clients would record its death as
// failures; once it is gone if it runs in a process of its own, which
// records nothing after), h.Note or h.Span (nemesis events, shown on the
// visualizations). Record a call before it is sent and its resolution
// after the answer arrived, so that the history's order is the real order.
// A client id names one lock handle: a client may hold at most one lock
// per resource at a time. A hold on a node-level cache of shared locks
// (dlm.Cache) is recorded with op.GrantedShared: the client holds the lock
// like any other, under the token of the node's grant, which other holds
// share.
//
// Timestamps come from the clock given to NewHistory: time.Now, which in a
// testing/synctest bubble is the bubble's fake clock. Many events then
// share a timestamp. Following porcupine, operations are closed intervals
// [call, return], so operations of different clients at equal timestamps
// are concurrent; a client's own operations keep the order in which they
// were recorded.
//
// # Belief intervals
//
// A client believes it holds a lock from the moment a grant returns to it
// until the earliest of: its release call, its Lost, its node's crash. It
// is this belief that a client acts on, and that a lock service must keep
// exclusive: a DLM that lets two clients believe at once in incompatible
// modes is unsafe even if its own tables never showed both locks granted.
// During a conversion the client may rely only on what both modes give it
// (the old mode for an up-conversion, the new one for a down-conversion,
// CR between PR and CW); the new mode starts when the conversion returns.
//
// Beliefs are not the service's view. A paused holder still believes it
// holds the lock when its lease has run out; that is unavoidable, and what
// fencing tokens are for. A test whose nemesis pauses holders beyond their
// lease should record Lost at the moment the holder's lease ran out by
// its own clock, or record h.Freeze(node) when it freezes the holder's
// process (its beliefs end there, as at a crash, and what it does when it
// wakes is recorded as new operations), or leave CheckOverlap out; in
// every case the fenced store must refuse the late writes.
//
// # Several processes
//
// Clients in several processes record into a history each, all with one
// origin (StartAt) and one clock that the processes share (CLOCK_MONOTONIC
// on Linux), each journaled to a file; MergeJournals replays the journals
// onto one timeline into the history that is checked.
//
// # Unknown outcomes and crashes
//
// This follows Jepsen (jepsen-io/etcd, lock.clj with knossos's mutex
// model; verification.md section 2, "Making lock histories checkable"). An
// operation that ended without an answer (a timeout, a broken connection,
// a killed node) is Unknown and its return time is infinity, like Jepsen's
// :info: it may have taken effect at any moment after its call, or never.
// Crash(node) makes every call in flight on the node Unknown (what such a
// call returns afterwards is ignored) and gives every lock the node's
// clients believed they held a synthetic release, a Lost at the crash
// instant: from then on the survivors may grant the lock again. A grant to
// another client that must be ordered before that release is a violation.
// An unlock of a lock the client no longer believed it held (after its
// Lost, or to clean up after an Unknown acquire) frees the lock if it was
// held and is never itself a violation. A failed unlock may have found the
// lock already lost, so it leaves the lock held or free. A conversion that
// returned after its client was told, while it was in flight, that the lock
// was lost is checked as Unknown: a failure may only report the loss, and
// a grant may have come before the loss (a stalled process finds both
// answers at once, in no telling order) or after it; either way the client
// believes in neither mode from the Lost on.
//
// # What is checked
//
//   - CheckOverlap: no two belief intervals of different clients on one
//     resource overlap in incompatible modes. Intervals are compared
//     strictly: one ending at t and one starting at t do not overlap. The
//     report names both clients, nodes, modes, tokens and times.
//   - CheckTokens: per resource, every grant and up-conversion has a token
//     above that of every grant that returned before it was called (or
//     before it, in its client's own order), and no two grants share one.
//     Down-conversions keep their token; shares (GrantedShared) are not
//     grants here.
//   - CheckStore: the fenced store accepted no write whose token is below
//     that of a write accepted before it, and rejected a write only when a
//     write with a higher token could have been applied before.
//   - CheckModesModel, CheckMutexModel, CheckRegisterModel: porcupine
//     linearizability checks of each resource's lock operations and each
//     store key's writes and reads against ModesModel, MutexModel (EX-only
//     resources) and RegisterModel. These see what the direct checks do
//     not, in particular operations of Unknown outcome, but can only say
//     that no order works; an illegal result names the first operation no
//     legal order could place and writes porcupine's HTML visualization.
//   - CheckPermits and CheckSemaphoreModel: the permits of a counting
//     semaphore that its clients believe they hold never add up to more
//     than it has, directly on the belief intervals and under
//     SemaphoreModel. Permits are recorded with History.AcquirePermits and
//     Op.GrantedPermits, released and lost as locks are, and their tokens
//     are checked with the locks'. A name is a semaphore or a lock
//     resource in one history, with one permit count (CheckHistory
//     otherwise).
//
// A history recorded wrongly (an operation resolved twice, one client id
// holding two locks on a resource) is reported as CheckHistory.
//
// # Beyond the history's own checks
//
// A chaos run against real processes (chaos/run) needs a few more
// measures, over the same history:
//
//   - MeasureAvailability: the share of time slots in given windows (while a
//     majority was up and connected, say) in which a probe lock was
//     granted within a bound, and the same for each probe resource alone
//     (PerResource);
//   - TimeToGrant: for each Fault, how long until a lock was granted again
//     (the lock a killed holder held, to a client of another node);
//   - CheckCounter (CheckCounterHeld): a counter kept in a lock value
//     block and incremented under EX counts exactly the acknowledged
//     increments, unless the lock manager flagged the value not valid, or
//     the value read is empty after a moment when no client believed it
//     held a lock on the counter (the value lives only while a lock is on
//     its resource);
//   - CheckElection: what readers of an election were told is neither a
//     phantom, nor stale, nor going back.
//
// A History can keep a journal of its recording (Journal): JSON lines that
// ReadJournal replays into the same history, so a run's history can be
// stored, checked again, and edited.
//
// # Limits
//
// Linearizability checking is NP-hard. Check partitions histories per
// resource and store key, and bounds porcupine by Options.Timeout and by
// Options.MaxSteps model steps per resource. Inside a synctest bubble the
// fake clock stands still while porcupine computes, so there only MaxSteps
// bounds it. A model that runs out is inconclusive, which fails the check
// unless Options.AllowInconclusive says otherwise. The lock models hold
// at most MaxClients (32) clients per resource at once; a client done with
// a resource (all its operations returned, the last a release) leaves its
// place to clients called after that, and a resource with more clients at
// once is inconclusive. Histories with many concurrent Unknown operations on one
// resource are the expensive ones; before porcupine runs, Check leaves out
// what cannot change its verdict (failed acquires, Unknown acquires that
// nothing later relies on) and lets releases of unknown outcome take effect
// at their call, which the lock models' monotonicity allows.
//
// The models are lenient where the history cannot tell: an Unknown
// operation may be placed anywhere after its call, including never, and
// operations of different clients at one timestamp in either order. The
// register model also sees one client's writes at one timestamp as
// concurrent; the direct store check uses their recorded order.
package check
