package wire

import "github.com/seed-a6839e30/dlm/modes"

// LVBOp says what an unlock or down-conversion does to the resource's lock
// value block.
type LVBOp uint8

// LVB operations.
const (
	LVBNone       LVBOp = 0 // leave the LVB as it is
	LVBWrite      LVBOp = 1 // store the message's LVB (holder in PW or EX)
	LVBInvalidate LVBOp = 2 // mark the LVB not valid
)

// LockRequest asks a resource's master for a new lock.
type LockRequest struct {
	Epoch     uint64     // membership epoch the sender is in, ≥ 1
	Lockspace string     // 1..MaxLockspace bytes
	Resource  string     // 1..Limits.MaxName bytes
	Lock      uint64     // lock id chosen by the requesting node, ≠ 0
	Owner     uint64     // owner (transaction, process) for deadlock detection; 0 = none
	Mode      modes.Mode // requested mode
	Flags     uint32     // request flags, defined by the dlm layer
	Timeout   int64      // ns to wait in the queue; 0 = no timeout
	TTL       int64      // ns the lock lives without a Renew; 0 = no TTL
	// Session is the requesting node's session the lock is in, 0 for none.
	// TTL is then the session's, and the master keeps the lock by the
	// session's lease, which a Renew naming the session renews. Not 0 only
	// with a TTL.
	Session uint64
}

const lockRequestFields = 10

// Type implements Message.
func (*LockRequest) Type() Type { return TypeLockRequest }

func (*LockRequest) name() string { return "lock_request" }

// Validate implements Message.
func (m *LockRequest) Validate(l *Limits) error {
	if err := checkTarget(m.Epoch, m.Lockspace, m.Resource, m.Lock, l); err != nil {
		return err
	}
	if err := checkMode(m.Mode); err != nil {
		return err
	}
	if err := checkDuration("timeout", m.Timeout); err != nil {
		return err
	}
	if err := checkDuration("ttl", m.TTL); err != nil {
		return err
	}
	return checkSession(m.Session, m.TTL)
}

func (m *LockRequest) appendBody(b []byte) []byte {
	b = appendArrayLen(b, lockRequestFields)
	b = appendTarget(b, m.Epoch, m.Lockspace, m.Resource, m.Lock, m.Owner)
	b = appendUint(b, uint64(m.Mode))
	b = appendUint(b, uint64(m.Flags))
	b = appendInt(b, m.Timeout)
	b = appendInt(b, m.TTL)
	return appendUint(b, m.Session)
}

func (m *LockRequest) decodeBody(r *reader, d *Decoder) (err error) {
	if err = r.expectArray(lockRequestFields); err != nil {
		return err
	}
	if err = d.target(r, &m.Epoch, &m.Lockspace, &m.Resource, &m.Lock, &m.Owner); err != nil {
		return err
	}
	if m.Mode, err = readMode(r); err != nil {
		return err
	}
	if m.Flags, err = r.uint32(); err != nil {
		return err
	}
	if m.Timeout, err = r.int64(); err != nil {
		return err
	}
	if m.TTL, err = r.int64(); err != nil {
		return err
	}
	m.Session, err = r.uint64()
	return err
}

// ConvertRequest asks the master to change the mode of a granted lock. With
// a down-conversion from PW or EX it may carry an LVB to store.
type ConvertRequest struct {
	Epoch     uint64
	Lockspace string
	Resource  string
	Lock      uint64
	Owner     uint64
	Mode      modes.Mode // the new mode
	Flags     uint32
	Timeout   int64  // ns; 0 = no timeout
	LVB       []byte // ≤ Limits.MaxLVB; non-empty only with LVBWrite
	LVBOp     LVBOp
}

const convertRequestFields = 10

// Type implements Message.
func (*ConvertRequest) Type() Type { return TypeConvertRequest }

func (*ConvertRequest) name() string { return "convert_request" }

// Validate implements Message.
func (m *ConvertRequest) Validate(l *Limits) error {
	if err := checkTarget(m.Epoch, m.Lockspace, m.Resource, m.Lock, l); err != nil {
		return err
	}
	if err := checkMode(m.Mode); err != nil {
		return err
	}
	if err := checkDuration("timeout", m.Timeout); err != nil {
		return err
	}
	return checkLVB(m.LVB, m.LVBOp, l)
}

func (m *ConvertRequest) appendBody(b []byte) []byte {
	b = appendArrayLen(b, convertRequestFields)
	b = appendTarget(b, m.Epoch, m.Lockspace, m.Resource, m.Lock, m.Owner)
	b = appendUint(b, uint64(m.Mode))
	b = appendUint(b, uint64(m.Flags))
	b = appendInt(b, m.Timeout)
	b = appendBin(b, m.LVB)
	return appendUint(b, uint64(m.LVBOp))
}

func (m *ConvertRequest) decodeBody(r *reader, d *Decoder) (err error) {
	if err = r.expectArray(convertRequestFields); err != nil {
		return err
	}
	if err = d.target(r, &m.Epoch, &m.Lockspace, &m.Resource, &m.Lock, &m.Owner); err != nil {
		return err
	}
	if m.Mode, err = readMode(r); err != nil {
		return err
	}
	if m.Flags, err = r.uint32(); err != nil {
		return err
	}
	if m.Timeout, err = r.int64(); err != nil {
		return err
	}
	if m.LVB, err = r.bin("lvb", d.limits.MaxLVB); err != nil {
		return err
	}
	m.LVBOp, err = readLVBOp(r)
	return err
}

// UnlockRequest releases a lock, optionally writing or invalidating the LVB.
type UnlockRequest struct {
	Epoch     uint64
	Lockspace string
	Resource  string
	Lock      uint64
	Owner     uint64
	LVB       []byte // ≤ Limits.MaxLVB; non-empty only with LVBWrite
	LVBOp     LVBOp
}

const unlockRequestFields = 7

// Type implements Message.
func (*UnlockRequest) Type() Type { return TypeUnlockRequest }

func (*UnlockRequest) name() string { return "unlock_request" }

// Validate implements Message.
func (m *UnlockRequest) Validate(l *Limits) error {
	if err := checkTarget(m.Epoch, m.Lockspace, m.Resource, m.Lock, l); err != nil {
		return err
	}
	return checkLVB(m.LVB, m.LVBOp, l)
}

func (m *UnlockRequest) appendBody(b []byte) []byte {
	b = appendArrayLen(b, unlockRequestFields)
	b = appendTarget(b, m.Epoch, m.Lockspace, m.Resource, m.Lock, m.Owner)
	b = appendBin(b, m.LVB)
	return appendUint(b, uint64(m.LVBOp))
}

func (m *UnlockRequest) decodeBody(r *reader, d *Decoder) (err error) {
	if err = r.expectArray(unlockRequestFields); err != nil {
		return err
	}
	if err = d.target(r, &m.Epoch, &m.Lockspace, &m.Resource, &m.Lock, &m.Owner); err != nil {
		return err
	}
	if m.LVB, err = r.bin("lvb", d.limits.MaxLVB); err != nil {
		return err
	}
	m.LVBOp, err = readLVBOp(r)
	return err
}

// CancelRequest withdraws a queued request or conversion.
type CancelRequest struct {
	Epoch     uint64
	Lockspace string
	Resource  string
	Lock      uint64
	Owner     uint64
}

const cancelRequestFields = 5

// Type implements Message.
func (*CancelRequest) Type() Type { return TypeCancelRequest }

func (*CancelRequest) name() string { return "cancel_request" }

// Validate implements Message.
func (m *CancelRequest) Validate(l *Limits) error {
	return checkTarget(m.Epoch, m.Lockspace, m.Resource, m.Lock, l)
}

func (m *CancelRequest) appendBody(b []byte) []byte {
	b = appendArrayLen(b, cancelRequestFields)
	return appendTarget(b, m.Epoch, m.Lockspace, m.Resource, m.Lock, m.Owner)
}

func (m *CancelRequest) decodeBody(r *reader, d *Decoder) error {
	if err := r.expectArray(cancelRequestFields); err != nil {
		return err
	}
	return d.target(r, &m.Epoch, &m.Lockspace, &m.Resource, &m.Lock, &m.Owner)
}

// appendTarget writes the five leading fields shared by the lock operations.
func appendTarget(b []byte, epoch uint64, lockspace, resource string, lock, owner uint64) []byte {
	b = appendUint(b, epoch)
	b = appendStr(b, lockspace)
	b = appendStr(b, resource)
	b = appendUint(b, lock)
	return appendUint(b, owner)
}

// target reads the fields appendTarget writes.
func (d *Decoder) target(r *reader, epoch *uint64, lockspace, resource *string, lock, owner *uint64) (err error) {
	if *epoch, err = r.uint64(); err != nil {
		return err
	}
	if *lockspace, err = d.internField(r, "lockspace", MaxLockspace); err != nil {
		return err
	}
	if *resource, err = d.resourceField(r); err != nil {
		return err
	}
	if *lock, err = r.uint64(); err != nil {
		return err
	}
	*owner, err = r.uint64()
	return err
}

func readMode(r *reader) (modes.Mode, error) {
	v, err := r.uint8()
	return modes.Mode(v), err
}

func readLVBOp(r *reader) (LVBOp, error) {
	v, err := r.uint8()
	return LVBOp(v), err
}
