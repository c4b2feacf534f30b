package wire

import "fmt"

// Ping is the links' heartbeat, and their acknowledgement: the links send
// one on an idle connection so that the other end can tell a quiet peer
// from a dead one, and every few hundred frames, so that the sender can
// forget what arrived (see Hello). It is never handed to the dlm layer.
type Ping struct {
	// RecvSession and Received acknowledge the other end's frames: this
	// node has handled Received frames of that end's send session
	// RecvSession. Zero and zero acknowledge nothing.
	RecvSession uint64
	Received    uint64
	// Closing says the sender is closing: its session ends, nothing more
	// will come, and the other end should not wait for it to reconnect.
	Closing bool
}

const pingFields = 3

// Type implements Message.
func (*Ping) Type() Type { return TypePing }

// Validate implements Message; a Ping is always valid.
func (*Ping) Validate(*Limits) error { return nil }

func (*Ping) name() string { return "ping" }

func (m *Ping) appendBody(b []byte) []byte {
	b = appendArrayLen(b, pingFields)
	b = appendUint(b, m.RecvSession)
	b = appendUint(b, m.Received)
	return appendBool(b, m.Closing)
}

func (m *Ping) decodeBody(r *reader, _ *Decoder) (err error) {
	if err = r.expectArray(pingFields); err != nil {
		return err
	}
	if m.RecvSession, err = r.uint64(); err != nil {
		return err
	}
	if m.Received, err = r.uint64(); err != nil {
		return err
	}
	m.Closing, err = r.bool()
	return err
}

// Hello is the first frame on every connection, in both directions. A node
// refuses a connection whose Hello names another cluster or another protocol
// version.
//
// It also resumes the link's sessions. Each node numbers the frames it
// sends a peer (every frame but Ping and Hello) within a send session,
// which lasts across reconnections for as long as the node can resend
// what the peer may not have received; the peer counts what it handled
// of that session. On a new connection each end says how many frames of
// the other's session it handled, and the other resends the rest, in
// order: a connection that broke loses nothing, and nothing arrives
// twice. A node that cannot resend (it started a new session) tells so
// by its Session, and both ends learn that frames were lost.
type Hello struct {
	Version   uint8  // protocol version of the sender (Version)
	ClusterID string // cluster the sender belongs to, 1..MaxClusterID bytes
	Node      string // sender's node name, 1..MaxNodeName bytes
	BootID    uint64 // random per process start, never 0
	// Session is the sender's send session towards the receiver: the
	// frames that follow this Hello continue it.
	Session uint64
	// RecvBoot and RecvSession name the receiver's send session the sender
	// handled Received frames of (zero: none known, for a first contact).
	RecvBoot    uint64
	RecvSession uint64
	Received    uint64
}

const helloFields = 8

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
	if m.Session == 0 {
		return fmt.Errorf("%w: session 0", ErrInvalid)
	}
	return nil
}

func (m *Hello) appendBody(b []byte) []byte {
	b = appendArrayLen(b, helloFields)
	b = appendUint(b, uint64(m.Version))
	b = appendStr(b, m.ClusterID)
	b = appendStr(b, m.Node)
	b = appendUint(b, m.BootID)
	b = appendUint(b, m.Session)
	b = appendUint(b, m.RecvBoot)
	b = appendUint(b, m.RecvSession)
	return appendUint(b, m.Received)
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
	if m.BootID, err = r.uint64(); err != nil {
		return err
	}
	if m.Session, err = r.uint64(); err != nil {
		return err
	}
	if m.RecvBoot, err = r.uint64(); err != nil {
		return err
	}
	if m.RecvSession, err = r.uint64(); err != nil {
		return err
	}
	m.Received, err = r.uint64()
	return err
}
