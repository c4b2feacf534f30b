// Package transport carries dlm's node-to-node messages: persistent
// connections ("links") between the nodes of a cluster, framed and decoded by
// package wire.
//
// Sub-packages: wire (messages and the frame codec, no I/O), membership
// (the memberlist wrapper that finds nodes and detects failures), memnet (an
// in-process network with faults, for tests in testing/synctest).
//
// # Shape of a link
//
// A pair of nodes shares one TCP connection, and all traffic between them
// travels on it: requests, replies, one-way messages and heartbeats, in
// both directions. It is dialled by the node whose name sorts first; the
// other waits for it. Each direction of the connection carries one node's
// traffic in the order that node sent it, replies included. The DLM relies
// on that: a Completion (grant) must not be overtaken by a later Blocking
// notification for the same lock, nor a DeadlockFail by the confirmation
// request of a later detection round.
//
// One connection rather than one per direction (which this package used
// first) because a reply then comes back on the connection its request went
// out on, which the caller can read itself while it waits (see
// "Receiving"), and two sockets cost every round trip a quarter more on
// loopback (BenchmarkTCPPingPongTwoConns against BenchmarkTCPPingPong).
// Choosing the dialler by name avoids the dial race of two nodes
// connecting to each other at once: there is never a second connection to
// choose between, except a new one from a dialler that restarted or gave up
// on the old one, and the newest connection from a peer always wins.
//
// So that a freshly added peer can be used at once, messages to it queue
// (bounded) until its first connection: a dialler's first attempt, or, on
// the waiting side, a dial and a handshake timeout after SetPeer. A node
// reads every connection dialled to it, even from a peer it was not told
// about (yet): their messages reach the Handler, their heartbeats are
// answered so that the dialler keeps the connection, and SetPeer adopts the
// latest such connection as the link without a redial. Every node must be
// able to dial the peers whose names sort after its own.
//
// # Handshake
//
// The dialler sends a Hello (protocol version, cluster ID, node name, boot
// ID) and the acceptor answers with its own. Each side refuses a peer of
// another cluster or version; the dialler also refuses an acceptor that is
// not the node it meant to reach. With TCPConfig.TLS, mutual TLS runs first
// and a peer without a certificate from the cluster's CA is refused before
// it can send anything. Refusals are logged with their reason and counted in
// dlm_transport_handshakes_rejected_total{reason}.
//
// # Sending: never blocks, one write per batch
//
// Send, Go and Reply validate the message and encode it straight into the
// peer's write buffer under the peer's mutex: no allocation, no goroutine,
// no syscall per message. The connection's writer goroutine swaps the buffer
// out and writes everything queued with one write; while that write is in
// the kernel, senders fill the other buffer, so under load one syscall
// carries many messages (dlm_transport_write_syscalls_total against
// messages_sent_total shows the ratio). If a peer does not keep up and its
// buffer passes Config.WriteBufferLimit, the message is refused with
// ErrWriteBufferFull and the link is failed (fail fast), rather than
// blocking the sender or growing without bound. Post hands a one-way
// message to the writer goroutine instead of writing it inline; Piggyback
// lets one wait for the next message to the same peer, as long as nobody
// waits on the link and its parked reader looks at least every watcherPark
// (see "Receiving" below), which then takes it along: a goroutine's unlock
// and its next request leave in one write. While a peer is unreachable
// (the last connection failed or could not be made), Send, Go, Call and
// Reply fail at once with ErrUnreachable: nothing is queued for an absent
// peer, except until the first connection after SetPeer. Call blocks for the reply
// (with a context), CallInto too with the reply decoded into a message the
// caller provides (no allocation per reply); Go returns at once and runs a
// callback.
//
// # Receiving: on the reader goroutine, or on the waiting caller
//
// Each connection has one reader goroutine. It reads frames with a
// buffered reader (a frame that fits the 64 KiB buffer is decoded in place),
// decodes them with a wire.Decoder that reuses one message per type, and
// hands each request or one-way message to Config.Handler on that goroutine:
// no goroutine per message, and the Handler must not block. The message and
// its byte slices are valid only during the Handler call. Replies are
// matched by request id to the pending call; a Go callback runs on the
// reader goroutine too, with the same rules.
//
// Handing a reply from the reader goroutine to the goroutine waiting for it
// is a second wake-up per round trip, which on two Ps costs as much as the
// network: so a Call waiting for its reply (or any goroutine waiting for
// what a peer sends, through Await) may take over the reading of the
// connection to that peer and be woken by the netpoller itself. One
// goroutine at a time holds the reading, frames are still handled in order,
// and the Handler and callbacks then run on the waiting goroutine; the
// reader goroutine reads while some waiter is blocked, steps aside once
// none is, parks, and comes back within watcherPark (20 µs) when nobody
// reads, or at once when a waiter leaves with others waiting or meets an
// error, which the reader goroutine then handles as its own. A waiter reads
// until its outcome is in, its context ends, or it is interrupted
// (Lender.Interrupt: its outcome came from elsewhere). Plain TCP
// connections only; the design and its costs are in reader.go.
//
// # Request ids and replies
//
// Request ids come from one counter per Links, so an id is never reused
// while the process lives: a reply for a call that already failed finds no
// pending call and is dropped. A ReplyTo (peer, boot ID, id) may be kept and
// used much later; Reply refuses it (ErrStaleReply) if the peer restarted in
// between, because the new process could have a pending call with the same
// id.
//
// # Failures
//
//   - A pending call fails with ErrConnLost when the connection that carried
//     its request (and would carry its reply) fails or is replaced; with
//     ErrPeerRemoved on RemovePeer; with ErrClosed on Close. Callbacks for
//     these run on the peer's manager goroutine, never on the caller's.
//   - The dialler sends a Ping every HeartbeatInterval and the acceptor
//     answers it; both ends fail a connection on which nothing arrived for
//     IdleTimeout, so a peer that vanished without closing (power loss, a
//     partition) is noticed within IdleTimeout, not after TCP's minutes.
//     (The read deadline is an idle period of an eighth of IdleTimeout
//     ahead and only moved when it passes, so a read costs neither a clock
//     read nor a timer update: silence is cut off after between
//     IdleTimeout and 9/8 of it.)
//   - A failed connection is redialled by its dialler with capped, jittered
//     exponential backoff (Config.Backoff); the other end fails fast
//     (ErrUnreachable) until it is dialled again. Both ends call OnLinkDown.
//     Dials, handshakes and writes have deadlines.
//   - Bad input (a declared length over MaxFrame, a truncated frame, a wrong
//     version, an unknown type, a declared length longer than the frame, a
//     message that fails validation, trailing bytes, a second Hello) closes
//     that connection only, is logged with its reason and counted in
//     dlm_transport_frames_rejected_total{reason}. Nothing is allocated for a
//     frame beyond what its bytes justify (see package wire).
//
// # Goroutines
//
// Per Links: one accept loop. Per peer: one manager goroutine (dial and
// handshake or wait to be dialled, write loop, redial). Per connection: one
// reader (parked while a waiting caller reads in its place); for an
// accepted connection it also runs the handshake. Close stops and waits for
// all of them.
//
// # Metrics
//
// dlm_transport_messages_sent_total{type}, bytes_sent_total{type},
// messages_received_total{type}, bytes_received_total{type},
// frames_rejected_total{reason}, handshakes_rejected_total{reason},
// connections{direction}, reconnects_total, write_syscalls_total,
// write_buffer_overflows_total. Register several Links in one process
// through prometheus.WrapRegistererWith.
package transport
