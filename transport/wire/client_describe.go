package wire

import (
	"fmt"

	"github.com/seed-a6839e30/dlm/modes"
)

// ClientDescribe asks about a resource: who masters it and, if the agent
// does, its queues and value block. Answered by a ClientResource.
type ClientDescribe struct {
	Lockspace string // 1..MaxLockspace bytes
	Resource  string // 1..Limits.MaxName bytes
}

const clientDescribeFields = 2

// Type implements Message.
func (*ClientDescribe) Type() Type { return TypeClientDescribe }

func (*ClientDescribe) name() string { return "client_describe" }

// Validate implements Message.
func (m *ClientDescribe) Validate(l *Limits) error {
	if err := checkName("lockspace", m.Lockspace, MaxLockspace); err != nil {
		return err
	}
	return checkName("resource", m.Resource, l.MaxName)
}

func (m *ClientDescribe) appendBody(b []byte) []byte {
	b = appendArrayLen(b, clientDescribeFields)
	b = appendStr(b, m.Lockspace)
	return appendStr(b, m.Resource)
}

func (m *ClientDescribe) decodeBody(r *reader, d *Decoder) error {
	f := fieldReader{r: r, d: d}
	f.array(clientDescribeFields)
	m.Lockspace = f.intern("lockspace", MaxLockspace)
	m.Resource = f.resource()
	return f.err
}

// ClientResource describes a resource. Known says whether the rest is
// filled in: the agent masters the resource and it has locks.
type ClientResource struct {
	Master   string // the node that masters it, 1..MaxNodeName bytes
	Known    bool
	LVB      []byte // ≤ Limits.MaxLVB, only with LVBPresent
	LVBSeq   uint64
	LVBFlags LVBFlags
	Locks    []ClientDescribedLock // ≤ MaxDescribed, in queue order: granted, converting, waiting
}

// ClientDescribedLock is one lock on a described resource.
type ClientDescribedLock struct {
	Queue     uint8      // QueueGranted, QueueConverting or QueueWaiting
	Granted   modes.Mode // NL for a waiting lock
	Requested modes.Mode // the mode asked for; Granted for a granted lock
}

const (
	clientResourceFields      = 6
	clientDescribedLockFields = 3
)

// Type implements Message.
func (*ClientResource) Type() Type { return TypeClientResource }

func (*ClientResource) name() string { return "client_resource" }

// Validate implements Message.
func (m *ClientResource) Validate(l *Limits) error {
	if err := checkName("master", m.Master, MaxNodeName); err != nil {
		return err
	}
	if err := checkLVBBlock(m.LVB, m.LVBFlags, l); err != nil {
		return err
	}
	if len(m.Locks) > MaxDescribed {
		return fmt.Errorf("%w: %d locks described, limit %d", ErrInvalid, len(m.Locks), MaxDescribed)
	}
	if !m.Known && (len(m.Locks) > 0 || m.LVBFlags != 0) {
		return fmt.Errorf("%w: locks or a value block of a resource not known", ErrInvalid)
	}
	for _, dl := range m.Locks {
		if err := checkQueued(dl.Queue, dl.Granted); err != nil {
			return err
		}
		if err := checkMode(dl.Requested); err != nil {
			return err
		}
	}
	return nil
}

func (m *ClientResource) appendBody(b []byte) []byte {
	b = appendArrayLen(b, clientResourceFields)
	b = appendStr(b, m.Master)
	b = appendBool(b, m.Known)
	b = appendBin(b, m.LVB)
	b = appendUint(b, m.LVBSeq)
	b = appendUint(b, uint64(m.LVBFlags))
	b = appendArrayLen(b, len(m.Locks))
	for _, dl := range m.Locks {
		b = appendArrayLen(b, clientDescribedLockFields)
		b = appendUint(b, uint64(dl.Queue))
		b = appendUint(b, uint64(dl.Granted))
		b = appendUint(b, uint64(dl.Requested))
	}
	return b
}

func (m *ClientResource) decodeBody(r *reader, d *Decoder) error {
	f := fieldReader{r: r, d: d}
	f.array(clientResourceFields)
	m.Master = f.intern("master", MaxNodeName)
	m.Known = f.bool()
	m.LVB = f.bin("lvb", d.limits.MaxLVB)
	m.LVBSeq = f.uint64()
	m.LVBFlags = LVBFlags(f.uint8())
	if f.err != nil {
		return f.err
	}
	n, err := r.structArrayLen("locks", clientDescribedLockFields)
	if err != nil {
		return err
	}
	if n > MaxDescribed {
		return fmt.Errorf("%w: %d locks described, limit %d", ErrInvalid, n, MaxDescribed)
	}
	m.Locks = reuse(m.Locks, n)
	for i := range m.Locks {
		dl := &m.Locks[i]
		f.array(clientDescribedLockFields)
		dl.Queue = f.uint8()
		dl.Granted = f.mode()
		dl.Requested = f.mode()
	}
	return f.err
}
