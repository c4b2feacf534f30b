package wire

import (
	"fmt"

	"github.com/seed-a6839e30/dlm/modes"
)

// This file holds the lock reports that rebuild lock tables on new masters
// after a view change, and their Ack. Reports are the only messages with
// arrays of structs, nested in a MasterReport; their decoders bound each
// array by the bytes that remain (structArrayLen) and by Limits.MaxReport
// before sizing a slice, and a MasterReport's queued locks in all by
// Limits.MaxQueued, so that a report allocates at most a small multiple of its
// frame. Resource names are not interned (they do not repeat); LVBs alias the
// frame.

// Queues a reported lock is in. 0 is not a queue, so a forgotten field is
// refused.
const (
	QueueGranted    = 1 // granted in Granted mode
	QueueConverting = 2 // granted in Granted mode, converting to Requested
	QueueWaiting    = 3 // not granted yet (Granted is NL)
)

// Ack is a bare acknowledgement, the reply to a LockReport or MasterReport.
type Ack struct {
	Epoch uint64 // ≥ 1
}

const ackFields = 1

// Type implements Message.
func (*Ack) Type() Type { return TypeAck }

func (*Ack) name() string { return "ack" }

// Validate implements Message.
func (m *Ack) Validate(*Limits) error { return checkEpoch(m.Epoch) }

func (m *Ack) appendBody(b []byte) []byte {
	b = appendArrayLen(b, ackFields)
	return appendUint(b, m.Epoch)
}

func (m *Ack) decodeBody(r *reader, _ *Decoder) (err error) {
	if err = r.expectArray(ackFields); err != nil {
		return err
	}
	m.Epoch, err = r.uint64()
	return err
}

// LockReport: a node tells the new master of resources the locks it holds or
// waits for there (request; reply Ack).
type LockReport struct {
	Epoch     uint64         // ≥ 1
	Lockspace string         // 1..MaxLockspace
	Locks     []ReportedLock // 1..Limits.MaxReport
}

// ReportedLock is one lock of the reporting node.
type ReportedLock struct {
	Resource  string     // 1..Limits.MaxName
	Lock      uint64     // ≠ 0
	Owner     uint64     // as in the LockRequest; 0 = none
	Queue     uint8      // 1 granted, 2 converting, 3 waiting (QueueGranted...)
	Granted   modes.Mode // valid mode (NL for a waiting lock)
	Requested modes.Mode // valid mode
	Token     uint64     // fencing token of the grant
	TTL       int64      // ns, ≥ 0
	LVB       []byte     // the holder's copy of the value block, ≤ Limits.MaxLVB, only with LVBPresent
	LVBSeq    uint64     // sequence number of that copy
	LVBFlags  LVBFlags   // LVBPresent, LVBValid
	Session   uint64     // the session the lock is in, as in the LockRequest; 0 = none
}

const (
	lockReportFields   = 3
	reportedLockFields = 12
)

// Type implements Message.
func (*LockReport) Type() Type { return TypeLockReport }

func (*LockReport) name() string { return "lock_report" }

// Validate implements Message.
func (m *LockReport) Validate(l *Limits) error {
	if err := checkEpoch(m.Epoch); err != nil {
		return err
	}
	if err := checkName("lockspace", m.Lockspace, MaxLockspace); err != nil {
		return err
	}
	if len(m.Locks) == 0 || len(m.Locks) > l.MaxReport {
		return fmt.Errorf("%w: report of %d locks, must be 1..%d", ErrInvalid, len(m.Locks), l.MaxReport)
	}
	for i := range m.Locks {
		if err := m.Locks[i].validate(l); err != nil {
			return fmt.Errorf("lock %d: %w", i, err)
		}
	}
	return nil
}

func (k *ReportedLock) validate(l *Limits) error {
	if err := checkName("resource", k.Resource, l.MaxName); err != nil {
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
	if err := checkDuration("ttl", k.TTL); err != nil {
		return err
	}
	if err := checkSession(k.Session, k.TTL); err != nil {
		return err
	}
	return checkLVBBlock(k.LVB, k.LVBFlags, l)
}

func (m *LockReport) appendBody(b []byte) []byte {
	b = appendArrayLen(b, lockReportFields)
	b = appendUint(b, m.Epoch)
	b = appendStr(b, m.Lockspace)
	b = appendArrayLen(b, len(m.Locks))
	for i := range m.Locks {
		k := &m.Locks[i]
		b = appendArrayLen(b, reportedLockFields)
		b = appendStr(b, k.Resource)
		b = appendUint(b, k.Lock)
		b = appendUint(b, k.Owner)
		b = appendUint(b, uint64(k.Queue))
		b = appendUint(b, uint64(k.Granted))
		b = appendUint(b, uint64(k.Requested))
		b = appendUint(b, k.Token)
		b = appendInt(b, k.TTL)
		b = appendBin(b, k.LVB)
		b = appendUint(b, k.LVBSeq)
		b = appendUint(b, uint64(k.LVBFlags))
		b = appendUint(b, k.Session)
	}
	return b
}

func (m *LockReport) decodeBody(r *reader, d *Decoder) (err error) {
	if err = r.expectArray(lockReportFields); err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	if m.Lockspace, err = d.internField(r, "lockspace", MaxLockspace); err != nil {
		return err
	}
	n, err := r.structArrayLen("locks", reportedLockFields) // bounded before the make in reuse
	if err != nil {
		return err
	}
	if n > d.limits.MaxReport {
		return fmt.Errorf("%w: report of %d locks, limit %d", ErrInvalid, n, d.limits.MaxReport)
	}
	m.Locks = reuse(m.Locks, n)
	for i := range m.Locks {
		if err = d.reportedLock(r, &m.Locks[i]); err != nil {
			return fmt.Errorf("lock %d: %w", i, err)
		}
	}
	return nil
}

// reportedLock overwrites every field of k.
func (d *Decoder) reportedLock(r *reader, k *ReportedLock) (err error) {
	if err = r.expectArray(reportedLockFields); err != nil {
		return err
	}
	if k.Resource, err = d.stringField(r, "resource", d.limits.MaxName); err != nil {
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
	if k.Token, err = r.uint64(); err != nil {
		return err
	}
	if k.TTL, err = r.int64(); err != nil {
		return err
	}
	if k.LVB, err = r.bin("lvb", d.limits.MaxLVB); err != nil {
		return err
	}
	if k.LVBSeq, err = r.uint64(); err != nil {
		return err
	}
	if k.LVBFlags, err = readLVBFlags(r); err != nil {
		return err
	}
	k.Session, err = r.uint64()
	return err
}

// MasterReport: a node that mastered resources before the new view tells
// their new master what it knew: value blocks, queue order and the highest
// token its table issued (request; reply Ack).
type MasterReport struct {
	Epoch     uint64             // ≥ 1
	Lockspace string             // 1..MaxLockspace
	LastToken uint64             // the highest fencing token the old table issued
	Resources []ReportedResource // 0..Limits.MaxReport (0 allowed: carries LastToken alone)
}

// ReportedResource is one resource as its old master had it.
type ReportedResource struct {
	Resource string       // 1..Limits.MaxName
	LVB      []byte       // ≤ Limits.MaxLVB, only with LVBPresent
	LVBSeq   uint64       // sequence number of the LVB
	LVBFlags LVBFlags     // LVBPresent, LVBValid
	Locks    []QueuedLock // in queue order (granted, then converting, then waiting); 0..Limits.MaxReport
}

// QueuedLock names a lock in its old master's queues.
type QueuedLock struct {
	Node    uint32     // the lock's node, as a numeric node id (any value)
	Lock    uint64     // ≠ 0
	Queue   uint8      // 1..3 as in ReportedLock
	Granted modes.Mode // valid mode (NL for waiting)
}

const (
	masterReportFields     = 4
	reportedResourceFields = 5
	queuedLockFields       = 4
)

// Type implements Message.
func (*MasterReport) Type() Type { return TypeMasterReport }

func (*MasterReport) name() string { return "master_report" }

// Validate implements Message.
func (m *MasterReport) Validate(l *Limits) error {
	if err := checkEpoch(m.Epoch); err != nil {
		return err
	}
	if err := checkName("lockspace", m.Lockspace, MaxLockspace); err != nil {
		return err
	}
	if len(m.Resources) > l.MaxReport {
		return fmt.Errorf("%w: report of %d resources, limit %d", ErrInvalid, len(m.Resources), l.MaxReport)
	}
	queued := 0
	for i := range m.Resources {
		res := &m.Resources[i]
		if err := res.validate(l); err != nil {
			return fmt.Errorf("resource %d: %w", i, err)
		}
		queued += len(res.Locks)
	}
	if queued > l.MaxQueued() {
		return fmt.Errorf("%w: report of %d queued locks, limit %d", ErrInvalid, queued, l.MaxQueued())
	}
	return nil
}

func (res *ReportedResource) validate(l *Limits) error {
	if err := checkName("resource", res.Resource, l.MaxName); err != nil {
		return err
	}
	if err := checkLVBBlock(res.LVB, res.LVBFlags, l); err != nil {
		return err
	}
	if len(res.Locks) > l.MaxReport {
		return fmt.Errorf("%w: resource with %d queued locks, limit %d", ErrInvalid, len(res.Locks), l.MaxReport)
	}
	for i := range res.Locks {
		q := &res.Locks[i]
		if err := checkLock(q.Lock); err != nil {
			return fmt.Errorf("lock %d: %w", i, err)
		}
		if err := checkQueued(q.Queue, q.Granted); err != nil {
			return fmt.Errorf("lock %d: %w", i, err)
		}
		// The new master rebuilds its queues from this order; a lock
		// out of it would be granted ahead of locks that waited longer.
		if i > 0 && q.Queue < res.Locks[i-1].Queue {
			return fmt.Errorf("lock %d: %w: queue %d after queue %d: locks must be granted, then converting, then waiting", i, ErrInvalid, q.Queue, res.Locks[i-1].Queue)
		}
	}
	return nil
}

func (m *MasterReport) appendBody(b []byte) []byte {
	b = appendArrayLen(b, masterReportFields)
	b = appendUint(b, m.Epoch)
	b = appendStr(b, m.Lockspace)
	b = appendUint(b, m.LastToken)
	b = appendArrayLen(b, len(m.Resources))
	for i := range m.Resources {
		res := &m.Resources[i]
		b = appendArrayLen(b, reportedResourceFields)
		b = appendStr(b, res.Resource)
		b = appendBin(b, res.LVB)
		b = appendUint(b, res.LVBSeq)
		b = appendUint(b, uint64(res.LVBFlags))
		b = appendArrayLen(b, len(res.Locks))
		for j := range res.Locks {
			q := &res.Locks[j]
			b = appendArrayLen(b, queuedLockFields)
			b = appendUint(b, uint64(q.Node))
			b = appendUint(b, q.Lock)
			b = appendUint(b, uint64(q.Queue))
			b = appendUint(b, uint64(q.Granted))
		}
	}
	return b
}

func (m *MasterReport) decodeBody(r *reader, d *Decoder) (err error) {
	if err = r.expectArray(masterReportFields); err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	if m.Lockspace, err = d.internField(r, "lockspace", MaxLockspace); err != nil {
		return err
	}
	if m.LastToken, err = r.uint64(); err != nil {
		return err
	}
	n, err := r.structArrayLen("resources", reportedResourceFields) // bounded before the make in reuse
	if err != nil {
		return err
	}
	if n > d.limits.MaxReport {
		return fmt.Errorf("%w: report of %d resources, limit %d", ErrInvalid, n, d.limits.MaxReport)
	}
	m.Resources = reuse(m.Resources, n)
	queued := 0
	for i := range m.Resources {
		if err = d.reportedResource(r, &m.Resources[i], &queued); err != nil {
			return fmt.Errorf("resource %d: %w", i, err)
		}
	}
	return nil
}

// reportedResource overwrites every field of res, reusing the array of its
// Locks. queued counts the queued locks of the report so far: their total is
// checked before each make, not after, so that a frame of many resources
// cannot allocate past Limits.MaxQueued.
func (d *Decoder) reportedResource(r *reader, res *ReportedResource, queued *int) (err error) {
	if err = r.expectArray(reportedResourceFields); err != nil {
		return err
	}
	if res.Resource, err = d.stringField(r, "resource", d.limits.MaxName); err != nil {
		return err
	}
	if res.LVB, err = r.bin("lvb", d.limits.MaxLVB); err != nil {
		return err
	}
	if res.LVBSeq, err = r.uint64(); err != nil {
		return err
	}
	if res.LVBFlags, err = readLVBFlags(r); err != nil {
		return err
	}
	n, err := r.structArrayLen("locks", queuedLockFields)
	if err != nil {
		return err
	}
	if n > d.limits.MaxReport {
		return fmt.Errorf("%w: resource with %d queued locks, limit %d", ErrInvalid, n, d.limits.MaxReport)
	}
	if *queued += n; *queued > d.limits.MaxQueued() {
		return fmt.Errorf("%w: report of more than %d queued locks", ErrInvalid, d.limits.MaxQueued())
	}
	res.Locks = reuse(res.Locks, n)
	for j := range res.Locks {
		if err = readQueuedLock(r, &res.Locks[j]); err != nil {
			return fmt.Errorf("lock %d: %w", j, err)
		}
	}
	return nil
}

// readQueuedLock overwrites every field of q.
func readQueuedLock(r *reader, q *QueuedLock) (err error) {
	if err = r.expectArray(queuedLockFields); err != nil {
		return err
	}
	if q.Node, err = r.uint32(); err != nil {
		return err
	}
	if q.Lock, err = r.uint64(); err != nil {
		return err
	}
	if q.Queue, err = r.uint8(); err != nil {
		return err
	}
	q.Granted, err = readMode(r)
	return err
}

func readLVBFlags(r *reader) (LVBFlags, error) {
	v, err := r.uint8()
	return LVBFlags(v), err
}
