package wire

import "fmt"

// Fixed bounds of the protocol. They are not configurable because both ends of
// a cluster must agree on them and none of them is worth tuning.
const (
	// MaxLockspace is the longest lockspace name, in bytes.
	MaxLockspace = 64
	// MaxClusterID is the longest cluster ID, in bytes.
	MaxClusterID = 64
	// MaxNodeName is the longest node name, in bytes.
	MaxNodeName = 255
	// MaxErr is the longest error text a Completion or Promise may carry, in
	// bytes.
	MaxErr = 256
	// MaxMembers is the most members a view (Propose, Commit) may have. It is
	// fixed, not a Limits field, because every node must be able to accept
	// every view the others agree on: a view one member refused could never
	// be installed.
	MaxMembers = 1024
	// MaxPhase is the highest recovery phase (RecoveryStatus, RecoveryPhase).
	// Phases are numbered from 1.
	MaxPhase = 8
	// MaxEdges is the most wait-for edges one DeadlockReport or
	// DeadlockConfirm carries, and the most answers one DeadlockConfirmed
	// carries. It is fixed, not a Limits field, because the detector
	// confirms an edge with the node that reported it: every node must
	// accept as many edges as any other may report. A node with more
	// long-waiting edges than that reports the oldest waits (see dlm). A
	// report of MaxEdges edges with long names may still exceed MaxFrame;
	// the sender caps its reports by size as well.
	MaxEdges = 1024
	// HeaderSize is the frame header after the length prefix: version, type
	// and request id.
	HeaderSize = 1 + 1 + 8
	// PrefixSize is the length prefix in front of every frame.
	PrefixSize = 4
)

// Limits are the configurable bounds applied to every frame decoded and every
// message encoded. A zero field is not "unlimited": use DefaultLimits and
// change what you need, then Validate.
type Limits struct {
	// MaxFrame is the largest frame, counted after the 4-byte length prefix
	// (header plus body). A declared length above it is refused before
	// anything is allocated. Default 1 MiB; at least about 784 KiB, which a
	// view of MaxMembers members with its configuration can take (see Validate).
	MaxFrame int
	// MaxName is the longest resource name, in bytes. Default 256.
	MaxName int
	// MaxLVB is the largest lock value block this layer carries, in bytes.
	// Lockspaces enforce their own, smaller size. Default 4096.
	MaxLVB int
	// MaxRenew is the most lock ids one Renew message may carry. Default 4096.
	MaxRenew int
	// MaxReport is the most locks one LockReport may carry, the most
	// resources one MasterReport may carry, and the most queued locks one of
	// its resources may carry; a MasterReport carries at most MaxQueued (16 ×
	// MaxReport) queued locks in all, so that decoding one cannot allocate
	// more than a small multiple of its frame. Default 4096, at most 65536.
	//
	// A report of MaxReport entries may still be larger than MaxFrame (names
	// and LVBs make an entry up to a few KiB): AppendFrame refuses it with
	// ErrFrameTooLarge, and the sender splits its report into several.
	MaxReport int
}

// DefaultLimits returns the limits described on each field.
func DefaultLimits() Limits {
	return Limits{MaxFrame: 1 << 20, MaxName: 256, MaxLVB: 4096, MaxRenew: 4096, MaxReport: 4096}
}

// queuedPerReport × MaxReport bounds the queued locks of one MasterReport.
const queuedPerReport = 16

// MaxQueued is the most QueuedLocks one MasterReport may carry across all its
// resources: 16 × MaxReport.
func (l Limits) MaxQueued() int { return queuedPerReport * l.MaxReport }

// largest encoded sizes, used to check that MaxFrame can hold every message.
const (
	// maxFixedBody covers all integer fields and headers of the largest
	// message that carries one name and one LVB, including a LockReport of
	// one lock and a MasterReport of one resource with one queued lock (both
	// under 100 bytes; TestLimitsHoldLargestMessages checks it).
	maxFixedBody = 128
	maxUint64Enc = 9
	// maxMemberEnc is one ViewMember at its largest: array header, str8
	// header, name, boot id.
	maxMemberEnc = 1 + 2 + MaxNodeName + maxUint64Enc
	// maxViewBody is the body of a Propose of MaxMembers members with the
	// longest names (a Commit is smaller) and a configuration of two such
	// lists.
	maxViewBody = maxFixedBody + MaxNodeName + 3 + MaxMembers*maxMemberEnc + maxConfigEnc
)

// Validate reports whether the limits are usable: each in its range and
// MaxFrame large enough for the largest message they and the fixed bounds
// allow. A view of MaxMembers members with the longest names, with its
// configuration, takes about 784 KiB, so MaxFrame must be at least that: a smaller frame would let a
// coordinator agree on a view it cannot send.
func (l Limits) Validate() error {
	switch {
	case l.MaxFrame < 1024 || l.MaxFrame > 64<<20:
		return fmt.Errorf("wire: MaxFrame %d outside [1 KiB, 64 MiB]", l.MaxFrame)
	case l.MaxName < 1 || l.MaxName > 1<<16:
		return fmt.Errorf("wire: MaxName %d outside [1, 65536]", l.MaxName)
	case l.MaxLVB < 0 || l.MaxLVB > 1<<20:
		return fmt.Errorf("wire: MaxLVB %d outside [0, 1 MiB]", l.MaxLVB)
	case l.MaxRenew < 1:
		return fmt.Errorf("wire: MaxRenew %d must be positive", l.MaxRenew)
	case l.MaxReport < 1 || l.MaxReport > 1<<16:
		return fmt.Errorf("wire: MaxReport %d outside [1, 65536]", l.MaxReport)
	}
	// The largest message is one of: a message with one name and one LVB
	// (also a report of one lock, the unit a sender splits reports into), a
	// Renew of MaxRenew ids, or a view of MaxMembers members. MaxReport is not
	// in it: a report of MaxReport entries may need hundreds of MiB, and a
	// sender splits reports to fit MaxFrame instead.
	need := HeaderSize + maxFixedBody + MaxLockspace + l.MaxName + l.MaxLVB + MaxErr
	if r := HeaderSize + maxFixedBody + MaxLockspace + maxUint64Enc*l.MaxRenew; r > need {
		need = r
	}
	need = max(need, HeaderSize+maxViewBody)
	if need > l.MaxFrame {
		return fmt.Errorf("wire: MaxFrame %d cannot hold the largest message the protocol and the other limits allow (%d bytes)", l.MaxFrame, need)
	}
	return nil
}
