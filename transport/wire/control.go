package wire

import "fmt"

// Ping is the links' heartbeat. It has no fields; the links send one on an
// idle connection so that the other end can tell a quiet peer from a dead
// one. It is never handed to the dlm layer.
type Ping struct{}

// Type implements Message.
func (*Ping) Type() Type { return TypePing }

// Validate implements Message; a Ping is always valid.
func (*Ping) Validate(*Limits) error { return nil }

func (*Ping) name() string                           { return "ping" }
func (*Ping) appendBody(b []byte) []byte             { return appendArrayLen(b, 0) }
func (*Ping) decodeBody(r *reader, _ *Decoder) error { return r.expectArray(0) }

// Hello is the first frame on every connection, in both directions. A node
// refuses a connection whose Hello names another cluster or another protocol
// version.
type Hello struct {
	Version   uint8  // protocol version of the sender (Version)
	ClusterID string // cluster the sender belongs to, 1..MaxClusterID bytes
	Node      string // sender's node name, 1..MaxNodeName bytes
	BootID    uint64 // random per process start, never 0
}

const helloFields = 4

// Type implements Message.
func (*Hello) Type() Type { return TypeHello }

func (*Hello) name() string { return "hello" }

// Validate implements Message.
func (m *Hello) Validate(*Limits) error {
	if m.Version == 0 {
		return fmt.Errorf("%w: hello version 0", ErrInvalid)
	}
	if err := checkName("cluster id", m.ClusterID, MaxClusterID); err != nil {
		return err
	}
	if err := checkName("node name", m.Node, MaxNodeName); err != nil {
		return err
	}
	if m.BootID == 0 {
		return fmt.Errorf("%w: boot id 0", ErrInvalid)
	}
	return nil
}

func (m *Hello) appendBody(b []byte) []byte {
	b = appendArrayLen(b, helloFields)
	b = appendUint(b, uint64(m.Version))
	b = appendStr(b, m.ClusterID)
	b = appendStr(b, m.Node)
	return appendUint(b, m.BootID)
}

func (m *Hello) decodeBody(r *reader, d *Decoder) (err error) {
	if err = r.expectArray(helloFields); err != nil {
		return err
	}
	if m.Version, err = r.uint8(); err != nil {
		return err
	}
	if m.ClusterID, err = d.internField(r, "cluster id", MaxClusterID); err != nil {
		return err
	}
	if m.Node, err = d.internField(r, "node name", MaxNodeName); err != nil {
		return err
	}
	m.BootID, err = r.uint64()
	return err
}
