package master

import (
	"errors"
	"fmt"
)

// Config sets the limits of a table. A table serves one lockspace, so these
// are per-lockspace settings.
type Config struct {
	// MaxNameLen caps resource names, in bytes. Names are compared as bytes
	// and may be binary.
	MaxNameLen int
	// MaxLVB caps the lock value block, in bytes (Linux: lvblen; VMS: 16 or
	// 64). A write may be shorter; readers see exactly what was written.
	MaxLVB int
	// MaxLocksPerNode caps the locks (granted or queued) one node may have in
	// this table, so one node cannot exhaust a master's memory. Zero means
	// no limit.
	MaxLocksPerNode int
	// MaxWaitersPerResource caps the queued requests and conversions on one
	// resource. Zero means no limit.
	MaxWaitersPerResource int
}

// Hard caps on Config; beyond them a single lock or name costs more memory
// than a lock table should spend on it.
const (
	HardMaxNameLen = 4096
	HardMaxLVB     = 4096
)

// DefaultConfig returns the limits a lockspace gets unless it says otherwise.
func DefaultConfig() Config {
	return Config{
		MaxNameLen:            256,
		MaxLVB:                64, // o2dlm's size, VMS's extended value block
		MaxLocksPerNode:       1 << 20,
		MaxWaitersPerResource: 1 << 14,
	}
}

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("master: invalid config")

// Validate reports the first field out of range.
func (c Config) Validate() error {
	switch {
	case c.MaxNameLen < 1 || c.MaxNameLen > HardMaxNameLen:
		return fmt.Errorf("%w: MaxNameLen %d not in 1..%d", ErrInvalidConfig, c.MaxNameLen, HardMaxNameLen)
	case c.MaxLVB < 0 || c.MaxLVB > HardMaxLVB:
		return fmt.Errorf("%w: MaxLVB %d not in 0..%d", ErrInvalidConfig, c.MaxLVB, HardMaxLVB)
	case c.MaxLocksPerNode < 0:
		return fmt.Errorf("%w: MaxLocksPerNode %d is negative", ErrInvalidConfig, c.MaxLocksPerNode)
	case c.MaxWaitersPerResource < 0:
		return fmt.Errorf("%w: MaxWaitersPerResource %d is negative", ErrInvalidConfig, c.MaxWaitersPerResource)
	}
	return nil
}
