package wire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// This file holds the small subset of msgpack the protocol uses: arrays,
// unsigned and signed integers, booleans, strings and binary. Encoding always
// picks the shortest form; decoding accepts every form the msgpack spec allows
// for a value (so a body written by any conforming encoder decodes) and checks
// every declared length against the bytes that remain before it slices or
// allocates anything.

// msgpack type codes used here.
const (
	mpNil      = 0xc0
	mpFalse    = 0xc2
	mpTrue     = 0xc3
	mpBin8     = 0xc4
	mpBin16    = 0xc5
	mpBin32    = 0xc6
	mpUint8    = 0xcc
	mpUint16   = 0xcd
	mpUint32   = 0xce
	mpUint64   = 0xcf
	mpInt8     = 0xd0
	mpInt16    = 0xd1
	mpInt32    = 0xd2
	mpInt64    = 0xd3
	mpStr8     = 0xd9
	mpStr16    = 0xda
	mpStr32    = 0xdb
	mpArray16  = 0xdc
	mpArray32  = 0xdd
	mpMap16    = 0xde
	mpMap32    = 0xdf
	mpFixArray = 0x90
	mpFixMap   = 0x80
	mpFixStr   = 0xa0
)

func appendArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, mpFixArray|byte(n))
	case n <= math.MaxUint16:
		return append(b, mpArray16, byte(n>>8), byte(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, mpArray32), uint32(n))
	}
}

func appendUint(b []byte, v uint64) []byte {
	switch {
	case v < 0x80:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, mpUint8, byte(v))
	case v <= math.MaxUint16:
		return append(b, mpUint16, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, mpUint32), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, mpUint64), v)
	}
}

func appendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0:
		return appendUint(b, uint64(v))
	case v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, mpInt8, byte(v))
	case v >= math.MinInt16:
		return append(b, mpInt16, byte(v>>8), byte(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, mpInt32), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, mpInt64), uint64(v))
	}
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, mpTrue)
	}
	return append(b, mpFalse)
}

func appendStr(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, mpFixStr|byte(n))
	case n <= math.MaxUint8:
		b = append(b, mpStr8, byte(n))
	case n <= math.MaxUint16:
		b = append(b, mpStr16, byte(n>>8), byte(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, mpStr32), uint32(n))
	}
	return append(b, s...)
}

func appendBin(b []byte, p []byte) []byte {
	n := len(p)
	switch {
	case n <= math.MaxUint8:
		b = append(b, mpBin8, byte(n))
	case n <= math.MaxUint16:
		b = append(b, mpBin16, byte(n>>8), byte(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, mpBin32), uint32(n))
	}
	return append(b, p...)
}

// reader decodes msgpack values from a byte slice it never copies, except
// binary values when own is set (DecodeOwned): those are the only bytes a
// decoded message keeps (its strings are always copies). Every method either
// consumes a whole value and returns it, or returns an error wrapping one of
// the package's sentinels; after an error the reader's position is
// unspecified and the caller stops.
type reader struct {
	b   []byte
	off int
	own bool
}

func (r *reader) remaining() int { return len(r.b) - r.off }

func (r *reader) next() (byte, error) {
	if r.off >= len(r.b) {
		return 0, ErrTruncated
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

// fixed returns the next n bytes, for fixed-size values.
func (r *reader) fixed(n int) ([]byte, error) {
	if r.remaining() < n {
		return nil, ErrTruncated
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p, nil
}

// length reads a 1, 2 or 4 byte big-endian length.
func (r *reader) length(size int) (int, error) {
	p, err := r.fixed(size)
	if err != nil {
		return 0, err
	}
	var n uint32
	switch size {
	case 1:
		n = uint32(p[0])
	case 2:
		n = uint32(binary.BigEndian.Uint16(p))
	default:
		n = binary.BigEndian.Uint32(p)
	}
	// Every element, entry or byte a length counts takes at least a byte
	// of what remains. Refusing a longer one here, in uint32, also keeps a
	// length of 2^31 or more from turning negative in a 32-bit int.
	if uint64(n) > uint64(r.remaining()) {
		return 0, fmt.Errorf("%w: declared length %d with %d bytes left", ErrDeclaredLength, n, r.remaining())
	}
	return int(n), nil
}

// arrayLen reads an array header. Each element takes at least one byte, so a
// count above the bytes remaining is refused here, before any caller sizes a
// slice by it.
func (r *reader) arrayLen() (int, error) {
	c, err := r.next()
	if err != nil {
		return 0, err
	}
	var n int
	switch {
	case c&0xf0 == mpFixArray:
		n = int(c & 0x0f)
	case c == mpArray16:
		n, err = r.length(2)
	case c == mpArray32:
		n, err = r.length(4)
	case c&0xf0 == mpFixMap, c == mpMap16, c == mpMap32:
		return 0, r.badMap(c)
	default:
		return 0, fmt.Errorf("%w: expected array, found type 0x%02x", ErrMalformed, c)
	}
	if err != nil {
		return 0, err
	}
	if n > r.remaining() {
		return 0, fmt.Errorf("%w: array of %d elements with %d bytes left", ErrDeclaredLength, n, r.remaining())
	}
	return n, nil
}

// structArrayLen reads the header of an array whose elements are structs of
// fields fields each. Such an element takes at least 1+fields bytes (its array
// header and one byte per field), so a count the remaining bytes cannot hold
// is refused here. arrayLen's bound of one byte per element is not enough for
// a slice of wide structs: 96-byte ReportedLocks sized by it would let a frame
// allocate 96 times its size.
func (r *reader) structArrayLen(field string, fields int) (int, error) {
	n, err := r.arrayLen()
	if err != nil {
		return 0, err
	}
	if n > r.remaining()/(1+fields) {
		return 0, fmt.Errorf("%w: %s: %d elements of at least %d bytes with %d bytes left", ErrDeclaredLength, field, n, 1+fields, r.remaining())
	}
	return n, nil
}

// badMap reports a map where the protocol has none; an oversized declared
// length is reported as such, so the allocation guard is visible in metrics.
func (r *reader) badMap(c byte) error {
	n := int(c & 0x0f)
	var err error
	switch c {
	case mpMap16:
		n, err = r.length(2)
	case mpMap32:
		n, err = r.length(4)
	}
	if err != nil {
		return err
	}
	if 2*n > r.remaining() {
		return fmt.Errorf("%w: map of %d entries with %d bytes left", ErrDeclaredLength, n, r.remaining())
	}
	return fmt.Errorf("%w: unexpected map", ErrMalformed)
}

// expectArray reads an array header that must have exactly n elements.
func (r *reader) expectArray(n int) error {
	got, err := r.arrayLen()
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("%w: %d fields, want %d", ErrMalformed, got, n)
	}
	return nil
}

// uint64 reads any integer encoding of a non-negative value.
func (r *reader) uint64() (uint64, error) {
	c, err := r.next()
	if err != nil {
		return 0, err
	}
	if c < 0x80 {
		return uint64(c), nil
	}
	var p []byte
	switch c {
	case mpUint8, mpInt8:
		p, err = r.fixed(1)
	case mpUint16, mpInt16:
		p, err = r.fixed(2)
	case mpUint32, mpInt32:
		p, err = r.fixed(4)
	case mpUint64, mpInt64:
		p, err = r.fixed(8)
	default:
		return 0, fmt.Errorf("%w: expected unsigned integer, found type 0x%02x", ErrMalformed, c)
	}
	if err != nil {
		return 0, err
	}
	v := beUint(p)
	if c >= mpInt8 && c <= mpInt64 && p[0]&0x80 != 0 {
		return 0, fmt.Errorf("%w: negative value for an unsigned field", ErrMalformed)
	}
	return v, nil
}

// int64 reads any integer encoding of a value that fits an int64.
func (r *reader) int64() (int64, error) {
	c, err := r.next()
	if err != nil {
		return 0, err
	}
	if c < 0x80 || c >= 0xe0 {
		return int64(int8(c)), nil
	}
	var p []byte
	switch c {
	case mpInt8, mpUint8:
		p, err = r.fixed(1)
	case mpInt16, mpUint16:
		p, err = r.fixed(2)
	case mpInt32, mpUint32:
		p, err = r.fixed(4)
	case mpInt64, mpUint64:
		p, err = r.fixed(8)
	default:
		return 0, fmt.Errorf("%w: expected integer, found type 0x%02x", ErrMalformed, c)
	}
	if err != nil {
		return 0, err
	}
	v := beUint(p)
	if c >= mpUint8 && c <= mpUint64 {
		if v > math.MaxInt64 {
			return 0, fmt.Errorf("%w: integer overflows int64", ErrMalformed)
		}
		return int64(v), nil
	}
	// sign-extend the big-endian two's complement value
	shift := 64 - 8*len(p)
	return int64(v<<shift) >> shift, nil
}

func beUint(p []byte) uint64 {
	switch len(p) {
	case 1:
		return uint64(p[0])
	case 2:
		return uint64(binary.BigEndian.Uint16(p))
	case 4:
		return uint64(binary.BigEndian.Uint32(p))
	default:
		return binary.BigEndian.Uint64(p)
	}
}

// uint reads an unsigned integer that must not exceed max.
func (r *reader) uint(max uint64) (uint64, error) {
	v, err := r.uint64()
	if err != nil {
		return 0, err
	}
	if v > max {
		return 0, fmt.Errorf("%w: %d does not fit the field", ErrMalformed, v)
	}
	return v, nil
}

func (r *reader) uint8() (uint8, error) {
	v, err := r.uint(math.MaxUint8)
	return uint8(v), err
}

func (r *reader) uint32() (uint32, error) {
	v, err := r.uint(math.MaxUint32)
	return uint32(v), err
}

func (r *reader) bool() (bool, error) {
	c, err := r.next()
	if err != nil {
		return false, err
	}
	switch c {
	case mpTrue:
		return true, nil
	case mpFalse:
		return false, nil
	}
	return false, fmt.Errorf("%w: expected bool, found type 0x%02x", ErrMalformed, c)
}

// str returns the bytes of a string value, aliasing the input. A string
// longer than max is refused as invalid before the caller copies it.
func (r *reader) str(field string, max int) ([]byte, error) {
	c, err := r.next()
	if err != nil {
		return nil, err
	}
	var n int
	switch {
	case c&0xe0 == mpFixStr:
		n = int(c & 0x1f)
	case c == mpStr8:
		n, err = r.length(1)
	case c == mpStr16:
		n, err = r.length(2)
	case c == mpStr32:
		n, err = r.length(4)
	default:
		return nil, fmt.Errorf("%w: %s: expected string, found type 0x%02x", ErrMalformed, field, c)
	}
	if err != nil {
		return nil, err
	}
	return r.span(field, n, max)
}

// bin returns the bytes of a binary value (nil for msgpack nil or an empty
// value), aliasing the input unless r.own asks for a copy.
func (r *reader) bin(field string, max int) ([]byte, error) {
	c, err := r.next()
	if err != nil {
		return nil, err
	}
	var n int
	switch c {
	case mpNil:
		return nil, nil
	case mpBin8:
		n, err = r.length(1)
	case mpBin16:
		n, err = r.length(2)
	case mpBin32:
		n, err = r.length(4)
	default:
		return nil, fmt.Errorf("%w: %s: expected binary, found type 0x%02x", ErrMalformed, field, c)
	}
	if err != nil {
		return nil, err
	}
	p, err := r.span(field, n, max)
	switch {
	case len(p) == 0:
		return nil, err
	case r.own:
		return append([]byte(nil), p...), nil
	}
	return p, err
}

func (r *reader) span(field string, n, max int) ([]byte, error) {
	if n > r.remaining() {
		return nil, fmt.Errorf("%w: %s of %d bytes with %d bytes left", ErrDeclaredLength, field, n, r.remaining())
	}
	if n > max {
		return nil, fmt.Errorf("%w: %s is %d bytes, limit %d", ErrInvalid, field, n, max)
	}
	p := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return p, nil
}
