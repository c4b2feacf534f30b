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
	// MaxErr is the longest error text a Completion may carry, in bytes.
	MaxErr = 256
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
	// anything is allocated. Default 1 MiB.
	MaxFrame int
	// MaxName is the longest resource name, in bytes. Default 256.
	MaxName int
	// MaxLVB is the largest lock value block this layer carries, in bytes.
	// Lockspaces enforce their own, smaller size. Default 4096.
	MaxLVB int
	// MaxRenew is the most lock ids one Renew message may carry. Default 4096.
	MaxRenew int
}

// DefaultLimits returns the limits described on each field.
func DefaultLimits() Limits {
	return Limits{MaxFrame: 1 << 20, MaxName: 256, MaxLVB: 4096, MaxRenew: 4096}
}

// largest encoded sizes, used to check that MaxFrame can hold every message.
const (
	maxFixedBody = 128 // all integer fields and headers of the largest message
	maxUint64Enc = 9
)

// Validate reports whether the limits are usable: each positive and MaxFrame
// large enough for the largest message they allow.
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
	}
	need := HeaderSize + maxFixedBody + MaxLockspace + l.MaxName + l.MaxLVB + MaxErr
	if r := HeaderSize + maxFixedBody + MaxLockspace + maxUint64Enc*l.MaxRenew; r > need {
		need = r
	}
	if need > l.MaxFrame {
		return fmt.Errorf("wire: MaxFrame %d cannot hold the largest message the other limits allow (%d bytes)", l.MaxFrame, need)
	}
	return nil
}
