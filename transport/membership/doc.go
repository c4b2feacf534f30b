// Package membership wraps hashicorp/memberlist: it finds the cluster's
// nodes, detects failures and reports changes as Events. It only proposes
// views; agreeing on one (epochs, quorum) is the recovery layer's job, and a
// Leave here is memberlist's opinion, not proof of death (membership.md T4,
// T7).
//
// # Node metadata
//
// Every node gossips a Meta: cluster ID, boot ID (random per process start),
// the links' protocol version and the links' address, in a compact binary
// form of at most 331 bytes (memberlist panics above 512, trap T8). Meta is
// decoded and validated on receipt; a node whose meta does not decode, or
// names another cluster, is refused in NotifyAlive and NotifyMerge, so it
// never becomes a member and never produces an event.
//
// # Events
//
// memberlist calls its event delegate under its node lock (trap T2), so the
// delegate only copies the node onto an unbounded queue and returns. One
// goroutine drains the queue and calls Config.OnEvent in order. That
// goroutine also remembers each alive member's boot ID: a node that crashed
// and came back before the failure detector noticed shows up in memberlist
// only as a metadata update (trap T3); membership reports it as a Restart
// carrying the old boot ID, which the DLM must treat as the old incarnation
// leaving.
//
// # Healing long partitions
//
// memberlist forgets dead nodes after GossipToTheDeadTime and never contacts
// them again, so a partition longer than that never heals by itself (trap
// T6). Every RejoinInterval (default GossipToTheDeadTime/2 = 5 s) the seeds
// that are not alive members are joined again. After a heal, views agree
// within RejoinInterval + TCPTimeout + a little gossip (7 s with the
// defaults; TestMembershipHealsLongPartition checks it).
//
// # Failure detection timing
//
// memberlist's suspicion timeout (util.go, suspicion.go) is
//
//	min = SuspicionMult × max(1, log10(max(1, n))) × ProbeInterval
//	max = SuspicionMaxTimeoutMult × min
//	k   = SuspicionMult − 2 confirmations expected; k = 0 when n − 2 < k
//
// The timer starts at max and shrinks towards min as independent
// suspicions from other members confirm it (it is min at once when k = 0).
// The defaults here aim at detecting a crash in under 2 s on a LAN:
//
//	ProbeInterval 200 ms, ProbeTimeout 100 ms, SuspicionMult 3,
//	SuspicionMaxTimeoutMult 2, GossipInterval 100 ms, IndirectChecks 3
//	n ≤ 10: min = 3 × 1 × 200 ms = 600 ms, max = 1.2 s, k = 1
//	        (n = 3: n − 2 = 1 ≥ k, so one confirmation is still expected)
//	n = 100: min = 1.2 s, max = 2.4 s
//
// Worst case for n ≤ 10: the crashed node is probed within two probe
// intervals (400 ms), the probe round fails by the end of its interval
// (200 ms), suspicion runs at most max (1.2 s) and the dead message gossips
// in about one gossip interval (100 ms): 1.9 s. With a confirmation, which
// any other prober supplies, suspicion is 600 ms and detection about 1.1 s.
// TestMembershipDetectsCrash measures 1.0-1.2 s of fake time for n = 3 and
// n = 5. A 100 ms probe timeout is generous for a LAN (RTT well under 1 ms)
// but leaves less room for GC pauses than memberlist's LAN preset (500 ms);
// Lifeguard's awareness stretches probes on a node that is itself slow.
// Above about 10 nodes the log10 term lengthens both bounds.
//
// The other defaults: PushPullInterval and GossipToTheDeadTime 10 s,
// TCPTimeout 1 s, DeadNodeReclaimTime = GossipToTheDeadTime (so a replaced
// host can take over a dead node's name).
//
// # Security
//
// With Config.SecretKey set, all gossip is encrypted and authenticated with
// AES-GCM, Config.Label bound in as additional data; nodes with another key
// or label cannot talk to the cluster. Without a key, gossip is plain text:
// set one in production.
//
// # Shutdown
//
// Close broadcasts a leave (peers see a Leave at once rather than after
// detection), shuts memberlist down and waits for membership's goroutines.
// memberlist's Shutdown does not wait for its own probe and stream
// goroutines; they end on their own timers within TCPTimeout.
package membership
