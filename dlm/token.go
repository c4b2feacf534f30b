package dlm

import (
	"fmt"
	"strconv"
	"time"
)

// Token is a fencing token (Lock.Token, Permit.Token) as a type of its
// own, for programs that send tokens as JSON: it marshals as a decimal
// string ("1234567890123456"), which every JSON decoder reads exactly,
// even one that reads numbers into float64. It unmarshals from such a
// string or from a plain JSON number. Tokens stay below 2^53 (see
// "Fencing tokens" in the package documentation), so a float64 holds them
// exactly too; the string form is for stores and languages that take no
// chances.
type Token uint64

// String returns the token in decimal.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }

// MarshalText implements encoding.TextMarshaler: the decimal digits.
func (t Token) MarshalText() ([]byte, error) { return strconv.AppendUint(nil, uint64(t), 10), nil }

// UnmarshalText implements encoding.TextUnmarshaler: decimal digits only.
func (t *Token) UnmarshalText(b []byte) error {
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: fencing token %q: %w", ErrInvalidArgument, b, err)
	}
	*t = Token(v)
	return nil
}

// MarshalJSON implements json.Marshaler: a decimal string.
func (t Token) MarshalJSON() ([]byte, error) {
	b := append(make([]byte, 0, 22), '"')
	b = strconv.AppendUint(b, uint64(t), 10)
	return append(b, '"'), nil
}

// UnmarshalJSON implements json.Unmarshaler: a decimal string, or a JSON
// number that is a whole number in range.
func (t *Token) UnmarshalJSON(b []byte) error {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		return t.UnmarshalText(b[1 : len(b)-1])
	}
	return t.UnmarshalText(b)
}

// tokenEpoch is the zero of the time part of fencing tokens.
var tokenEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// tokenUnit is the time one token stands for in the floor: a table that
// issues no more than one token per tokenUnit on average never runs ahead
// of the clock.
const tokenUnit = 500 * time.Nanosecond

// tokenFloor is the time part of fencing tokens: the number of
// half-microseconds since 2000-01-01 UTC. Every table starts its tokens
// above the floor of the moment it is made (at a node's start and at every
// recovery), and counts up by one per grant from there, so tokens go on
// increasing across any number of recoveries and across a restart of the
// whole cluster, as long as wall clocks agree to better than the time a
// restart takes, and no table issued more than two million tokens a second
// on average since it was made. See "Fencing tokens" in the package
// documentation for the bound.
func tokenFloor(t time.Time) uint64 {
	d := t.Sub(tokenEpoch)
	if d < 0 {
		return 0
	}
	return uint64(d / tokenUnit)
}
