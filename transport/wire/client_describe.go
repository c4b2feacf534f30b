package wire

import (
	"fmt"

	"github.com/seed-a6839e30/dlm/modes"
)

// ClientDescribe asks about a resource: the agent asks the resource's
// master, wherever it is, for its queues (dlm's Lockspace.Describe) and
// answers with a ClientResource. It waits while the master is unreachable
// or recovering, up to Timeout, and can be withdrawn by ClientCancel.
type ClientDescribe struct {
	Lockspace string // 1..MaxLockspace bytes
	Resource  string // 1..Limits.MaxName bytes
	Timeout   int64  // ns to wait for the master; 0 = the session's TTL
}

const clientDescribeFields = 3

// Type implements Message.
func (*ClientDescribe) Type() Type { return TypeClientDescribe }

func (*ClientDescribe) name() string { return "client_describe" }

// Validate implements Message.
func (m *ClientDescribe) Validate(l *Limits) error {
	if err := checkName("lockspace", m.Lockspace, MaxLockspace); err != nil {
		return err
	}
	if err := checkName("resource", m.Resource, l.MaxName); err != nil {
		return err
	}
	return checkDuration("timeout", m.Timeout)
}

func (m *ClientDescribe) appendBody(b []byte) []byte {
	b = appendArrayLen(b, clientDescribeFields)
	b = appendStr(b, m.Lockspace)
	b = appendStr(b, m.Resource)
	return appendInt(b, m.Timeout)
}

func (m *ClientDescribe) decodeBody(r *reader, d *Decoder) error {
	f := fieldReader{r: r, d: d}
	f.array(clientDescribeFields)
	m.Lockspace = f.intern("lockspace", MaxLockspace)
	m.Resource = f.resource()
	m.Timeout = f.int64()
	return f.err
}

// ClientResource describes a resource as its master sees it. Known says
// whether the master has it: someone holds or waits for it; a resource it
// does not have has no locks and no value block state.
type ClientResource struct {
	Master   string // the node that masters it, 1..MaxNodeName bytes
	Known    bool
	LVB      []byte // ≤ Limits.MaxLVB, only with LVBPresent (the agent sends none)
	LVBSeq   uint64
	LVBFlags LVBFlags
	Permits  uint32                // a semaphore's permits, ≤ MaxPermits; 0 for a resource locked in modes
	Omitted  uint32                // locks left out of Locks (the master's reply limit)
	Locks    []ClientDescribedLock // ≤ MaxDescribed, in queue order: granted, converting, waiting
}

// ClientDescribedLock is one lock on a described resource.
type ClientDescribedLock struct {
	Queue     uint8      // QueueGranted, QueueConverting or QueueWaiting
	Granted   modes.Mode // NL for a waiting lock
	Requested modes.Mode // the mode asked for; Granted for a granted lock
	Node      string     // the node holding or asking for it (the agent of a client's lock), 1..MaxNodeName bytes
	Lock      uint64     // its id on that node
	Owner     uint64     // its owner there; 0 for none
	Token     uint64     // the fencing token of its latest grant; 0 while waiting
	Waited    int64      // ns a converting or waiting lock has waited
	TTL       int64      // ns left of its own TTL before its master releases it; 0 for none
	Count     uint32     // permits it holds or asks for, ≤ Permits; 0 on a resource locked in modes
}

const (
	clientResourceFields      = 8
	clientDescribedLockFields = 10
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
	if !m.Known && (len(m.Locks) > 0 || m.LVBFlags != 0 || m.Omitted != 0 || m.Permits != 0) {
		return fmt.Errorf("%w: locks or a value block of a resource not known", ErrInvalid)
	}
	if m.Permits > MaxPermits {
		return fmt.Errorf("%w: a semaphore of %d permits, limit %d", ErrInvalid, m.Permits, MaxPermits)
	}
	for _, dl := range m.Locks {
		if err := checkClientDescribed(&dl, m.Permits); err != nil {
			return err
		}
	}
	return nil
}

func checkClientDescribed(dl *ClientDescribedLock, permits uint32) error {
	if err := checkQueued(dl.Queue, dl.Granted); err != nil {
		return err
	}
	if err := checkMode(dl.Requested); err != nil {
		return err
	}
	if err := checkName("node", dl.Node, MaxNodeName); err != nil {
		return err
	}
	if err := checkLock(dl.Lock); err != nil {
		return err
	}
	if err := checkDuration("waited", dl.Waited); err != nil {
		return err
	}
	if err := checkDuration("ttl", dl.TTL); err != nil {
		return err
	}
	if dl.Count > permits {
		return fmt.Errorf("%w: a lock of %d permits on a semaphore of %d", ErrInvalid, dl.Count, permits)
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
	b = appendUint(b, uint64(m.Permits))
	b = appendUint(b, uint64(m.Omitted))
	b = appendArrayLen(b, len(m.Locks))
	for _, dl := range m.Locks {
		b = appendArrayLen(b, clientDescribedLockFields)
		b = appendUint(b, uint64(dl.Queue))
		b = appendUint(b, uint64(dl.Granted))
		b = appendUint(b, uint64(dl.Requested))
		b = appendStr(b, dl.Node)
		b = appendUint(b, dl.Lock)
		b = appendUint(b, dl.Owner)
		b = appendUint(b, dl.Token)
		b = appendInt(b, dl.Waited)
		b = appendInt(b, dl.TTL)
		b = appendUint(b, uint64(dl.Count))
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
	m.Permits = f.uint32()
	m.Omitted = f.uint32()
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
		dl.Node = f.intern("node", MaxNodeName)
		dl.Lock = f.uint64()
		dl.Owner = f.uint64()
		dl.Token = f.uint64()
		dl.Waited = f.int64()
		dl.TTL = f.int64()
		dl.Count = f.uint32()
	}
	return f.err
}
