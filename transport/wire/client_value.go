package wire

import "fmt"

// ClientValue reads a lock's state at the agent, its value block above all:
// answered by a ClientGrant.
type ClientValue struct {
	Lock uint64 // ≠ 0
}

// Type implements Message.
func (*ClientValue) Type() Type { return TypeClientValue }

func (*ClientValue) name() string { return "client_value" }

// Validate implements Message.
func (m *ClientValue) Validate(*Limits) error { return checkLock(m.Lock) }

func (m *ClientValue) appendBody(b []byte) []byte { return appendID(b, m.Lock) }

func (m *ClientValue) decodeBody(r *reader, d *Decoder) (err error) {
	m.Lock, err = readID(r, d)
	return err
}

// ClientSetValue sets the value block a lock held in PW or EX writes back
// when it next converts down or is unlocked (LVBWrite), or marks it not
// valid then (LVBInvalidate). Answered by ClientOK, or ClientError
// (CodeLimit for a value longer than the lockspace allows).
type ClientSetValue struct {
	Lock  uint64 // ≠ 0
	LVBOp LVBOp  // LVBWrite or LVBInvalidate
	LVB   []byte // ≤ Limits.MaxLVB, only with LVBWrite
}

const clientSetValueFields = 3

// Type implements Message.
func (*ClientSetValue) Type() Type { return TypeClientSetValue }

func (*ClientSetValue) name() string { return "client_set_value" }

// Validate implements Message.
func (m *ClientSetValue) Validate(l *Limits) error {
	if err := checkLock(m.Lock); err != nil {
		return err
	}
	if err := checkLVB(m.LVB, m.LVBOp, l); err != nil {
		return err
	}
	if m.LVBOp == LVBNone {
		return fmt.Errorf("%w: set value without an operation", ErrInvalid)
	}
	return nil
}

func (m *ClientSetValue) appendBody(b []byte) []byte {
	b = appendArrayLen(b, clientSetValueFields)
	b = appendUint(b, m.Lock)
	b = appendUint(b, uint64(m.LVBOp))
	return appendBin(b, m.LVB)
}

func (m *ClientSetValue) decodeBody(r *reader, d *Decoder) error {
	f := fieldReader{r: r, d: d}
	f.array(clientSetValueFields)
	m.Lock = f.uint64()
	m.LVBOp = LVBOp(f.uint8())
	m.LVB = f.bin("lvb", d.limits.MaxLVB)
	return f.err
}
