package wire

import "fmt"

// ClientAcquire asks for Count permits of the semaphore Semaphore, of
// Permits permits, in the session. It is answered as a ClientLock is: by a
// ClientGrant (Mode NL, the acquisition's fencing token; Lock names the
// permits from then on) when the permits are granted, or a ClientError.
// The permits are given back by a ClientUnlock of that id, renewed (with
// a TTL of their own) by a ClientKeepAlive of it, and reported lost by a
// ClientLost; a waiting ClientAcquire is withdrawn by ClientCancel.
type ClientAcquire struct {
	Lockspace string // 1..MaxLockspace bytes
	Semaphore string // 1..Limits.MaxName bytes
	Permits   uint32 // the semaphore's permits, 1..MaxPermits
	Count     uint32 // the permits asked for, 1..Permits
	Flags     uint32 // ClientTry, ClientFailFast
	Timeout   int64  // ns to wait in the queue; 0 = until cancelled
	TTL       int64  // ns the permits live without a renewal of their own; 0 = by the session
	Owner     uint64 // the session's owner the permits belong to; 0 = their own
}

const clientAcquireFields = 8

// Type implements Message.
func (*ClientAcquire) Type() Type { return TypeClientAcquire }

func (*ClientAcquire) name() string { return "client_acquire" }

// Validate implements Message.
func (m *ClientAcquire) Validate(l *Limits) error {
	if err := checkName("lockspace", m.Lockspace, MaxLockspace); err != nil {
		return err
	}
	if err := checkName("semaphore", m.Semaphore, l.MaxName); err != nil {
		return err
	}
	if err := checkPermits(m.Permits, m.Count); err != nil {
		return err
	}
	if m.Flags&^clientAcquireFlags != 0 {
		return fmt.Errorf("%w: acquire flags 0x%x", ErrInvalid, m.Flags)
	}
	if err := checkDuration("timeout", m.Timeout); err != nil {
		return err
	}
	return checkDuration("ttl", m.TTL)
}

func (m *ClientAcquire) appendBody(b []byte) []byte {
	b = appendArrayLen(b, clientAcquireFields)
	b = appendStr(b, m.Lockspace)
	b = appendStr(b, m.Semaphore)
	b = appendUint(b, uint64(m.Permits))
	b = appendUint(b, uint64(m.Count))
	b = appendUint(b, uint64(m.Flags))
	b = appendInt(b, m.Timeout)
	b = appendInt(b, m.TTL)
	return appendUint(b, m.Owner)
}

func (m *ClientAcquire) decodeBody(r *reader, d *Decoder) error {
	f := fieldReader{r: r, d: d}
	f.array(clientAcquireFields)
	m.Lockspace = f.intern("lockspace", MaxLockspace)
	m.Semaphore = f.resource()
	m.Permits = f.uint32()
	m.Count = f.uint32()
	m.Flags = f.uint32()
	m.Timeout = f.int64()
	m.TTL = f.int64()
	m.Owner = f.uint64()
	return f.err
}
