package wire

import "fmt"

// MaxPermits is the most permits a semaphore may have (the master's limit
// too).
const MaxPermits = 1 << 24

// SemaphoreRequest asks a semaphore's master for Count of its Permits
// permits. It is answered by a Completion (Mode NL, the grant's Token), as
// a LockRequest is; the permits are given back by an UnlockRequest and a
// queued request is withdrawn by a CancelRequest.
type SemaphoreRequest struct {
	Epoch     uint64 // membership epoch the sender is in, ≥ 1
	Lockspace string // 1..MaxLockspace bytes
	Resource  string // 1..Limits.MaxName bytes: the semaphore's name
	Lock      uint64 // lock id chosen by the requesting node, ≠ 0
	Owner     uint64 // owner for deadlock detection; 0 = none
	Permits   uint32 // the semaphore's permits, 1..MaxPermits
	Count     uint32 // the permits asked for, 1..Permits
	Flags     uint32 // request flags, defined by the dlm layer
	Timeout   int64  // ns to wait in the queue; 0 = no timeout
	TTL       int64  // ns the permits live without a Renew; 0 = no TTL
}

const semaphoreRequestFields = 10

// Type implements Message.
func (*SemaphoreRequest) Type() Type { return TypeSemaphoreRequest }

func (*SemaphoreRequest) name() string { return "semaphore_request" }

// Validate implements Message.
func (m *SemaphoreRequest) Validate(l *Limits) error {
	if err := checkTarget(m.Epoch, m.Lockspace, m.Resource, m.Lock, l); err != nil {
		return err
	}
	if err := checkPermits(m.Permits, m.Count); err != nil {
		return err
	}
	if err := checkDuration("timeout", m.Timeout); err != nil {
		return err
	}
	return checkDuration("ttl", m.TTL)
}

func checkPermits(permits, count uint32) error {
	switch {
	case permits == 0 || permits > MaxPermits:
		return fmt.Errorf("%w: a semaphore of %d permits, must be 1..%d", ErrInvalid, permits, MaxPermits)
	case count == 0 || count > permits:
		return fmt.Errorf("%w: %d permits of a semaphore of %d", ErrInvalid, count, permits)
	}
	return nil
}

func (m *SemaphoreRequest) appendBody(b []byte) []byte {
	b = appendArrayLen(b, semaphoreRequestFields)
	b = appendTarget(b, m.Epoch, m.Lockspace, m.Resource, m.Lock, m.Owner)
	b = appendUint(b, uint64(m.Permits))
	b = appendUint(b, uint64(m.Count))
	b = appendUint(b, uint64(m.Flags))
	b = appendInt(b, m.Timeout)
	return appendInt(b, m.TTL)
}

func (m *SemaphoreRequest) decodeBody(r *reader, d *Decoder) (err error) {
	if err = r.expectArray(semaphoreRequestFields); err != nil {
		return err
	}
	if err = d.target(r, &m.Epoch, &m.Lockspace, &m.Resource, &m.Lock, &m.Owner); err != nil {
		return err
	}
	if m.Permits, err = r.uint32(); err != nil {
		return err
	}
	if m.Count, err = r.uint32(); err != nil {
		return err
	}
	if m.Flags, err = r.uint32(); err != nil {
		return err
	}
	if m.Timeout, err = r.int64(); err != nil {
		return err
	}
	m.TTL, err = r.int64()
	return err
}

// PermitReport: a node tells the new master of semaphores the permits it
// holds or waits for there, as a LockReport does for locks (request; reply
// Ack).
type PermitReport struct {
	Epoch     uint64           // ≥ 1
	Lockspace string           // 1..MaxLockspace
	Permits   []ReportedPermit // 1..Limits.MaxReport
}

// ReportedPermit is one semaphore lock of the reporting node.
type ReportedPermit struct {
	Resource string // 1..Limits.MaxName
	Lock     uint64 // ≠ 0
	Owner    uint64 // as in the SemaphoreRequest; 0 = none
	Queue    uint8  // QueueGranted or QueueWaiting: permits do not convert
	Permits  uint32 // the semaphore's permits, 1..MaxPermits
	Count    uint32 // the permits held or asked for, 1..Permits
	Token    uint64 // fencing token of the grant (0 while waiting)
	TTL      int64  // ns, ≥ 0
}

const (
	permitReportFields   = 3
	reportedPermitFields = 8
)

// Type implements Message.
func (*PermitReport) Type() Type { return TypePermitReport }

func (*PermitReport) name() string { return "permit_report" }

// Validate implements Message.
func (m *PermitReport) Validate(l *Limits) error {
	if err := checkEpoch(m.Epoch); err != nil {
		return err
	}
	if err := checkName("lockspace", m.Lockspace, MaxLockspace); err != nil {
		return err
	}
	if len(m.Permits) == 0 || len(m.Permits) > l.MaxReport {
		return fmt.Errorf("%w: report of %d permits, must be 1..%d", ErrInvalid, len(m.Permits), l.MaxReport)
	}
	for i := range m.Permits {
		if err := m.Permits[i].validate(l); err != nil {
			return fmt.Errorf("permit %d: %w", i, err)
		}
	}
	return nil
}

func (p *ReportedPermit) validate(l *Limits) error {
	if err := checkName("resource", p.Resource, l.MaxName); err != nil {
		return err
	}
	if err := checkLock(p.Lock); err != nil {
		return err
	}
	if p.Queue != QueueGranted && p.Queue != QueueWaiting {
		return fmt.Errorf("%w: permits on queue %d, must be granted or waiting", ErrInvalid, p.Queue)
	}
	if err := checkPermits(p.Permits, p.Count); err != nil {
		return err
	}
	return checkDuration("ttl", p.TTL)
}

func (m *PermitReport) appendBody(b []byte) []byte {
	b = appendArrayLen(b, permitReportFields)
	b = appendUint(b, m.Epoch)
	b = appendStr(b, m.Lockspace)
	b = appendArrayLen(b, len(m.Permits))
	for i := range m.Permits {
		p := &m.Permits[i]
		b = appendArrayLen(b, reportedPermitFields)
		b = appendStr(b, p.Resource)
		b = appendUint(b, p.Lock)
		b = appendUint(b, p.Owner)
		b = appendUint(b, uint64(p.Queue))
		b = appendUint(b, uint64(p.Permits))
		b = appendUint(b, uint64(p.Count))
		b = appendUint(b, p.Token)
		b = appendInt(b, p.TTL)
	}
	return b
}

func (m *PermitReport) decodeBody(r *reader, d *Decoder) (err error) {
	if err = r.expectArray(permitReportFields); err != nil {
		return err
	}
	if m.Epoch, err = r.uint64(); err != nil {
		return err
	}
	if m.Lockspace, err = d.internField(r, "lockspace", MaxLockspace); err != nil {
		return err
	}
	n, err := r.structArrayLen("permits", reportedPermitFields) // bounded before the make in reuse
	if err != nil {
		return err
	}
	if n > d.limits.MaxReport {
		return fmt.Errorf("%w: report of %d permits, limit %d", ErrInvalid, n, d.limits.MaxReport)
	}
	m.Permits = reuse(m.Permits, n)
	for i := range m.Permits {
		if err = d.reportedPermit(r, &m.Permits[i]); err != nil {
			return fmt.Errorf("permit %d: %w", i, err)
		}
	}
	return nil
}

// reportedPermit overwrites every field of p.
func (d *Decoder) reportedPermit(r *reader, p *ReportedPermit) (err error) {
	if err = r.expectArray(reportedPermitFields); err != nil {
		return err
	}
	if p.Resource, err = d.stringField(r, "resource", d.limits.MaxName); err != nil {
		return err
	}
	if p.Lock, err = r.uint64(); err != nil {
		return err
	}
	if p.Owner, err = r.uint64(); err != nil {
		return err
	}
	if p.Queue, err = r.uint8(); err != nil {
		return err
	}
	if p.Permits, err = r.uint32(); err != nil {
		return err
	}
	if p.Count, err = r.uint32(); err != nil {
		return err
	}
	if p.Token, err = r.uint64(); err != nil {
		return err
	}
	p.TTL, err = r.int64()
	return err
}
