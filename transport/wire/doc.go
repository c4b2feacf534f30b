// Package wire defines the messages dlm nodes exchange and their frame
// codec. It does no I/O: package transport moves the frames.
//
// # Frames
//
// A frame is a 4-byte big-endian length (of everything after it), a 10-byte
// header and a msgpack body:
//
//	+--------+---------+------+------------+----------------------+
//	| length | version | type | request id | body (msgpack array) |
//	|  4 B   |   1 B   | 1 B  |  8 B (BE)  |  length - 10 bytes   |
//	+--------+---------+------+------------+----------------------+
//
// The type byte's high bit is the reply flag. A request id of 0 marks a
// one-way message; a request carries a non-zero id and its reply carries the
// same id with the reply flag set (see Header).
//
// # Invariants
//
//   - A declared frame length above Limits.MaxFrame is refused by FrameLength
//     before the frame is read or anything is allocated.
//   - Bodies are decoded into concrete structs by hand-written code, never
//     through interface{} or reflection. Every msgpack array, map, string or
//     binary header is checked against the bytes that remain in the frame
//     before anything is sliced or allocated (ErrDeclaredLength): a 5-byte
//     array32 header declaring 20,000,000 elements costs nothing. This is the
//     guard against the msgpack v5.4.1 unbounded-allocation bug; the decoder
//     does not depend on any msgpack library for it.
//   - Decoding allocates at most a small multiple of the frame size: strings
//     (bounded by the frame), a Renew's id slice (8 bytes per id, and each
//     id takes at least one byte of the frame, bounded by Limits.MaxRenew),
//     and the slices of structs of the recovery and deadlock messages (a
//     view's members, a report's locks, permits and resources, nested in
//     a MasterReport, wait-for edges, a DescribeReply's locks). An element of those takes at least its
//     array header and a byte per field, and a count the remaining bytes
//     cannot hold at that rate is refused before the slice is made: the
//     widest per byte, a ReportedResource, costs 80 bytes for at least 6.
//     Their counts are bounded too, by MaxMembers, Limits.MaxReport, for all
//     the queued locks of a MasterReport Limits.MaxQueued, and MaxEdges.
//   - Every decoded message is validated (Message.Validate) before Decode
//     returns it; AppendFrame validates before encoding, so a node never sends
//     a message its peer would refuse (a refused message would cost the whole
//     connection).
//   - Each kind of bad input has its own sentinel error (ErrFrameTooLarge,
//     ErrTruncated, ErrVersion, ErrUnknownType, ErrTrailingBytes,
//     ErrDeclaredLength, ErrMalformed, ErrInvalid); Reason turns one into a
//     metric label. On error no message is returned.
//   - Encoding picks the shortest msgpack form of each value; decoding accepts
//     every form the msgpack spec allows (for example a uint64 written as 9
//     bytes by a generic encoder), so the bodies are plain msgpack that any
//     library can read and write. The tests check this against
//     github.com/vmihailenco/msgpack/v5.
//
// # Lifetime of decoded messages
//
// A Decoder keeps one message per type and decodes into it, reusing its
// slices (a Renew's ids, a report's locks), and the byte slices of a decoded
// message (LVBs) alias the frame. So a message from Decode is valid only
// until the next Decode on the same Decoder and while the frame's buffer is
// unchanged: a handler that keeps a message, one of its slices, or an LVB,
// past its call must copy it. Strings are always safe to keep. Names
// that repeat (lockspaces, cluster and node names) are interned per Decoder
// in a bounded table, so steady traffic does not allocate for them. For a
// message that must outlive the buffer, DecodeOwned decodes into a new message
// and copies the byte slices it keeps.
//
// # Messages
//
// Lock traffic: LockRequest, ConvertRequest, UnlockRequest and CancelRequest
// are answered by a Completion (the reply, or a later one-way message);
// Blocking is one-way. A Renew sent as a request is answered by a
// Completion naming its first lock, or its session when it names none.
// The links own Ping and Hello; a Hello names LinkVersion.
//
// Recovery (membership epochs, quorum leases, view agreement, barriers and
// the reports that rebuild lock tables on new masters): a Heartbeat request
// is answered by a HeartbeatAck, a Propose by a Promise, a LockReport or
// MasterReport by an Ack; Commit, RecoveryStatus and RecoveryPhase are
// one-way. Views list their members sorted by name (SortMembers).
//
// Deadlock detection across nodes: a DeadlockReport (one-way) carries a
// node's long wait-for edges to the detector; a DeadlockConfirm request asks
// a master whether edges it reported still hold, answered by a
// DeadlockConfirmed; a DeadlockFail (one-way) asks a master to fail the
// request chosen to break a cycle.
//
// Semaphores: a SemaphoreRequest asks for permits and is answered by a
// Completion, as a LockRequest is (UnlockRequest and CancelRequest serve
// both); a PermitReport carries a node's permits to their new master in
// recovery, answered by an Ack. Introspection: a DescribeRequest asks a
// resource's master for its locks, answered by a DescribeReply.
//
// The client protocol (client_types.go; docs/protocol.md byte by byte) is
// what a program that runs no node speaks with an agent's client port: the
// same frames, types from 64 up. A link's Decoder (NewDecoder) refuses its
// types and a client connection's (NewClientDecoder) every other.
//
// Adding a message type is described in docs/design/transport.md in the
// repository.
package wire
