package wire

import (
	"fmt"

	"github.com/seed-a6839e30/dlm/modes"
)

// DescribeRequest asks a resource's master for the resource's locks
// (request; reply DescribeReply).
type DescribeRequest struct {
	Epoch     uint64 // membership epoch the sender is in, ≥ 1
	Lockspace string // 1..MaxLockspace bytes
	Resource  string // 1..Limits.MaxName bytes
}

const describeRequestFields = 3

// Type implements Message.
func (*DescribeRequest) Type() Type { return TypeDescribeRequest }

func (*DescribeRequest) name() string { return "describe_request" }

// Validate implements Message.
func (m *DescribeRequest) Validate(l *Limits) error {
	if err := checkEpoch(m.Epoch); err != nil {
		return err
	}
	if err := checkName("lockspace", m.Lockspace, MaxLockspace); err != nil {
		return err
	}
	return checkName("resource", m.Resource, l.MaxName)
}

func (m *DescribeRequest) appendBody(b []byte) []byte {
	b = appendArrayLen(b, describeRequestFields)
	b = appendUint(b, m.Epoch)
	b = appendStr(b, m.Lockspace)
	return appendStr(b, m.Resource)
}

func (m *DescribeRequest) decodeBody(r *reader, d *Decoder) (err error) {
	if err = r.expectArray(describeRequestFields); err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	if m.Lockspace, err = d.internField(r, "lockspace", MaxLockspace); err != nil {
		return err
	}
	m.Resource, err = d.resourceField(r)
	return err
}

// DescribeStatus says what a DescribeReply carries. 0 is not a status.
type DescribeStatus uint8

// Describe statuses.
const (
	DescribeFound DescribeStatus = 1 // Locks are the resource's locks
	DescribeNone  DescribeStatus = 2 // the master has no lock on the resource
	DescribeRetry DescribeStatus = 3 // the master cannot answer now (recovering, another view): ask again
)

// DescribeReply is a master's answer to a DescribeRequest.
type DescribeReply struct {
	Epoch   uint64 // ≥ 1
	Status  DescribeStatus
	Locks   []DescribedLock // granted, then converting, then waiting, each in queue order; 0..Limits.MaxReport, none unless DescribeFound
	Omitted uint32          // locks left out past Limits.MaxReport
	// The resource's value block: valid or not, its sequence and length
	// (its bytes are not carried).
	ValueValid bool
	ValueSeq   uint64
	ValueLen   uint32
}

// DescribedLock is one lock as its master has it.
type DescribedLock struct {
	Node      string     // the lock's node, as the master's view names it, 1..MaxNodeName
	Lock      uint64     // ≠ 0
	Owner     uint64     // 0 = none
	Queue     uint8      // 1..3 as in ReportedLock
	Granted   modes.Mode // valid mode (NL while waiting, and for permits)
	Requested modes.Mode // valid mode
	Permits   uint32     // a semaphore's permits, 0 for a lock in a mode
	Count     uint32     // the permits held or asked for (with Permits)
	Token     uint64     // fencing token of the grant (0 while waiting)
	Waited    int64      // ns the queued request or conversion has waited, ≥ 0
	TTL       int64      // ns a lock with a TTL has left unless renewed, ≥ 0; 0 = none
}

const (
	describeReplyFields = 7
	describedLockFields = 11
)

// Type implements Message.
func (*DescribeReply) Type() Type { return TypeDescribeReply }

func (*DescribeReply) name() string { return "describe_reply" }

// Validate implements Message.
func (m *DescribeReply) Validate(l *Limits) error {
	if err := checkEpoch(m.Epoch); err != nil {
		return err
	}
	if m.Status < DescribeFound || m.Status > DescribeRetry {
		return fmt.Errorf("%w: unknown describe status %d", ErrInvalid, uint8(m.Status))
	}
	if m.Status != DescribeFound && (len(m.Locks) > 0 || m.Omitted > 0) {
		return fmt.Errorf("%w: locks in a describe reply of status %d", ErrInvalid, uint8(m.Status))
	}
	if len(m.Locks) > l.MaxReport {
		return fmt.Errorf("%w: %d locks described, limit %d", ErrInvalid, len(m.Locks), l.MaxReport)
	}
	for i := range m.Locks {
		if err := m.Locks[i].validate(); err != nil {
			return fmt.Errorf("lock %d: %w", i, err)
		}
		if i > 0 && m.Locks[i].Queue < m.Locks[i-1].Queue {
			return fmt.Errorf("lock %d: %w: queue %d after queue %d: locks must be granted, then converting, then waiting", i, ErrInvalid, m.Locks[i].Queue, m.Locks[i-1].Queue)
		}
	}
	return nil
}

func (k *DescribedLock) validate() error {
	if err := checkName("node", k.Node, MaxNodeName); err != nil {
		return err
	}
	if err := checkLock(k.Lock); err != nil {
		return err
	}
	if err := checkQueued(k.Queue, k.Granted); err != nil {
		return err
	}
	if err := checkMode(k.Requested); err != nil {
		return err
	}
	if k.Permits != 0 || k.Count != 0 {
		if err := checkPermits(k.Permits, k.Count); err != nil {
			return err
		}
		if k.Queue == QueueConverting || k.Granted != modes.NL || k.Requested != modes.NL {
			return fmt.Errorf("%w: permits on queue %d in mode %v/%v", ErrInvalid, k.Queue, k.Granted, k.Requested)
		}
	}
	if err := checkDuration("waited", k.Waited); err != nil {
		return err
	}
	return checkDuration("ttl", k.TTL)
}

func (m *DescribeReply) appendBody(b []byte) []byte {
	b = appendArrayLen(b, describeReplyFields)
	b = appendUint(b, m.Epoch)
	b = appendUint(b, uint64(m.Status))
	b = appendArrayLen(b, len(m.Locks))
	for i := range m.Locks {
		k := &m.Locks[i]
		b = appendArrayLen(b, describedLockFields)
		b = appendStr(b, k.Node)
		b = appendUint(b, k.Lock)
		b = appendUint(b, k.Owner)
		b = appendUint(b, uint64(k.Queue))
		b = appendUint(b, uint64(k.Granted))
		b = appendUint(b, uint64(k.Requested))
		b = appendUint(b, uint64(k.Permits))
		b = appendUint(b, uint64(k.Count))
		b = appendUint(b, k.Token)
		b = appendInt(b, k.Waited)
		b = appendInt(b, k.TTL)
	}
	b = appendUint(b, uint64(m.Omitted))
	b = appendBool(b, m.ValueValid)
	b = appendUint(b, m.ValueSeq)
	return appendUint(b, uint64(m.ValueLen))
}

func (m *DescribeReply) decodeBody(r *reader, d *Decoder) (err error) {
	if err = r.expectArray(describeReplyFields); err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	var v uint8
	if v, err = r.uint8(); err != nil {
		return err
	}
	m.Status = DescribeStatus(v)
	n, err := r.structArrayLen("locks", describedLockFields) // bounded before the make in reuse
	if err != nil {
		return err
	}
	if n > d.limits.MaxReport {
		return fmt.Errorf("%w: %d locks described, limit %d", ErrInvalid, n, d.limits.MaxReport)
	}
	m.Locks = reuse(m.Locks, n)
	for i := range m.Locks {
		if err = d.describedLock(r, &m.Locks[i]); err != nil {
			return fmt.Errorf("lock %d: %w", i, err)
		}
	}
	if m.Omitted, err = r.uint32(); err != nil {
		return err
	}
	if m.ValueValid, err = r.bool(); err != nil {
		return err
	}
	if m.ValueSeq, err = r.uint64(); err != nil {
		return err
	}
	m.ValueLen, err = r.uint32()
	return err
}

// describedLock overwrites every field of k. Node names repeat: they are
// interned.
func (d *Decoder) describedLock(r *reader, k *DescribedLock) (err error) {
	if err = r.expectArray(describedLockFields); err != nil {
		return err
	}
	if k.Node, err = d.internField(r, "node", MaxNodeName); err != nil {
		return err
	}
	if k.Lock, err = r.uint64(); err != nil {
		return err
	}
	if k.Owner, err = r.uint64(); err != nil {
		return err
	}
	if k.Queue, err = r.uint8(); err != nil {
		return err
	}
	if k.Granted, err = readMode(r); err != nil {
		return err
	}
	if k.Requested, err = readMode(r); err != nil {
		return err
	}
	if k.Permits, err = r.uint32(); err != nil {
		return err
	}
	if k.Count, err = r.uint32(); err != nil {
		return err
	}
	if k.Token, err = r.uint64(); err != nil {
		return err
	}
	if k.Waited, err = r.int64(); err != nil {
		return err
	}
	k.TTL, err = r.int64()
	return err
}
