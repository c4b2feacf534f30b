package wire

import "errors"

// Sentinel errors returned (possibly wrapped) by the decoder and encoder. Each
// names one kind of bad input so that a connection can log and count why it
// refused a frame; Reason maps them to short metric labels.
var (
	// ErrFrameTooLarge: a declared or encoded frame length is above
	// Limits.MaxFrame. The decoder returns it before allocating anything.
	ErrFrameTooLarge = errors.New("wire: frame too large")
	// ErrTruncated: the input ended before the frame, its header or a
	// fixed-size value was complete.
	ErrTruncated = errors.New("wire: truncated frame")
	// ErrVersion: the frame carries a protocol version this build does not speak.
	ErrVersion = errors.New("wire: unsupported protocol version")
	// ErrUnknownType: the frame's message type is not one this build knows.
	ErrUnknownType = errors.New("wire: unknown message type")
	// ErrTrailingBytes: bytes remain after the message body (or after the
	// frame, for DecodeFrame).
	ErrTrailingBytes = errors.New("wire: trailing bytes after message")
	// ErrDeclaredLength: a msgpack array, map, string or binary header declares
	// more elements or bytes than remain in the frame. Refused before
	// allocation; this is the guard against the msgpack unbounded-allocation bug.
	ErrDeclaredLength = errors.New("wire: declared length exceeds frame")
	// ErrMalformed: the body is not the msgpack shape of the message (wrong
	// type code, wrong field count, a value that does not fit its field).
	ErrMalformed = errors.New("wire: malformed message body")
	// ErrInvalid: the message decoded but breaks a rule of the protocol (mode
	// out of range, empty or long name, epoch 0, unknown status...).
	ErrInvalid = errors.New("wire: invalid message")
	// ErrWrongType: Decoder.DecodeInto was given a message of another type
	// than the payload's. The payload itself may be valid.
	ErrWrongType = errors.New("wire: payload of another message type")
)

type reason struct {
	err   error
	label string
}

// reasons is ordered most specific first; Reason returns the first match.
func reasons() [8]reason {
	return [...]reason{
		{ErrFrameTooLarge, "too_large"},
		{ErrTruncated, "truncated"},
		{ErrVersion, "version"},
		{ErrUnknownType, "unknown_type"},
		{ErrTrailingBytes, "trailing_bytes"},
		{ErrDeclaredLength, "declared_length"},
		{ErrMalformed, "malformed"},
		{ErrInvalid, "invalid"},
	}
}

// Reason returns a short, stable label for a decoding error, for logs and the
// reason label of a rejected-frames metric: one of too_large, truncated,
// version, unknown_type, trailing_bytes, declared_length, malformed, invalid,
// or "other" for an error that is none of the package's sentinels.
func Reason(err error) string {
	for _, r := range reasons() {
		if errors.Is(err, r.err) {
			return r.label
		}
	}
	return "other"
}

// Reasons lists every label Reason can return, so that metrics can be
// pre-created with all of them.
func Reasons() []string {
	rs := reasons()
	out := make([]string, 0, len(rs)+1)
	for _, r := range rs {
		out = append(out, r.label)
	}
	return append(out, "other")
}
