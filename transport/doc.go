// Package transport carries dlm's node-to-node messages: persistent
// connections ("links") between the nodes of a cluster, framed and decoded by
// package wire.
//
// Sub-packages: wire (messages and the frame codec, no I/O), membership
// (the memberlist wrapper that finds nodes and detects failures), memnet (an
// in-process network with faults, for tests in testing/synctest).
//
// # Links
//
// A pair of nodes shares one connection, dialled by the node whose name
// sorts first (every node must be able to dial the peers whose names sort
// after its own), and all traffic between them travels on it: requests,
// replies, one-way messages and heartbeats. Each direction carries one
// node's traffic in the order that node sent it, replies included: a
// message is never overtaken by one sent after it to the same peer.
//
// SetPeer adds a peer; messages to it queue (bounded) until its first
// connection, so that a freshly added peer can be used at once. A node also
// reads every connection dialled to it by a peer it was not told about
// (yet), and SetPeer adopts the latest such connection without a redial.
//
// # Handshake
//
// The dialler sends a Hello (protocol version, cluster ID, node name, boot
// ID) and the acceptor answers with its own. Each side refuses a peer of
// another cluster or version; the dialler also refuses an acceptor that is
// not the node it meant to reach. With TCPConfig.TLS, mutual TLS runs first
// and a peer without a certificate from the cluster's CA is refused before
// it can send anything; then each side holds the peer to the Identity its
// certificate carries (dlm://<cluster>/node/<name>): a client certificate,
// another cluster's, or one naming another node than the Hello (or, for the
// dialler, than the node dialled, checked before its own Hello goes out) is
// refused. TLSConfig.Rotate renews the credentials for new connections.
// Refusals are logged with their reason and counted in
// dlm_transport_handshakes_rejected_total{reason} (tls, role, identity,
// cluster, version, ...).
//
// # Sending never blocks
//
// Send, Go, Post, Piggyback and Reply never block: they validate the
// message and encode it into the peer's write buffer (Send, Go and Reply
// with no allocation per message). Writes are batched: under load one write carries many messages
// (dlm_transport_write_syscalls_total against messages_sent_total shows
// the ratio). If a peer does not keep up and its buffer passes
// Config.WriteBufferLimit, the message is refused with ErrWriteBufferFull
// and the link is failed (fail fast), rather than blocking the sender or
// growing without bound. Post leaves the write to the link's writer
// goroutine; Piggyback lets a one-way message wait a little (at most about
// 20 µs in a busy process) to leave with the next message to the same
// peer. While a peer whose link was up is unreachable, messages queue in
// its session (see "Sessions") for up to Config.SessionTimeout; a peer
// never reached since SetPeer, or whose session ended, is absent: Send, Go,
// Call and Reply fail at once with ErrUnreachable, except until the first
// connection after SetPeer. Call blocks for the reply (with a context), CallInto too
// with the reply decoded into a message the caller provides (no allocation
// per reply); Go returns at once and runs a callback.
//
// # Receiving
//
// Each connection has one reader goroutine, which hands each request or
// one-way message to Config.Handler: no goroutine per message, and the
// Handler must not block. The message and its byte slices are valid only
// during the Handler call. Replies are matched by request id to the pending
// call; a Go callback runs on the reading goroutine too, with the same
// rules.
//
// A goroutine waiting for what a peer sends (a Call's reply, or anything
// through Await) may read the connection itself while it waits, so that the
// network wakes it directly rather than the reader goroutine: the Handler
// and callbacks may then run on that goroutine. Frames are still read and
// handled one at a time, in order. Plain TCP connections only.
//
// # Request ids and replies
//
// Request ids are never reused while the process lives: a reply for a call
// that already failed is dropped. A ReplyTo (peer, boot ID, id) may be kept
// and used much later; Reply refuses it (ErrStaleReply) if the peer
// restarted in between, because the new process could have a pending call
// with the same id.
//
// # Sessions
//
// A link loses nothing when its connection breaks. Each node numbers the
// frames it sends a peer within a send session and keeps them until the
// peer acknowledges them (Pings carry acknowledgements, every heartbeat and
// every 256 frames); on the next connection each end's Hello says how many
// frames of the other's session it handled, and the other resends the
// rest, in order, before anything new. The count is exact because the
// connection before has ended on both ends by then: nothing is lost and
// nothing arrives twice. Pending calls wait through the outage. A session
// ends when the link stays down longer than SessionTimeout, its queue
// passes WriteBufferLimit, the peer restarts, says goodbye (Close sends a
// Ping with Closing) or loses count (after bad input from it); then its
// pending calls fail with ErrConnLost, what was not delivered is dropped,
// and both ends call OnSessionLost. The design is in session.go.
//
// # Failures
//
//   - A pending call fails with ErrConnLost when the session that carried
//     its request (and would carry its reply) ends; with ErrPeerRemoved on
//     RemovePeer; with ErrClosed on Close. Callbacks for these run on a
//     library goroutine, never on the caller's.
//   - The dialler sends a Ping every HeartbeatInterval and the acceptor
//     answers it; both ends fail a connection on which nothing arrived for
//     IdleTimeout (at most 9/8 of it), so a peer that vanished without
//     closing (power loss, a partition) is noticed within IdleTimeout, not
//     after TCP's minutes.
//   - A failed connection is redialled by its dialler with capped, jittered
//     exponential backoff (Config.Backoff); both ends queue for the session
//     meanwhile (or fail fast with ErrUnreachable once it ended). Both ends
//     call OnLinkDown. Dials, handshakes and writes have deadlines. Redial
//     cuts a backoff short: the caller's membership saw the peer come back
//     (a restart on the same address), and it answers the first dial.
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
// # Platforms
//
// On Unix systems a sender writes to an idle plain TCP link itself, with one
// non-blocking write; elsewhere (Windows) the link's writer goroutine does
// every write, which costs a goroutine switch per write on an idle link and
// changes nothing else.
//
// # Metrics
//
// dlm_transport_messages_sent_total{type}, bytes_sent_total{type},
// messages_received_total{type}, bytes_received_total{type},
// frames_rejected_total{reason}, handshakes_rejected_total{reason},
// connections{direction}, reconnects_total, write_syscalls_total,
// write_buffer_overflows_total. Register several Links in one process
// through prometheus.WrapRegistererWith.
//
// The design (why one connection per pair, how writes are batched, how a
// waiting goroutine takes over the reading) is in docs/design/transport.md
// in the repository.
package transport
