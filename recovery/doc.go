// Package recovery keeps a dlm cluster consistent across membership
// changes: it agrees on views (membership epochs), keeps every node's
// quorum lease, holds back a removed node's locks for the lock-delay, and
// runs the recovery of each new view in phases separated by barriers. It
// decides when; the node (the Host) moves the locks. It owns no public API.
//
// # Views and epochs
//
// memberlist is gossip: every node decides liveness for itself, and a
// leave is no proof of death (membership.md, traps T4 and T7). So its
// events only propose. The coordinator (the lowest-named member of the
// committed view that membership says is up; before the first view, the
// lowest-named node up) proposes (epoch, members) whenever the members it
// sees differ from the committed view. A node promises at most one
// proposal per epoch, and only for an epoch above anything it promised or
// committed. A proposal commits when every member of the new view has
// promised it and they are a quorum of the configured cluster (N/2+1): two
// proposals for one epoch cannot both commit, because their quorums share a
// node that promised only one. Every lock message carries its epoch; a node
// drops lock messages of older epochs (the senders' recovery reports say
// whatever they still hold or wait for).
//
// Two rules keep a node that was cut off from disrupting the others when it
// comes back. Its memberlist may still report dead the nodes it could not
// reach, and in its stale view it may be the coordinator. So a node refuses
// a proposal whose previous epoch is older than its own committed view
// unless the proposer (with its boot) is a member of that view (a member
// that only missed a commit); and a node defers the coordinator role only
// to a lower-named node that runs the boot recorded in the view, so a
// restarted node, whose proposals the others refuse, does not stall the
// view. The refused node learns from heartbeat acknowledgements that it
// was left out and the current view's coordinator adds it back. Once added
// back it may coordinate again with its memberlist still stale, so a third
// rule: a node refuses a proposal that leaves out a member of its committed
// view that its own membership sees up in the same boot. A node that really
// failed is marked dead by every survivor within a gossip round or two of
// the first (memberlist broadcasts the death), so this costs a real failure
// at most a proposal retry; a flap after a heal costs nothing.
//
// A node that finds views were agreed without it (a peer in a newer view
// says it is not a member, or a proposal's previous epoch is newer than its
// own and it did not promise it) is a zombie: it drops all lock state
// before it promises anything, and rejoins as a member with nothing.
//
// # The quorum lease
//
// Every HeartbeatInterval a node sends a heartbeat to every peer; a peer
// acknowledges it as a member only if the sender (with its boot) is in the
// peer's committed view. A node serves (masters, grants, holds) only while
// Q−1 peers acknowledged, as a member, a heartbeat it sent within the last
// Lease (L), on its own monotonic clock, timed from before the send. When
// the lease runs out the node stops granting, fails its waiting requests
// with ErrNoQuorum and reports every lock it holds lost: a minority side of
// a partition cannot gather Q−1 acknowledgements, and a node that was
// paused loses its lease as it wakes.
//
// # The lock-delay
//
// The majority may give a removed node's locks to others only when that
// node's lease has certainly run out. A survivor that gave the node its
// last acknowledgement at time a (on the survivor's clock) waits until
//
//	a + L·(1+ρ)/(1−ρ) + δ + s
//
// where ρ is the largest clock-rate error between two nodes (ClockDrift),
// δ the longest message delay and s scheduling slack (MaxDelay covers
// both). The holder's lease ends at most L after it sent the heartbeat that
// a answered, measured on a clock that may run slow by ρ, while the
// survivor's may run fast by ρ. Every survivor waits out its own last
// acknowledgement before it reports phase 1, and nothing is re-granted
// before every member reported it, so no survivor's acknowledgement can
// still be keeping the removed node's lease alive. Never is "memberlist
// said it left" enough on its own.
//
// With the defaults (L = 1.5 s, ρ = 1%, δ+s = 250 ms) the lock-delay is
// 1.5·1.01/0.99 + 0.25 ≈ 1.78 s after the last acknowledgement. A crashed
// node is detected in about 1–2 s (transport/membership), so the locks of a
// crashed node are free again roughly 1.8–2.2 s after it stopped.
//
// # Recovery phases
//
//	member:       Suspend; Report; wait out the lock-delay of each removed
//	              member; status 1
//	coordinator:  every member at 1: phase 1
//	member:       Rebuild; status 2
//	coordinator:  every member at 2: phase 2
//	member:       Resume
//
// A newer view aborts a recovery wherever it stands and the next starts
// over. Lost statuses or phases are repeated. A coordinator that dies
// leaves a view whose members see it gone; the next coordinator proposes a
// newer view, and its recovery starts from the reports again.
//
// # What is assumed
//
// Clock rates differ by at most ρ; messages and scheduling take at most
// δ+s; a node's monotonic clock never stops while it runs. Fencing tokens
// are time-based at their top (see dlm's tokenFloor): wall clocks must agree
// to better than a recovery's lock-delay. A node that restarts within the
// same boot is not possible (a boot ID is random per process start). A
// restarted node forgets what it promised; it may promise again for an
// epoch it promised before it crashed, so in theory two views could commit
// for one epoch if the coordinator that got its old promise and the one that
// got its new one reach quorums that meet only in it. Epochs only order
// views; the safety of locks rests on the lease and the lock-delay, which
// do not depend on epochs being unique.
package recovery
