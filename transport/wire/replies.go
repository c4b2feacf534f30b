package wire

import (
	"fmt"

	"github.com/seed-a6839e30/dlm/modes"
)

// Status is the outcome a Completion reports.
type Status uint8

// Completion statuses. 0 is not a status, so a forgotten field is refused.
const (
	StatusGranted   Status = 1 // the request or conversion was granted
	StatusNotQueued Status = 2 // NOQUEUE request that could not be granted at once
	StatusDeadlock  Status = 3 // failed (or demoted) to break a deadlock
	StatusTimeout   Status = 4 // waited longer than its Timeout
	StatusCancelled Status = 5 // withdrawn by a CancelRequest
	StatusExpired   Status = 6 // TTL ran out without a Renew
	StatusError     Status = 7 // refused; Err says why

	statusEnd Status = 8
)

// Valid reports whether s is one of the statuses above.
func (s Status) Valid() bool { return s >= StatusGranted && s < statusEnd }

// LVBFlags describe the LVB a Completion, ReportedLock or ReportedResource
// carries.
type LVBFlags uint8

// LVB flags.
const (
	LVBPresent LVBFlags = 1 << 0 // the message carries the resource's LVB
	LVBValid   LVBFlags = 1 << 1 // the LVB's contents can be trusted

	lvbFlagsAll = LVBPresent | LVBValid
)

// Completion is the master's answer to a lock, convert, unlock or cancel
// request: sent as the reply to the request, or later as a one-way message
// for a request that waited in a queue.
type Completion struct {
	Epoch     uint64
	Lockspace string
	Lock      uint64
	Status    Status
	Mode      modes.Mode // the lock's mode after the operation
	Token     uint64     // fencing token of a grant
	LVB       []byte     // ≤ Limits.MaxLVB, only with LVBPresent
	LVBSeq    uint64     // sequence number of the LVB
	LVBFlags  LVBFlags
	Demoted   bool   // a deadlock was broken by demoting this lock to NL
	Err       string // short reason for StatusError, ≤ MaxErr bytes
}

const completionFields = 11

// Type implements Message.
func (*Completion) Type() Type { return TypeCompletion }

func (*Completion) name() string { return "completion" }

// Validate implements Message.
func (m *Completion) Validate(l *Limits) error {
	if err := checkEpoch(m.Epoch); err != nil {
		return err
	}
	if err := checkName("lockspace", m.Lockspace, MaxLockspace); err != nil {
		return err
	}
	if err := checkLock(m.Lock); err != nil {
		return err
	}
	if !m.Status.Valid() {
		return fmt.Errorf("%w: unknown status %d", ErrInvalid, uint8(m.Status))
	}
	if err := checkMode(m.Mode); err != nil {
		return err
	}
	if err := checkLVBBlock(m.LVB, m.LVBFlags, l); err != nil {
		return err
	}
	if len(m.Err) > MaxErr {
		return fmt.Errorf("%w: error text of %d bytes, limit %d", ErrInvalid, len(m.Err), MaxErr)
	}
	return nil
}

func (m *Completion) appendBody(b []byte) []byte {
	b = appendArrayLen(b, completionFields)
	b = appendUint(b, m.Epoch)
	b = appendStr(b, m.Lockspace)
	b = appendUint(b, m.Lock)
	b = appendUint(b, uint64(m.Status))
	b = appendUint(b, uint64(m.Mode))
	b = appendUint(b, m.Token)
	b = appendBin(b, m.LVB)
	b = appendUint(b, m.LVBSeq)
	b = appendUint(b, uint64(m.LVBFlags))
	b = appendBool(b, m.Demoted)
	return appendStr(b, m.Err)
}

func (m *Completion) decodeBody(r *reader, d *Decoder) (err error) {
	if err = r.expectArray(completionFields); err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	if m.Lockspace, err = d.internField(r, "lockspace", MaxLockspace); err != nil {
		return err
	}
	if m.Lock, err = r.uint64(); err != nil {
		return err
	}
	var v uint8
	if v, err = r.uint8(); err != nil {
		return err
	}
	m.Status = Status(v)
	if m.Mode, err = readMode(r); err != nil {
		return err
	}
	if m.Token, err = r.uint64(); err != nil {
		return err
	}
	if m.LVB, err = r.bin("lvb", d.limits.MaxLVB); err != nil {
		return err
	}
	if m.LVBSeq, err = r.uint64(); err != nil {
		return err
	}
	if v, err = r.uint8(); err != nil {
		return err
	}
	m.LVBFlags = LVBFlags(v)
	if m.Demoted, err = r.bool(); err != nil {
		return err
	}
	m.Err, err = d.stringField(r, "error text", MaxErr)
	return err
}

// Blocking tells the holder of a granted lock that it blocks a request for
// Mode, so that it should down-convert or unlock when it can.
type Blocking struct {
	Epoch     uint64
	Lockspace string
	Lock      uint64
	Mode      modes.Mode // the mode that is waiting
}

const blockingFields = 4

// Type implements Message.
func (*Blocking) Type() Type { return TypeBlocking }

func (*Blocking) name() string { return "blocking" }

// Validate implements Message.
func (m *Blocking) Validate(*Limits) error {
	if err := checkEpoch(m.Epoch); err != nil {
		return err
	}
	if err := checkName("lockspace", m.Lockspace, MaxLockspace); err != nil {
		return err
	}
	if err := checkLock(m.Lock); err != nil {
		return err
	}
	return checkMode(m.Mode)
}

func (m *Blocking) appendBody(b []byte) []byte {
	b = appendArrayLen(b, blockingFields)
	b = appendUint(b, m.Epoch)
	b = appendStr(b, m.Lockspace)
	b = appendUint(b, m.Lock)
	return appendUint(b, uint64(m.Mode))
}

func (m *Blocking) decodeBody(r *reader, d *Decoder) (err error) {
	if err = r.expectArray(blockingFields); err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	if m.Lockspace, err = d.internField(r, "lockspace", MaxLockspace); err != nil {
		return err
	}
	if m.Lock, err = r.uint64(); err != nil {
		return err
	}
	m.Mode, err = readMode(r)
	return err
}

// Renew keeps TTL locks alive: one message renews a session of the sender
// (every lock of it the receiver masters in the lockspace), a batch of
// lock ids of one lockspace, or both. Sent as a request, it is answered by
// a Completion whose Lock is the first of Locks, or the session when
// Locks is empty.
type Renew struct {
	Epoch     uint64
	Lockspace string
	Session   uint64   // 0: none
	Locks     []uint64 // 0..Limits.MaxRenew lock ids, none 0; at least one without a session
}

const renewFields = 4

// Type implements Message.
func (*Renew) Type() Type { return TypeRenew }

func (*Renew) name() string { return "renew" }

// Validate implements Message.
func (m *Renew) Validate(l *Limits) error {
	if err := checkEpoch(m.Epoch); err != nil {
		return err
	}
	if err := checkName("lockspace", m.Lockspace, MaxLockspace); err != nil {
		return err
	}
	switch {
	case len(m.Locks) > l.MaxRenew:
		return fmt.Errorf("%w: renew of %d locks, limit %d", ErrInvalid, len(m.Locks), l.MaxRenew)
	case len(m.Locks) == 0 && m.Session == 0:
		return fmt.Errorf("%w: renew of no session and no locks", ErrInvalid)
	}
	for _, id := range m.Locks {
		if err := checkLock(id); err != nil {
			return err
		}
	}
	return nil
}

func (m *Renew) appendBody(b []byte) []byte {
	b = appendArrayLen(b, renewFields)
	b = appendUint(b, m.Epoch)
	b = appendStr(b, m.Lockspace)
	b = appendUint(b, m.Session)
	b = appendArrayLen(b, len(m.Locks))
	for _, id := range m.Locks {
		b = appendUint(b, id)
	}
	return b
}

func (m *Renew) decodeBody(r *reader, d *Decoder) (err error) {
	if err = r.expectArray(renewFields); err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	if m.Lockspace, err = d.internField(r, "lockspace", MaxLockspace); err != nil {
		return err
	}
	if m.Session, err = r.uint64(); err != nil {
		return err
	}
	n, err := r.arrayLen() // n ≤ bytes remaining: bounded before the make below
	if err != nil {
		return err
	}
	if n > d.limits.MaxRenew {
		return fmt.Errorf("%w: renew of %d locks, limit %d", ErrInvalid, n, d.limits.MaxRenew)
	}
	if n == 0 {
		m.Locks = nil // as a sender leaves it; a session's renewal names no lock
		return nil
	}
	if cap(m.Locks) < n {
		m.Locks = make([]uint64, n)
	}
	m.Locks = m.Locks[:n]
	for i := range m.Locks {
		if m.Locks[i], err = r.uint64(); err != nil {
			return err
		}
	}
	return nil
}
