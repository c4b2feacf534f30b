package wire

import "fmt"

// ClientHello opens a client connection: it must be the first frame, a
// request. It starts a session or resumes one the agent still keeps.
//
// It comes in two layouts. Protocol 1 (Version 0: the hello names no
// version) has the first five fields. Protocol 2 (Version ClientProtocol)
// adds the version and, on a resume, what the client read and what it
// still waits for, so that the agent gives again the answers and pushes
// a dying connection swallowed (docs/protocol.md §6).
type ClientHello struct {
	Name    string // the client's name, for the agent's logs; ≤ MaxNodeName bytes
	Token   string // the agent's shared token, if it has one; ≤ MaxToken bytes
	TTL     int64  // ns the session lives without a keep-alive; 0 = the agent's default
	Session uint64 // a session to resume; 0 = a new session
	Key     uint64 // the resume key the Welcome of Session gave; 0 with Session 0

	// Version is 0 for protocol 1, or ClientProtocol.
	Version uint8
	// Read is the id of the last reply the client read in the session (a
	// Welcome included); 0 with Session 0. Protocol 2 only.
	Read uint64
	// Pushes counts the ClientBlocking and ClientLost pushes the client
	// read after that reply (not one-way ClientErrors). Protocol 2 only.
	Pushes uint64
	// Waiting are the ids of the requests the client sent and still waits
	// for an answer to, strictly increasing, at most MaxResumeWaiting;
	// empty with Session 0. Protocol 2 only.
	Waiting []uint64
}

// ClientProtocol is the newest client protocol version: a ClientHello
// with Version 2 has nine fields.
const ClientProtocol uint8 = 2

// MaxResumeWaiting is the most request ids a resuming ClientHello names:
// more than a session may have waiting at an agent (its max_pending),
// few enough to fit a frame (9 bytes each).
const MaxResumeWaiting = 4096

const (
	clientHelloFields  = 5 // protocol 1
	clientHello2Fields = 9 // protocol 2
)

// Type implements Message.
func (*ClientHello) Type() Type { return TypeClientHello }

func (*ClientHello) name() string { return "client_hello" }

// Validate implements Message.
func (m *ClientHello) Validate(*Limits) error {
	switch {
	case len(m.Name) > MaxNodeName:
		return fmt.Errorf("%w: client name of %d bytes, limit %d", ErrInvalid, len(m.Name), MaxNodeName)
	case len(m.Token) > MaxToken:
		return fmt.Errorf("%w: token of %d bytes, limit %d", ErrInvalid, len(m.Token), MaxToken)
	case (m.Session == 0) != (m.Key == 0):
		return fmt.Errorf("%w: a session to resume needs its key, and only then", ErrInvalid)
	case m.Version != 0 && m.Version != ClientProtocol:
		return fmt.Errorf("%w: client protocol %d: this end speaks 1 and %d", ErrInvalid, m.Version, ClientProtocol)
	case m.Version == 0 && (m.Read != 0 || m.Pushes != 0 || len(m.Waiting) > 0):
		return fmt.Errorf("%w: a protocol 1 hello names no read reply nor waiting requests", ErrInvalid)
	case m.Session == 0 && (m.Read != 0 || m.Pushes != 0 || len(m.Waiting) > 0):
		return fmt.Errorf("%w: a hello that opens a session has read nothing and waits for nothing", ErrInvalid)
	case len(m.Waiting) > MaxResumeWaiting:
		return fmt.Errorf("%w: a resume names %d waiting requests, limit %d", ErrInvalid, len(m.Waiting), MaxResumeWaiting)
	}
	var last uint64
	for _, id := range m.Waiting {
		if id <= last {
			return fmt.Errorf("%w: waiting request ids must be non-zero and strictly increasing: %d after %d (a duplicate, or out of order)", ErrInvalid, id, last)
		}
		last = id
	}
	return checkDuration("ttl", m.TTL)
}

func (m *ClientHello) appendBody(b []byte) []byte {
	n := clientHelloFields
	if m.Version != 0 {
		n = clientHello2Fields
	}
	b = appendArrayLen(b, n)
	b = appendStr(b, m.Name)
	b = appendStr(b, m.Token)
	b = appendInt(b, m.TTL)
	b = appendUint(b, m.Session)
	b = appendUint(b, m.Key)
	if m.Version == 0 {
		return b
	}
	b = appendUint(b, uint64(m.Version))
	b = appendUint(b, m.Read)
	b = appendUint(b, m.Pushes)
	b = appendArrayLen(b, len(m.Waiting))
	for _, id := range m.Waiting {
		b = appendUint(b, id)
	}
	return b
}

func (m *ClientHello) decodeBody(r *reader, d *Decoder) error {
	n, err := r.arrayLen()
	if err != nil {
		return err
	}
	if n != clientHelloFields && n <= clientHelloFields {
		return fmt.Errorf("%w: client hello of %d fields, want %d (protocol 1) or %d (protocol 2)", ErrMalformed, n, clientHelloFields, clientHello2Fields)
	}
	f := fieldReader{r: r, d: d}
	m.Name = f.str("name", MaxNodeName)
	m.Token = f.str("token", MaxToken)
	m.TTL = f.int64()
	m.Session = f.uint64()
	m.Key = f.uint64()
	m.Version, m.Read, m.Pushes = 0, 0, 0
	waiting := m.Waiting
	m.Waiting = nil
	if n == clientHelloFields || f.err != nil {
		return f.err
	}
	m.Version = f.uint8()
	if f.err != nil {
		return f.err
	}
	if m.Version != ClientProtocol || n != clientHello2Fields {
		// A newer client: the error says which protocols this end speaks.
		return fmt.Errorf("%w: client hello of protocol %d with %d fields: this end speaks 1 (%d fields) and %d (%d fields)",
			ErrInvalid, m.Version, n, clientHelloFields, ClientProtocol, clientHello2Fields)
	}
	m.Read = f.uint64()
	m.Pushes = f.uint64()
	m.Waiting = f.ids("waiting", MaxResumeWaiting, waiting)
	return f.err
}

// ClientWelcome answers a ClientHello: the session the connection carries
// and the agent's limits for it.
type ClientWelcome struct {
	Session uint64 // the session's id, ≠ 0
	Key     uint64 // the key that resumes it (ClientHello.Key), ≠ 0
	TTL     int64  // ns the session lives without a keep-alive, > 0
	// Lease is how long, in ns from when the client sent the Hello, it may
	// trust its locks without a newer ClientAlive (see docs/protocol.md), > 0.
	Lease       int64
	Node        string // the agent's node name, 1..MaxNodeName bytes
	Resumed     bool   // the session existed and keeps its locks
	LastRequest uint64 // highest request id of the session the agent has read
	MaxLocks    uint32 // locks the session may hold or wait for
	MaxPending  uint32 // requests the session may have unanswered at once
	MaxFrame    uint32 // the largest frame the agent accepts
}

const clientWelcomeFields = 10

// Type implements Message.
func (*ClientWelcome) Type() Type { return TypeClientWelcome }

func (*ClientWelcome) name() string { return "client_welcome" }

// Validate implements Message.
func (m *ClientWelcome) Validate(*Limits) error {
	switch {
	case m.Session == 0 || m.Key == 0:
		return fmt.Errorf("%w: session and key must be non-zero", ErrInvalid)
	case m.TTL <= 0 || m.Lease <= 0:
		return fmt.Errorf("%w: TTL %d and lease %d must be positive", ErrInvalid, m.TTL, m.Lease)
	}
	return checkName("node", m.Node, MaxNodeName)
}

func (m *ClientWelcome) appendBody(b []byte) []byte {
	b = appendArrayLen(b, clientWelcomeFields)
	b = appendUint(b, m.Session)
	b = appendUint(b, m.Key)
	b = appendInt(b, m.TTL)
	b = appendInt(b, m.Lease)
	b = appendStr(b, m.Node)
	b = appendBool(b, m.Resumed)
	b = appendUint(b, m.LastRequest)
	b = appendUint(b, uint64(m.MaxLocks))
	b = appendUint(b, uint64(m.MaxPending))
	return appendUint(b, uint64(m.MaxFrame))
}

func (m *ClientWelcome) decodeBody(r *reader, d *Decoder) error {
	f := fieldReader{r: r, d: d}
	f.array(clientWelcomeFields)
	m.Session = f.uint64()
	m.Key = f.uint64()
	m.TTL = f.int64()
	m.Lease = f.int64()
	m.Node = f.intern("node", MaxNodeName)
	m.Resumed = f.bool()
	m.LastRequest = f.uint64()
	m.MaxLocks = f.uint32()
	m.MaxPending = f.uint32()
	m.MaxFrame = f.uint32()
	return f.err
}

// ClientKeepAlive renews the session (Lock 0) or one lock's own TTL.
type ClientKeepAlive struct {
	Lock uint64 // a lock of the session with a TTL of its own; 0 = the session
}

// Type implements Message.
func (*ClientKeepAlive) Type() Type { return TypeClientKeepAlive }

func (*ClientKeepAlive) name() string { return "client_keep_alive" }

// Validate implements Message.
func (*ClientKeepAlive) Validate(*Limits) error { return nil }

func (m *ClientKeepAlive) appendBody(b []byte) []byte {
	return appendUint(appendArrayLen(b, 1), m.Lock)
}

func (m *ClientKeepAlive) decodeBody(r *reader, d *Decoder) error {
	f := fieldReader{r: r, d: d}
	f.array(1)
	m.Lock = f.uint64()
	return f.err
}

// ClientAlive answers a ClientKeepAlive: the renewal went through.
type ClientAlive struct {
	// Lease is how long, in ns from when the client sent the keep-alive,
	// it may trust its locks, > 0.
	Lease int64
}

// Type implements Message.
func (*ClientAlive) Type() Type { return TypeClientAlive }

func (*ClientAlive) name() string { return "client_alive" }

// Validate implements Message.
func (m *ClientAlive) Validate(*Limits) error {
	if m.Lease <= 0 {
		return fmt.Errorf("%w: lease %d must be positive", ErrInvalid, m.Lease)
	}
	return nil
}

func (m *ClientAlive) appendBody(b []byte) []byte {
	return appendInt(appendArrayLen(b, 1), m.Lease)
}

func (m *ClientAlive) decodeBody(r *reader, d *Decoder) error {
	f := fieldReader{r: r, d: d}
	f.array(1)
	m.Lease = f.int64()
	return f.err
}

// ClientAck tells the agent of a protocol 2 session that the client has
// read every frame up to and including the reply to request Read: the
// agent forgets what it kept to give again (docs/protocol.md §6).
// Answered by ClientOK.
type ClientAck struct {
	Read uint64 // a reply's request id, ≠ 0
}

// Type implements Message.
func (*ClientAck) Type() Type { return TypeClientAck }

func (*ClientAck) name() string { return "client_ack" }

// Validate implements Message.
func (m *ClientAck) Validate(*Limits) error {
	if m.Read == 0 {
		return fmt.Errorf("%w: an acknowledgement names the reply read, not 0", ErrInvalid)
	}
	return nil
}

func (m *ClientAck) appendBody(b []byte) []byte { return appendID(b, m.Read) }

func (m *ClientAck) decodeBody(r *reader, d *Decoder) (err error) {
	m.Read, err = readID(r, d)
	return err
}
