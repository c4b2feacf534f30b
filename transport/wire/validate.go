package wire

import (
	"fmt"

	"github.com/seed-a6839e30/dlm/modes"
)

func checkName(field, s string, max int) error {
	if len(s) == 0 || len(s) > max {
		return fmt.Errorf("%w: %s must be 1..%d bytes, is %d", ErrInvalid, field, max, len(s))
	}
	return nil
}

func checkEpoch(e uint64) error {
	if e == 0 {
		return fmt.Errorf("%w: epoch must be at least 1", ErrInvalid)
	}
	return nil
}

func checkLock(id uint64) error {
	if id == 0 {
		return fmt.Errorf("%w: lock id 0 is reserved", ErrInvalid)
	}
	return nil
}

func checkMode(m modes.Mode) error {
	if !m.Valid() {
		return fmt.Errorf("%w: mode %d out of range", ErrInvalid, uint8(m))
	}
	return nil
}

func checkDuration(field string, ns int64) error {
	if ns < 0 {
		return fmt.Errorf("%w: %s is negative (%d)", ErrInvalid, field, ns)
	}
	return nil
}

// checkSession refuses a lock in a session without the session's TTL.
func checkSession(session uint64, ttl int64) error {
	if session != 0 && ttl == 0 {
		return fmt.Errorf("%w: a lock of session %d without a ttl", ErrInvalid, session)
	}
	return nil
}

// checkTarget validates the fields every lock operation names its lock by.
func checkTarget(epoch uint64, lockspace, resource string, lock uint64, l *Limits) error {
	if err := checkEpoch(epoch); err != nil {
		return err
	}
	if err := checkName("lockspace", lockspace, MaxLockspace); err != nil {
		return err
	}
	if err := checkName("resource", resource, l.MaxName); err != nil {
		return err
	}
	return checkLock(lock)
}

func checkLVB(lvb []byte, op LVBOp, l *Limits) error {
	if len(lvb) > l.MaxLVB {
		return fmt.Errorf("%w: LVB of %d bytes, limit %d", ErrInvalid, len(lvb), l.MaxLVB)
	}
	if op > LVBInvalidate {
		return fmt.Errorf("%w: unknown LVB operation %d", ErrInvalid, uint8(op))
	}
	if len(lvb) > 0 && op != LVBWrite {
		return fmt.Errorf("%w: LVB bytes without LVBWrite", ErrInvalid)
	}
	return nil
}

// checkLVBBlock validates a value block carried with its flags (Completion,
// ReportedLock, ReportedResource): bytes only with LVBPresent, so that an
// empty block that is present is told apart from no block.
func checkLVBBlock(lvb []byte, f LVBFlags, l *Limits) error {
	if len(lvb) > l.MaxLVB {
		return fmt.Errorf("%w: LVB of %d bytes, limit %d", ErrInvalid, len(lvb), l.MaxLVB)
	}
	if f&^lvbFlagsAll != 0 {
		return fmt.Errorf("%w: unknown LVB flags 0x%02x", ErrInvalid, uint8(f))
	}
	if len(lvb) > 0 && f&LVBPresent == 0 {
		return fmt.Errorf("%w: LVB bytes without LVBPresent", ErrInvalid)
	}
	return nil
}

// checkQueued validates a lock's queue and granted mode as its master had
// them: a waiting lock has been granted nothing, so its mode is NL.
func checkQueued(queue uint8, granted modes.Mode) error {
	if queue < QueueGranted || queue > QueueWaiting {
		return fmt.Errorf("%w: unknown queue %d", ErrInvalid, queue)
	}
	if err := checkMode(granted); err != nil {
		return err
	}
	if queue == QueueWaiting && granted != modes.NL {
		return fmt.Errorf("%w: waiting lock with granted mode %v, want NL", ErrInvalid, granted)
	}
	return nil
}

func checkPhase(p uint8) error {
	if p < 1 || p > MaxPhase {
		return fmt.Errorf("%w: recovery phase %d outside 1..%d", ErrInvalid, p, MaxPhase)
	}
	return nil
}
