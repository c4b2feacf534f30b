package master

import (
	"fmt"

	"github.com/seed-a6839e30/dlm/modes"
)

// NodeID names a node of the cluster. The table does not interpret it; it
// only groups locks by node for recovery and for per-node limits.
type NodeID uint32

// LockID identifies a lock in the cluster: the node that asked for it and an
// id that node chose. A node must never reuse an id, and should hand out ids
// in increasing order: the table uses that to tell a double unlock
// (ErrReleased) from a lock it never had (ErrUnknownLock).
type LockID struct {
	Node NodeID
	ID   uint64
}

func (id LockID) String() string { return fmt.Sprintf("n%d/%d", id.Node, id.ID) }

// OwnerID groups the locks of one transaction or process for deadlock
// detection and ownership checks. The caller must keep owners unique across
// the cluster. The zero owner means "the lock is its own owner".
type OwnerID uint64

// Tick is the table's notion of time: an abstract, monotonic counter advanced
// only by Table.Tick. The caller decides what a tick is (a millisecond, say).
type Tick uint64

// Flags modify a request or conversion, with the meanings of the VMS and
// Linux DLM flags of the same names.
type Flags uint16

const (
	// NoQueue: if the request cannot be granted at once, fail it with
	// ErrNotQueued instead of queueing it (try-lock).
	NoQueue Flags = 1 << iota
	// Expedite: a new NL request is granted at once, ignoring the queues. Only
	// valid for new NL requests.
	Expedite
	// QueueConvert (QUECVT): the conversion queues behind conversions already
	// waiting even if it is compatible now. Only valid for up-conversions.
	QueueConvert
	// ConvDeadlock (CONVDEADLK): when the conversion would deadlock, demote
	// the lock's granted mode to NL (and say so) instead of failing it.
	ConvDeadlock
)

// flagsMask holds every defined flag.
const flagsMask = NoQueue | Expedite | QueueConvert | ConvDeadlock

func (f Flags) String() string {
	if f == 0 {
		return "none"
	}
	s := ""
	for _, n := range []struct {
		f Flags
		s string
	}{{NoQueue, "noqueue"}, {Expedite, "expedite"}, {QueueConvert, "quecvt"}, {ConvDeadlock, "convdeadlk"}} {
		if f&n.f != 0 {
			if s != "" {
				s += ","
			}
			s += n.s
		}
	}
	if rest := f &^ flagsMask; rest != 0 {
		s += fmt.Sprintf(",0x%x", uint16(rest))
	}
	return s
}

// LVBOp says what a conversion or release does to the resource's lock value
// block. It only has an effect when the lock is granted PW or EX.
type LVBOp uint8

const (
	// LVBKeep leaves the lock value block alone.
	LVBKeep LVBOp = iota
	// LVBWrite stores the caller's value and bumps the sequence.
	LVBWrite
	// LVBInvalidate marks the value not valid (IVVALBLK); readers are told
	// until the next write.
	LVBInvalidate
)

// LVB is a lock value block as seen by a reader.
type LVB struct {
	// Data is the value. In a Result it aliases table memory and is valid
	// until the next call on the table; in an Effect, until the next call of
	// Effects. Copy it to keep it.
	Data []byte
	// Seq counts writes to this resource's value; it never goes back while
	// the resource exists.
	Seq uint64
	// Valid is false when the value may be stale: a holder that could have
	// been writing it was purged or expired, or recovery could not find a
	// trustworthy copy.
	Valid bool
}

// Request asks for a new lock.
type Request struct {
	Resource string
	Lock     LockID
	Owner    OwnerID
	Mode     modes.Mode
	Flags    Flags
	// Timeout fails the request with ErrTimeout if it is still queued this
	// many ticks after it was made. Zero waits forever.
	Timeout Tick
	// TTL releases the lock (ErrExpired) if it is not renewed within this
	// many ticks of its grant or its last renewal. Zero means no TTL.
	TTL Tick
	// Session, when not zero, puts the lock in that session of its node:
	// TTL is then the session's, and the lock lives by the session's lease,
	// which RenewSession renews for all its locks at once (Renew does not).
	// A lock in a session needs a TTL.
	Session uint64
	// Permits, when not zero, makes this a request for Count permits of a
	// semaphore of Permits permits (see semaphore.go), not for a lock in a
	// mode: Mode must be NL, and of the flags only NoQueue applies.
	Permits uint32
	Count   uint32
}

// Convert asks to change the mode of a granted lock.
type Convert struct {
	Lock    LockID
	Owner   OwnerID
	Mode    modes.Mode
	Flags   Flags
	Timeout Tick
	// LVBOp and LVB say what to do with the lock value block when the lock is
	// granted PW or EX and converts down (see Table.Convert).
	LVBOp LVBOp
	LVB   []byte
}

// Release asks to give up a lock, whatever its state.
type Release struct {
	Lock  LockID
	Owner OwnerID
	LVBOp LVBOp
	LVB   []byte
}

// Status says whether a request was granted at once or queued.
type Status uint8

const (
	// Granted: the lock holds the requested mode now.
	Granted Status = iota + 1
	// Queued: the request waits; an Effect will end it.
	Queued
)

func (s Status) String() string {
	switch s {
	case Granted:
		return "granted"
	case Queued:
		return "queued"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Result is the immediate outcome of a request or conversion.
type Result struct {
	Status Status
	// Mode is the lock's granted mode after the call (NL for a demoted lock
	// whose conversion was queued; for a queued new request, meaningless).
	Mode modes.Mode
	// Token is the fencing token of this grant, when Status is Granted and
	// the grant was a new lock or an up-conversion; otherwise the lock's
	// current token.
	Token uint64
	// Demoted is set when ConvDeadlock demoted the lock to NL.
	Demoted bool
	// LVBRead is set when the grant read the lock value block into LVB.
	LVBRead bool
	LVB     LVB
}

// EffectKind says what an Effect reports.
type EffectKind uint8

const (
	// EffectGranted: a queued request or conversion was granted.
	EffectGranted EffectKind = iota + 1
	// EffectFailed: a queued request or conversion ended without a grant; Err
	// says why (ErrTimeout, ErrCancelled, ErrDeadlock). A failed conversion
	// leaves the lock granted in its previous mode (Mode).
	EffectFailed
	// EffectBlocking: a granted lock blocks a queued request for Mode. Sent
	// once per blocking episode: again only for a stronger mode, or after
	// the lock is granted anew.
	EffectBlocking
	// EffectReleased: the table released a granted lock by itself; Err says
	// why (ErrExpired, ErrPurged).
	EffectReleased
)

func (k EffectKind) String() string {
	switch k {
	case EffectGranted:
		return "granted"
	case EffectFailed:
		return "failed"
	case EffectBlocking:
		return "blocking"
	case EffectReleased:
		return "released"
	}
	return fmt.Sprintf("EffectKind(%d)", uint8(k))
}

// Effect is something a call did to a lock other than the one the call was
// about (or to that lock, later): the caller delivers it to the lock's node.
type Effect struct {
	Kind     EffectKind
	Resource string
	Lock     LockID
	Owner    OwnerID
	// Mode: the granted mode (EffectGranted, EffectFailed), or the mode of
	// the blocked request (EffectBlocking).
	Mode    modes.Mode
	Token   uint64
	Demoted bool
	LVBRead bool
	LVB     LVB
	Err     error
}

// Queue names the queue a lock is on.
type Queue uint8

const (
	QueueGranted Queue = iota + 1
	QueueConverting
	QueueWaiting
)

func (q Queue) String() string {
	switch q {
	case QueueGranted:
		return "granted"
	case QueueConverting:
		return "converting"
	case QueueWaiting:
		return "waiting"
	}
	return fmt.Sprintf("Queue(%d)", uint8(q))
}

// LockState describes one lock, for dumps, recovery reports and rebuilds.
type LockState struct {
	Resource string
	Lock     LockID
	Owner    OwnerID
	Queue    Queue
	// Granted is the granted mode (meaningless on QueueWaiting).
	Granted modes.Mode
	// Requested is the mode asked for (equal to Granted on QueueGranted).
	Requested modes.Mode
	Token     uint64
	Flags     Flags
	// Deadline and Expires are absolute ticks; zero means none.
	Deadline Tick
	Expires  Tick
	TTL      Tick
	// Session is the session of the lock's node the lock is in, with TTL
	// and Expires the session's (see Request.Session).
	Session uint64
	// Since is the tick the queued request or conversion was queued at
	// (meaningless on QueueGranted): how long it has waited, for dumps.
	// Restore ignores it; a restored request is timed from the restore.
	Since Tick
	// LVB is the holder's copy of the value block, reported in recovery by a
	// survivor that held the lock in PR or above. Nil if none.
	LVB *LVB
	// Permits and Count describe a lock on a semaphore: the semaphore's
	// permits, and those the lock holds or asks for. Zero for a lock in a
	// mode (whose Granted and Requested say what it holds).
	Permits uint32
	Count   uint32
}
