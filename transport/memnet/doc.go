// Package memnet is an in-process network with injectable faults, for
// testing whole dlm clusters in one process, inside testing/synctest with
// fake time.
//
// A Network holds named nodes. Each node gets its own loopback-style IP
// (127.1.x.y; nothing is bound, no socket is opened) and two endpoints:
//
//   - Node.Transport: a memberlist.NodeAwareTransport (packets and streams)
//     at ip:7946, so memberlist runs unmodified on top of it;
//   - Node.StreamLayer: a listener that also dials, at ip:7947, which
//     satisfies the links' transport.StreamLayer.
//
// # Invariants
//
//   - A sender never blocks. Packets go into a buffered queue per node
//     (Config.PacketQueue); when it is full, when the receiver is closed or
//     the link is cut, the packet is dropped silently and the sender still
//     sees success, as with UDP. Delivery delays use timers, which synctest
//     fakes.
//   - Streams are net.Pipe pairs (synchronous, with deadlines); a dial puts
//     the server end on the listener's buffered accept queue and fails at
//     once if the queue is full.
//   - Routing is by node name when memberlist gives one, else by address.
//   - Loss is drawn from a rand seeded by Config.Seed.
//
// # Faults
//
//   - Partition(a, b) cuts both directions; Block(from, to) cuts one;
//     Isolate(a) partitions a from everyone; Heal() removes all cuts.
//     Reset(a, b) breaks the streams between a and b and cuts nothing: a
//     connection reset, after which a redial succeeds.
//   - On a cut link, packets vanish, a dial waits for its deadline (or
//     context) and then fails with an i/o timeout (os.ErrDeadlineExceeded),
//     as if the SYNs were dropped, and existing streams between the two
//     nodes are broken at once (both ends see their reads and writes fail).
//     Breaking rather than stalling was chosen because it is deterministic
//     and because a stream needs both directions anyway; a stalled real TCP
//     connection is what the links' heartbeat and idle timeout detect, and
//     their tests cover it with a silent peer.
//   - SetLoss(p) drops each packet with probability p; SetDelay(d) delays
//     every packet and dial by d; SetStreamDelay(d) delays every write on a
//     stream (a batch of link frames) by d.
//   - Sent(name) counts the bytes a node sent: gossip packets, gossip
//     streams and link streams, for measurements.
//   - Crash(name) closes the node's endpoints: packets to it are dropped,
//     dials to it are refused (ErrRefused), its streams break. Nothing is
//     sent on its behalf. AddNode(name) afterwards restarts the name with the
//     same IP and new endpoints: give the restarted memberlist a new
//     Transport and, for dlm, a new boot ID.
//
// memberlist's own MockNetwork cannot be used for failure tests: it blocks
// senders on unbuffered channels and its Shutdown does nothing
// (membership.md, trap T1).
package memnet
