package wire

import (
	"fmt"

	"github.com/seed-a6839e30/dlm/modes"
)

// ClientOK answers a ClientUnlock, ClientCancel, ClientSetValue or
// ClientBye that went through. Its body is an empty array.
type ClientOK struct{}

// Type implements Message.
func (*ClientOK) Type() Type { return TypeClientOK }

func (*ClientOK) name() string { return "client_ok" }

// Validate implements Message.
func (*ClientOK) Validate(*Limits) error { return nil }

func (*ClientOK) appendBody(b []byte) []byte { return appendArrayLen(b, 0) }

func (*ClientOK) decodeBody(r *reader, _ *Decoder) error { return r.expectArray(0) }

// ClientBye ends the session: its locks are released and its waiting
// requests fail; the agent answers ClientOK and closes the connection. Its
// body is an empty array.
type ClientBye struct{}

// Type implements Message.
func (*ClientBye) Type() Type { return TypeClientBye }

func (*ClientBye) name() string { return "client_bye" }

// Validate implements Message.
func (*ClientBye) Validate(*Limits) error { return nil }

func (*ClientBye) appendBody(b []byte) []byte { return appendArrayLen(b, 0) }

func (*ClientBye) decodeBody(r *reader, _ *Decoder) error { return r.expectArray(0) }

// ClientError answers a request that failed; sent one-way (id 0), it says
// why the agent is closing the connection.
type ClientError struct {
	Code ClientCode
	Text string // what happened, ≤ MaxErr bytes
}

const clientErrorFields = 2

// Type implements Message.
func (*ClientError) Type() Type { return TypeClientError }

func (*ClientError) name() string { return "client_error" }

// Validate implements Message.
func (m *ClientError) Validate(*Limits) error {
	if err := checkCode(m.Code); err != nil {
		return err
	}
	return checkText(m.Text)
}

func checkText(s string) error {
	if len(s) > MaxErr {
		return fmt.Errorf("%w: error text of %d bytes, limit %d", ErrInvalid, len(s), MaxErr)
	}
	return nil
}

func (m *ClientError) appendBody(b []byte) []byte {
	b = appendArrayLen(b, clientErrorFields)
	b = appendUint(b, uint64(m.Code))
	return appendStr(b, m.Text)
}

func (m *ClientError) decodeBody(r *reader, d *Decoder) error {
	f := fieldReader{r: r, d: d}
	f.array(clientErrorFields)
	m.Code = ClientCode(f.uint8())
	m.Text = f.str("text", MaxErr)
	return f.err
}

// ClientBlocking tells the client that its lock blocks another request
// (only for locks requested with ClientNotify), with the mode wanted.
type ClientBlocking struct {
	Lock uint64 // ≠ 0
	Mode modes.Mode
}

const clientBlockingFields = 2

// Type implements Message.
func (*ClientBlocking) Type() Type { return TypeClientBlocking }

func (*ClientBlocking) name() string { return "client_blocking" }

// Validate implements Message.
func (m *ClientBlocking) Validate(*Limits) error {
	if err := checkLock(m.Lock); err != nil {
		return err
	}
	return checkMode(m.Mode)
}

func (m *ClientBlocking) appendBody(b []byte) []byte {
	b = appendArrayLen(b, clientBlockingFields)
	b = appendUint(b, m.Lock)
	return appendUint(b, uint64(m.Mode))
}

func (m *ClientBlocking) decodeBody(r *reader, d *Decoder) error {
	f := fieldReader{r: r, d: d}
	f.array(clientBlockingFields)
	m.Lock = f.uint64()
	m.Mode = f.mode()
	return f.err
}

// ClientLost tells the client that a lock of its session can no longer be
// trusted, and why; the agent has forgotten it (a later ClientUnlock of it
// is answered with CodeNotHeld).
type ClientLost struct {
	Lock uint64 // ≠ 0
	Code ClientCode
	Text string // ≤ MaxErr bytes
}

const clientLostFields = 3

// Type implements Message.
func (*ClientLost) Type() Type { return TypeClientLost }

func (*ClientLost) name() string { return "client_lost" }

// Validate implements Message.
func (m *ClientLost) Validate(*Limits) error {
	if err := checkLock(m.Lock); err != nil {
		return err
	}
	if err := checkCode(m.Code); err != nil {
		return err
	}
	return checkText(m.Text)
}

func (m *ClientLost) appendBody(b []byte) []byte {
	b = appendArrayLen(b, clientLostFields)
	b = appendUint(b, m.Lock)
	b = appendUint(b, uint64(m.Code))
	return appendStr(b, m.Text)
}

func (m *ClientLost) decodeBody(r *reader, d *Decoder) error {
	f := fieldReader{r: r, d: d}
	f.array(clientLostFields)
	m.Lock = f.uint64()
	m.Code = ClientCode(f.uint8())
	m.Text = f.str("text", MaxErr)
	return f.err
}
