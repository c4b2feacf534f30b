package wire

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
)

// Header is the part of a frame between the length prefix and the body.
//
// On the wire, after the 4-byte big-endian length of the rest of the frame:
//
//	byte 0     protocol version (Version)
//	byte 1     bit 7: reply flag; bits 0-6: message Type
//	bytes 2-9  request id, big-endian uint64
//	bytes 10-  msgpack body: an array of the message's fields in order
//
// A request id of 0 marks a one-way message. A request carries a non-zero id
// chosen by its sender; the reply carries the same id and the reply flag, so
// that both ends can have requests in flight on the same pair of connections
// without confusing one side's requests with the other side's replies.
type Header struct {
	Type  Type   // message type (filled in from the message when encoding)
	ID    uint64 // request id; 0 for a one-way message
	Reply bool   // the frame answers request ID of the receiver
}

// AppendFrame validates m, then appends one frame carrying it to dst. On any
// error dst is returned unchanged (same length) and nothing was appended, so
// a caller that appends into a shared buffer loses nothing by a refused
// message. h.Type is ignored: the type is m's.
func AppendFrame(dst []byte, h Header, m Message, l *Limits) ([]byte, error) {
	if h.Reply && h.ID == 0 {
		return dst, fmt.Errorf("%w: reply without a request id", ErrMalformed)
	}
	if err := m.Validate(l); err != nil {
		return dst, err
	}
	start := len(dst)
	tb := byte(m.Type())
	if h.Reply {
		tb |= replyFlag
	}
	dst = append(dst, 0, 0, 0, 0, Version, tb)
	dst = binary.BigEndian.AppendUint64(dst, h.ID)
	dst = m.appendBody(dst)
	n := len(dst) - start - PrefixSize
	if n > l.MaxFrame {
		return dst[:start], fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, l.MaxFrame)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(n))
	return dst, nil
}

// FrameLength reads a length prefix (the first PrefixSize bytes of prefix)
// and checks it against l before the caller reads or allocates the frame.
func FrameLength(prefix []byte, l *Limits) (int, error) {
	if len(prefix) < PrefixSize {
		return 0, fmt.Errorf("%w: %d-byte length prefix", ErrTruncated, len(prefix))
	}
	n := binary.BigEndian.Uint32(prefix)
	if uint64(n) > uint64(l.MaxFrame) {
		return 0, fmt.Errorf("%w: declared %d bytes, limit %d", ErrFrameTooLarge, n, l.MaxFrame)
	}
	if n < HeaderSize {
		return 0, fmt.Errorf("%w: declared %d bytes, shorter than the header", ErrTruncated, n)
	}
	return int(n), nil
}

// Decoder decodes frames. It keeps one message of each type and decodes into
// it, so that decoding allocates nothing but the strings it cannot intern: a
// message returned by Decode (and every byte slice in it, which aliases the
// payload) is valid only until the next call to Decode and only while the
// payload is unchanged. Copy what must live longer, or use DecodeOwned.
//
// A Decoder is not safe for concurrent use; a connection owns one.
type Decoder struct {
	limits Limits
	// cached holds the decoder's message of each type it has decoded,
	// indexed by type from the first of its protocol's types (made on the
	// first Decode: a client port keeps one decoder per idle connection).
	cached []Message
	intern map[string]string
	// lastIntern is the string internField returned last: most messages on
	// a connection name the same lockspace, and a comparison costs less
	// than a lookup in intern.
	lastIntern string
	// recent holds resource names decoded lately, direct-mapped by hash:
	// an unlock, a conversion, the next request of a hot lock name the
	// resource the request before them did, and take its string instead
	// of allocating one. Bounded, unlike intern: names do not repeat in
	// general.
	recent *[recentNames]string // made on the first resource name
	seed   maphash.Seed
	// kinds are the protocols whose types the decoder accepts: the
	// links' (NewDecoder) or the client port's (NewClientDecoder).
	kinds kinds
	// r is reused so that handing it to a message's decodeBody (an interface
	// call the compiler cannot see through) does not allocate it each time.
	r reader
}

// maxInterned bounds the intern table: lockspace names, cluster ids and node
// names repeat, but a peer must not be able to grow the table without limit.
const maxInterned = 256

const recentNames = 64

// NewDecoder returns a decoder that applies l, which must be valid.
func NewDecoder(l Limits) *Decoder {
	return &Decoder{limits: l, seed: maphash.MakeSeed(), kinds: kindLink}
}

// Limits returns the limits the decoder applies.
func (d *Decoder) Limits() *Limits { return &d.limits }

// DecodeFrame decodes one whole frame: length prefix, header and body. It is
// Decode for input that has not been split at the prefix yet (tests, fuzzing).
func (d *Decoder) DecodeFrame(frame []byte) (Header, Message, error) {
	n, err := FrameLength(frame, &d.limits)
	if err != nil {
		return Header{}, nil, err
	}
	rest := len(frame) - PrefixSize
	switch {
	case rest < n:
		return Header{}, nil, fmt.Errorf("%w: frame declares %d bytes, %d present", ErrTruncated, n, rest)
	case rest > n:
		return Header{}, nil, fmt.Errorf("%w: %d bytes after the frame", ErrTrailingBytes, rest-n)
	}
	return d.Decode(frame[PrefixSize:])
}

// Decode decodes the payload of one frame (everything after the length
// prefix) into the decoder's message of that type, validates it and returns
// it. On error the message is nil. See Decoder for how long the result lives.
func (d *Decoder) Decode(payload []byte) (Header, Message, error) {
	h, err := d.header(payload)
	if err != nil {
		return Header{}, nil, err
	}
	if d.cached == nil {
		d.cached = make([]Message, d.kinds.span())
	}
	slot := &d.cached[h.Type-d.kinds.first()]
	m := *slot
	if m == nil {
		m = newMessage(h.Type)
		*slot = m
	}
	if err := d.decodeBody(m, payload[HeaderSize:], false); err != nil {
		return Header{}, nil, err
	}
	return h, m, nil
}

// DecodeOwned is Decode into a new message that owns its memory: its byte
// slices are copies, so the result stays valid after the payload is reused.
// It costs one allocation more than Decode, and one per byte slice (an LVB).
func (d *Decoder) DecodeOwned(payload []byte) (Header, Message, error) {
	h, err := d.header(payload)
	if err != nil {
		return Header{}, nil, err
	}
	m := newMessage(h.Type)
	if err := d.decodeBody(m, payload[HeaderSize:], true); err != nil {
		return Header{}, nil, err
	}
	return h, m, nil
}

// DecodeInto is DecodeOwned into m, a message the caller provides (and may
// reuse): it allocates only the copies of byte slices. A payload of another
// type than m's is ErrWrongType, and m is left as it was; after any other
// error m's fields are unspecified.
func (d *Decoder) DecodeInto(payload []byte, m Message) (Header, error) {
	h, err := d.header(payload)
	if err != nil {
		return Header{}, err
	}
	if h.Type != m.Type() {
		return Header{}, fmt.Errorf("%w: a %v, not a %v", ErrWrongType, h.Type, m.Type())
	}
	if err := d.decodeBody(m, payload[HeaderSize:], true); err != nil {
		return Header{}, err
	}
	return h, nil
}

// DecodeHeader decodes and checks the header of a frame's payload only, so
// that a caller can choose between Decode and DecodeOwned by its type, id or
// reply flag. The body is not looked at.
func (d *Decoder) DecodeHeader(payload []byte) (Header, error) { return d.header(payload) }

func (d *Decoder) header(payload []byte) (Header, error) {
	if len(payload) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes, shorter than the header", ErrTruncated, len(payload))
	}
	if len(payload) > d.limits.MaxFrame {
		return Header{}, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, len(payload), d.limits.MaxFrame)
	}
	if v := payload[0]; v != Version {
		return Header{}, fmt.Errorf("%w: %d, this node speaks %d", ErrVersion, v, Version)
	}
	h := Header{
		Type:  Type(payload[1] &^ replyFlag),
		Reply: payload[1]&replyFlag != 0,
		ID:    binary.BigEndian.Uint64(payload[2:]),
	}
	if !h.Type.Known() || d.kinds&h.Type.kind() == 0 {
		return Header{}, fmt.Errorf("%w: %d", ErrUnknownType, uint8(h.Type))
	}
	if h.Reply && h.ID == 0 {
		return Header{}, fmt.Errorf("%w: reply without a request id", ErrMalformed)
	}
	return h, nil
}

// decodeBody decodes and validates m from a body that must be consumed
// exactly; own makes m's byte slices copies rather than views of body.
func (d *Decoder) decodeBody(m Message, body []byte, own bool) error {
	r := &d.r
	*r = reader{b: body, own: own}
	defer func() { d.r = reader{} }() // do not pin the frame buffer
	if err := m.decodeBody(r, d); err != nil {
		return fmt.Errorf("%s: %w", m.name(), err)
	}
	if n := r.remaining(); n > 0 {
		return fmt.Errorf("%s: %w: %d bytes after the body", m.name(), ErrTrailingBytes, n)
	}
	if err := m.Validate(&d.limits); err != nil {
		return fmt.Errorf("%s: %w", m.name(), err)
	}
	return nil
}

// stringField reads a string field of at most max bytes into a new string.
func (d *Decoder) stringField(r *reader, field string, max int) (string, error) {
	b, err := r.str(field, max)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// resourceField reads a resource name, shared with the last message that
// named the same one if it is still in recent.
func (d *Decoder) resourceField(r *reader) (string, error) {
	b, err := r.str("resource", d.limits.MaxName)
	if err != nil || len(b) == 0 {
		return "", err
	}
	if d.recent == nil {
		d.recent = new([recentNames]string)
	}
	slot := &d.recent[maphash.Bytes(d.seed, b)%recentNames]
	if *slot != string(b) {
		*slot = string(b)
	}
	return *slot, nil
}

// internField reads a string field whose values repeat (lockspace, cluster,
// node names) and returns a shared copy, so that steady traffic allocates
// nothing for it.
func (d *Decoder) internField(r *reader, field string, max int) (string, error) {
	b, err := r.str(field, max)
	if err != nil {
		return "", err
	}
	if s := d.lastIntern; s == string(b) {
		return s, nil
	}
	if s, ok := d.intern[string(b)]; ok {
		d.lastIntern = s
		return s, nil
	}
	s := string(b)
	if len(s) == 0 {
		return s, nil
	}
	if d.intern == nil {
		d.intern = make(map[string]string)
	}
	if len(d.intern) < maxInterned {
		d.intern[s] = s
	}
	d.lastIntern = s
	return s, nil
}

// reuse returns s resized to n elements for a decode to overwrite in full,
// reusing its array when it is large enough, as Renew does. Elements past n
// that the previous decode used are zeroed, so that nothing of an earlier
// frame stays reachable through the array (their LVBs alias that frame).
// Elements past len(s) are already zero: every decode goes through here. An
// empty result is nil, so that a decoded message does not depend on what the
// Decoder decoded before.
func reuse[T any](s []T, n int) []T {
	switch {
	case n == 0:
		return nil
	case cap(s) < n:
		return make([]T, n)
	case n < len(s):
		clear(s[n:])
	}
	return s[:n]
}
