package wire

import (
	"fmt"

	"github.com/seed-a6839e30/dlm/modes"
)

// ClientLock asks for a new lock in the session. It is answered when the
// lock is granted (ClientGrant) or fails (ClientError): at once with
// ClientTry, otherwise after waiting in the resource's queue.
type ClientLock struct {
	Lockspace string     // 1..MaxLockspace bytes
	Resource  string     // 1..Limits.MaxName bytes
	Mode      modes.Mode // NL..EX
	Flags     uint32     // ClientTry, ClientExpedite, ClientNotify
	Timeout   int64      // ns to wait in the queue; 0 = until cancelled
	TTL       int64      // ns the lock lives without a renewal of its own; 0 = by the session
	Owner     uint64     // the session's owner the lock belongs to; 0 = its own
}

const clientLockFields = 7

// Type implements Message.
func (*ClientLock) Type() Type { return TypeClientLock }

func (*ClientLock) name() string { return "client_lock" }

// Validate implements Message.
func (m *ClientLock) Validate(l *Limits) error {
	if err := checkName("lockspace", m.Lockspace, MaxLockspace); err != nil {
		return err
	}
	if err := checkName("resource", m.Resource, l.MaxName); err != nil {
		return err
	}
	if err := checkMode(m.Mode); err != nil {
		return err
	}
	if m.Flags&^clientLockFlags != 0 {
		return fmt.Errorf("%w: lock flags 0x%x", ErrInvalid, m.Flags)
	}
	if err := checkDuration("timeout", m.Timeout); err != nil {
		return err
	}
	return checkDuration("ttl", m.TTL)
}

func (m *ClientLock) appendBody(b []byte) []byte {
	b = appendArrayLen(b, clientLockFields)
	b = appendStr(b, m.Lockspace)
	b = appendStr(b, m.Resource)
	b = appendUint(b, uint64(m.Mode))
	b = appendUint(b, uint64(m.Flags))
	b = appendInt(b, m.Timeout)
	b = appendInt(b, m.TTL)
	return appendUint(b, m.Owner)
}

func (m *ClientLock) decodeBody(r *reader, d *Decoder) error {
	f := fieldReader{r: r, d: d}
	f.array(clientLockFields)
	m.Lockspace = f.intern("lockspace", MaxLockspace)
	m.Resource = f.resource()
	m.Mode = f.mode()
	m.Flags = f.uint32()
	m.Timeout = f.int64()
	m.TTL = f.int64()
	m.Owner = f.uint64()
	return f.err
}

// ClientConvert changes the mode of a granted lock of the session,
// answered by a ClientGrant (the new mode) or a ClientError (the lock
// keeps its mode, or NL if it was demoted: ClientError does not say; a
// later ClientValue does).
type ClientConvert struct {
	Lock    uint64     // the lock, as its ClientGrant named it, ≠ 0
	Mode    modes.Mode // the new mode
	Flags   uint32     // ClientTry, ClientQueue, ClientDemote, ClientFailFast
	Timeout int64      // ns to wait; 0 = until cancelled
}

const clientConvertFields = 4

// Type implements Message.
func (*ClientConvert) Type() Type { return TypeClientConvert }

func (*ClientConvert) name() string { return "client_convert" }

// Validate implements Message.
func (m *ClientConvert) Validate(*Limits) error {
	if err := checkLock(m.Lock); err != nil {
		return err
	}
	if err := checkMode(m.Mode); err != nil {
		return err
	}
	if m.Flags&^clientConvFlags != 0 {
		return fmt.Errorf("%w: convert flags 0x%x", ErrInvalid, m.Flags)
	}
	return checkDuration("timeout", m.Timeout)
}

func (m *ClientConvert) appendBody(b []byte) []byte {
	b = appendArrayLen(b, clientConvertFields)
	b = appendUint(b, m.Lock)
	b = appendUint(b, uint64(m.Mode))
	b = appendUint(b, uint64(m.Flags))
	return appendInt(b, m.Timeout)
}

func (m *ClientConvert) decodeBody(r *reader, d *Decoder) error {
	f := fieldReader{r: r, d: d}
	f.array(clientConvertFields)
	m.Lock = f.uint64()
	m.Mode = f.mode()
	m.Flags = f.uint32()
	m.Timeout = f.int64()
	return f.err
}

// ClientUnlock releases a lock of the session (writing back the value set
// by ClientSetValue, if the lock is held in PW or EX), answered by ClientOK
// or ClientError. Its body, like ClientCancel's and ClientValue's, is an
// array of one id.
type ClientUnlock struct {
	Lock uint64 // ≠ 0
}

// Type implements Message.
func (*ClientUnlock) Type() Type { return TypeClientUnlock }

func (*ClientUnlock) name() string { return "client_unlock" }

// Validate implements Message.
func (m *ClientUnlock) Validate(*Limits) error { return checkLock(m.Lock) }

func (m *ClientUnlock) appendBody(b []byte) []byte { return appendID(b, m.Lock) }

func (m *ClientUnlock) decodeBody(r *reader, d *Decoder) (err error) {
	m.Lock, err = readID(r, d)
	return err
}

// ClientCancel withdraws a ClientLock or ClientConvert still waiting: the
// request id of that request. The withdrawn request is answered with
// ClientError (CodeCancelled), or with its grant if that came first; the
// ClientCancel itself with ClientOK.
type ClientCancel struct {
	Request uint64 // ≠ 0
}

// Type implements Message.
func (*ClientCancel) Type() Type { return TypeClientCancel }

func (*ClientCancel) name() string { return "client_cancel" }

// Validate implements Message.
func (m *ClientCancel) Validate(*Limits) error {
	if m.Request == 0 {
		return fmt.Errorf("%w: request id 0 is reserved", ErrInvalid)
	}
	return nil
}

func (m *ClientCancel) appendBody(b []byte) []byte { return appendID(b, m.Request) }

func (m *ClientCancel) decodeBody(r *reader, d *Decoder) (err error) {
	m.Request, err = readID(r, d)
	return err
}

// appendID and readID write and read the body of a message of one id.
func appendID(b []byte, id uint64) []byte { return appendUint(appendArrayLen(b, 1), id) }

func readID(r *reader, d *Decoder) (uint64, error) {
	f := fieldReader{r: r, d: d}
	f.array(1)
	id := f.uint64()
	return id, f.err
}

// ClientGrant answers a ClientLock or ClientConvert that was granted, and a
// ClientValue: the lock's state.
type ClientGrant struct {
	Lock     uint64     // the lock's id in the session, ≠ 0
	Mode     modes.Mode // its granted mode
	Token    uint64     // the fencing token of its latest grant or up-conversion
	Demoted  bool       // a conversion deadlock demoted it to NL
	LVB      []byte     // the value block, ≤ Limits.MaxLVB, only with LVBPresent
	LVBSeq   uint64     // the value block's sequence number
	LVBFlags LVBFlags
}

const clientGrantFields = 7

// Type implements Message.
func (*ClientGrant) Type() Type { return TypeClientGrant }

func (*ClientGrant) name() string { return "client_grant" }

// Validate implements Message.
func (m *ClientGrant) Validate(l *Limits) error {
	if err := checkLock(m.Lock); err != nil {
		return err
	}
	if err := checkMode(m.Mode); err != nil {
		return err
	}
	return checkLVBBlock(m.LVB, m.LVBFlags, l)
}

func (m *ClientGrant) appendBody(b []byte) []byte {
	b = appendArrayLen(b, clientGrantFields)
	b = appendUint(b, m.Lock)
	b = appendUint(b, uint64(m.Mode))
	b = appendUint(b, m.Token)
	b = appendBool(b, m.Demoted)
	b = appendBin(b, m.LVB)
	b = appendUint(b, m.LVBSeq)
	return appendUint(b, uint64(m.LVBFlags))
}

func (m *ClientGrant) decodeBody(r *reader, d *Decoder) error {
	f := fieldReader{r: r, d: d}
	f.array(clientGrantFields)
	m.Lock = f.uint64()
	m.Mode = f.mode()
	m.Token = f.uint64()
	m.Demoted = f.bool()
	m.LVB = f.bin("lvb", d.limits.MaxLVB)
	m.LVBSeq = f.uint64()
	m.LVBFlags = LVBFlags(f.uint8())
	return f.err
}
