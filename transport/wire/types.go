package wire

import "fmt"

// Version is the frame version this build speaks: the first byte of every
// frame header, on the links and on the client port alike.
const Version = 2

// LinkVersion is the version of the messages between nodes this build
// speaks, which the Hello a node sends names: a peer of another version is
// refused at the handshake. It moves when a message between nodes changes
// its layout, without touching the frames or the client protocol.
const LinkVersion = 3

// Type identifies a message. It occupies the low 7 bits of the header's type
// byte; the high bit is the reply flag.
type Type uint8

// Message types. Values are part of the protocol: never renumber one, only
// append.
const (
	TypePing           Type = 1 // connection heartbeat, handled by the links
	TypeHello          Type = 2 // connection handshake
	TypeLockRequest    Type = 3
	TypeConvertRequest Type = 4
	TypeUnlockRequest  Type = 5
	TypeCancelRequest  Type = 6
	TypeCompletion     Type = 7
	TypeBlocking       Type = 8
	TypeRenew          Type = 9

	// Recovery: membership views, quorum leases, phases and lock reports.
	TypeHeartbeat      Type = 10
	TypeHeartbeatAck   Type = 11
	TypePropose        Type = 12
	TypePromise        Type = 13
	TypeCommit         Type = 14
	TypeRecoveryStatus Type = 15
	TypeRecoveryPhase  Type = 16
	TypeAck            Type = 17
	TypeLockReport     Type = 18
	TypeMasterReport   Type = 19

	// Deadlock detection across nodes: wait-for edges, their confirmation
	// and the failure of a victim.
	TypeDeadlockReport    Type = 20
	TypeDeadlockConfirm   Type = 21
	TypeDeadlockConfirmed Type = 22
	TypeDeadlockFail      Type = 23

	// Recovery that moves only what changes master: which tables each
	// member holds (see mastery.go).
	TypeMastery Type = 24

	// Semaphores: a request for permits (answered by a Completion; unlock
	// and cancel are the lock messages), and their recovery report
	// (answered by an Ack).
	TypeSemaphoreRequest Type = 25
	TypePermitReport     Type = 26

	// Introspection: a resource's locks, from its master.
	TypeDescribeRequest Type = 27
	TypeDescribeReply   Type = 28

	// typeEnd is one past the last type; arrays indexed by Type use it.
	typeEnd Type = 29
)

// NumTypes is the size of an array indexed by Type, the client protocol's
// types (client_types.go) included.
const NumTypes = int(clientTypeEnd)

// replyFlag marks, in the header's type byte, a frame that answers a request.
const replyFlag = 0x80

// newMessage returns a zero message of type t, or nil for a type this build
// does not know. It is the one table a new message type is added to.
func newMessage(t Type) Message {
	switch t {
	case TypePing:
		return new(Ping)
	case TypeHello:
		return new(Hello)
	case TypeLockRequest:
		return new(LockRequest)
	case TypeConvertRequest:
		return new(ConvertRequest)
	case TypeUnlockRequest:
		return new(UnlockRequest)
	case TypeCancelRequest:
		return new(CancelRequest)
	case TypeCompletion:
		return new(Completion)
	case TypeBlocking:
		return new(Blocking)
	case TypeRenew:
		return new(Renew)
	case TypeHeartbeat:
		return new(Heartbeat)
	case TypeHeartbeatAck:
		return new(HeartbeatAck)
	case TypePropose:
		return new(Propose)
	case TypePromise:
		return new(Promise)
	case TypeCommit:
		return new(Commit)
	case TypeRecoveryStatus:
		return new(RecoveryStatus)
	case TypeRecoveryPhase:
		return new(RecoveryPhase)
	case TypeAck:
		return new(Ack)
	case TypeLockReport:
		return new(LockReport)
	case TypeMasterReport:
		return new(MasterReport)
	case TypeDeadlockReport:
		return new(DeadlockReport)
	case TypeDeadlockConfirm:
		return new(DeadlockConfirm)
	case TypeDeadlockConfirmed:
		return new(DeadlockConfirmed)
	case TypeDeadlockFail:
		return new(DeadlockFail)
	case TypeMastery:
		return new(Mastery)
	case TypeSemaphoreRequest:
		return new(SemaphoreRequest)
	case TypePermitReport:
		return new(PermitReport)
	case TypeDescribeRequest:
		return new(DescribeRequest)
	case TypeDescribeReply:
		return new(DescribeReply)
	}
	return newClientMessage(t)
}

// Known reports whether t is a message type this build can decode.
func (t Type) Known() bool { return t > 0 && t < typeEnd || t.Client() }

// New returns a new zero message of type t, or nil if t is unknown.
func (t Type) New() Message { return newMessage(t) }

// String returns a short lower-case name, used as a metric label.
func (t Type) String() string {
	if m := newMessage(t); m != nil {
		return m.name()
	}
	return fmt.Sprintf("type_%d", uint8(t))
}

// Message is one protocol message. The set is closed: every implementation is
// in this package, so that the codec, validation and fuzz targets of a message
// live next to each other (adding one: docs/design/transport.md).
type Message interface {
	// Type returns the message's type.
	Type() Type
	// Validate checks the message against the protocol rules and l. The
	// decoder calls it on every message it hands out; AppendFrame calls it
	// before encoding, so a node never sends what its peer would refuse.
	Validate(l *Limits) error

	name() string
	// appendBody appends the msgpack body. It never fails: Validate first.
	appendBody(b []byte) []byte
	// decodeBody overwrites the message with the body read from r. Byte
	// slices alias r's input.
	decodeBody(r *reader, d *Decoder) error
}
