package wire

import (
	"fmt"

	"github.com/seed-a6839e30/dlm/modes"
)

// fieldReader reads the fields of a client message in order with a sticky
// error: after the first failure every read returns a zero value, and err
// says what failed. The client messages are many and small; this keeps
// each one's decoder a list of its fields.
type fieldReader struct {
	r   *reader
	d   *Decoder
	err error
}

func (f *fieldReader) array(n int) {
	if f.err == nil {
		f.err = f.r.expectArray(n)
	}
}

func (f *fieldReader) uint64() uint64 {
	if f.err != nil {
		return 0
	}
	v, err := f.r.uint64()
	f.err = err
	return v
}

func (f *fieldReader) uint32() uint32 {
	if f.err != nil {
		return 0
	}
	v, err := f.r.uint32()
	f.err = err
	return v
}

func (f *fieldReader) uint8() uint8 {
	if f.err != nil {
		return 0
	}
	v, err := f.r.uint8()
	f.err = err
	return v
}

func (f *fieldReader) mode() modes.Mode { return modes.Mode(f.uint8()) }

func (f *fieldReader) int64() int64 {
	if f.err != nil {
		return 0
	}
	v, err := f.r.int64()
	f.err = err
	return v
}

func (f *fieldReader) bool() bool {
	if f.err != nil {
		return false
	}
	v, err := f.r.bool()
	f.err = err
	return v
}

// str reads a string field into a new string.
func (f *fieldReader) str(field string, max int) string {
	if f.err != nil {
		return ""
	}
	v, err := f.d.stringField(f.r, field, max)
	f.err = err
	return v
}

// intern reads a string field whose values repeat (a lockspace name).
func (f *fieldReader) intern(field string, max int) string {
	if f.err != nil {
		return ""
	}
	v, err := f.d.internField(f.r, field, max)
	f.err = err
	return v
}

func (f *fieldReader) resource() string {
	if f.err != nil {
		return ""
	}
	v, err := f.d.resourceField(f.r)
	f.err = err
	return v
}

func (f *fieldReader) bin(field string, max int) []byte {
	if f.err != nil {
		return nil
	}
	v, err := f.r.bin(field, max)
	f.err = err
	return v
}

// ids reads an array of at most max ids into buf's storage; an empty
// array reads as nil.
func (f *fieldReader) ids(field string, max int, buf []uint64) []uint64 {
	if f.err != nil {
		return nil
	}
	n, err := f.r.arrayLen() // n ≤ bytes remaining: bounded before the make below
	if err != nil {
		f.err = err
		return nil
	}
	if n > max {
		f.err = fmt.Errorf("%w: %s: %d ids, limit %d", ErrInvalid, field, n, max)
		return nil
	}
	if n == 0 {
		return nil
	}
	if cap(buf) < n {
		buf = make([]uint64, n)
	}
	buf = buf[:n]
	for i := range buf {
		if buf[i], err = f.r.uint64(); err != nil {
			f.err = err
			return nil
		}
	}
	return buf
}
