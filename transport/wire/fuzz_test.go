package wire

import (
	"bytes"
	"math"
	"reflect"
	"runtime"
	"testing"
	"unsafe"
)

// Allocation bound for decoding one frame: allocPerByte of the frame's type
// per input byte, plus a constant that covers the Decoder, its message and
// its intern table.
const allocConst = 16 << 10

// allocPerByte is how many bytes decoding a frame of type t may allocate per
// byte of input. A Renew may allocate 8 bytes per id and each id takes at
// least one byte of the frame. A slice of structs may allocate the struct's
// size per element, and each element takes at least 1+fields bytes
// (structArrayLen refuses a count the frame cannot hold before the make).
// Size classes round a small slice up by at most 12.5 % (a MasterReport may
// have thousands of small ones; a large slice is rounded by less than a page,
// which allocConst covers), and the body targets copy their input into a
// payload first: one more byte per byte. Strings cost about a byte per byte
// of the frame, less than any struct.
func allocPerByte(t Type) int {
	per := func(size uintptr, fields int) float64 { return float64(size) / float64(1+fields) }
	var worst float64
	switch t {
	case TypeLockReport:
		worst = per(unsafe.Sizeof(ReportedLock{}), reportedLockFields) // 104 / 13
	case TypeMasterReport:
		worst = max(per(unsafe.Sizeof(ReportedResource{}), reportedResourceFields), // 80 / 6
			per(unsafe.Sizeof(QueuedLock{}), queuedLockFields)) // 24 / 5
	case TypePropose, TypeCommit:
		worst = per(unsafe.Sizeof(ViewMember{}), viewMemberFields) // 24 / 3
	case TypeDeadlockReport, TypeDeadlockConfirm:
		worst = per(unsafe.Sizeof(WaitEdge{}), waitEdgeFields) // 96 / 13
	case TypePermitReport:
		worst = per(unsafe.Sizeof(ReportedPermit{}), reportedPermitFields) // 56 / 9
	case TypeDescribeReply:
		worst = per(unsafe.Sizeof(DescribedLock{}), describedLockFields) // 72 / 12
	default:
		return 8
	}
	return int(math.Ceil(worst*9/8)) + 1
}

// decodeFunc is what a fuzz target decodes with; fresh decoders keep runs
// independent of each other. typ is the message type in claims, which sets
// its allocation bound.
type decodeFunc struct {
	decode func(d *Decoder, in []byte) (Header, Message, error)
	// owned decodes in with DecodeOwned, for the same outcome as decode.
	owned func(d *Decoder, in []byte) (Header, Message, error)
	typ   func(in []byte) Type
}

var decodeFrame = decodeFunc{
	decode: func(d *Decoder, in []byte) (Header, Message, error) { return d.DecodeFrame(in) },
	owned: func(d *Decoder, in []byte) (Header, Message, error) {
		if _, err := FrameLength(in, d.Limits()); err != nil || len(in) < PrefixSize {
			return d.DecodeFrame(in) // the prefix's errors, which DecodeOwned never sees
		}
		if _, _, err := d.DecodeFrame(in); err != nil {
			return Header{}, nil, err // a length that does not match the frame
		}
		return d.DecodeOwned(in[PrefixSize:])
	},
	typ: func(in []byte) Type {
		if len(in) < PrefixSize+2 {
			return 0
		}
		return Type(in[PrefixSize+1] &^ replyFlag)
	},
}

// decodeBodyOf decodes in as the body of a one-way message of type t.
func decodeBodyOf(t Type) decodeFunc {
	return decodeFunc{
		decode: func(d *Decoder, in []byte) (Header, Message, error) {
			return d.Decode(rawPayload(Version, byte(t), 0, in))
		},
		owned: func(d *Decoder, in []byte) (Header, Message, error) {
			return d.DecodeOwned(rawPayload(Version, byte(t), 0, in))
		},
		typ: func([]byte) Type { return t },
	}
}

// checkDecode asserts the four properties every decoder must have.
func checkDecode(t *testing.T, in []byte, decode decodeFunc) {
	l := DefaultLimits()
	h, m, err := decode.decode(testDecoder(l), in)
	if err != nil {
		if m != nil {
			t.Fatalf("error %v returned with a message %#v", err, m)
		}
		if Reason(err) == "other" {
			t.Fatalf("error %v is none of the package's sentinels", err)
		}
	} else {
		checkRoundTrip(t, h, m)
		checkInto(t, h, m)
	}
	checkOwned(t, in, decode, h, m, err)
	checkAllocBound(t, in, decode)
}

// checkOwned: DecodeOwned has the same outcome as Decode, and its message
// does not change when the input is overwritten afterwards.
func checkOwned(t *testing.T, in []byte, decode decodeFunc, h Header, m Message, err error) {
	t.Helper()
	scratch := bytes.Clone(in)
	oh, om, oerr := decode.owned(testDecoder(DefaultLimits()), scratch)
	switch {
	case (oerr == nil) != (err == nil):
		t.Fatalf("DecodeOwned: %v, Decode: %v", oerr, err)
	case oerr != nil:
		if om != nil {
			t.Fatalf("DecodeOwned error %v returned with a message %#v", oerr, om)
		}
		return
	}
	for i := range scratch {
		scratch[i] ^= 0xff
	}
	if oh != h || !reflect.DeepEqual(om, m) {
		t.Fatalf("DecodeOwned gave, after its input was overwritten,\n%+v %#v\nDecode\n%+v %#v", oh, om, h, m)
	}
}

// checkInto: DecodeInto, into a message of the same type that holds another
// message's values (the sample of that type), gives an equal message: every
// field is overwritten, nothing of the earlier values is left.
func checkInto(t *testing.T, h Header, m Message) {
	t.Helper()
	l := DefaultLimits()
	frame, err := AppendFrame(nil, h, m, &l)
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	for _, into := range samples() {
		if into.Type() != m.Type() {
			continue
		}
		gh, err := testDecoder(l).DecodeInto(frame[PrefixSize:], into)
		if err != nil {
			t.Fatalf("DecodeInto: %v", err)
		}
		if gh != h || !reflect.DeepEqual(into, m) {
			t.Fatalf("DecodeInto over the sample gave\n%+v %#v\nwant\n%+v %#v", gh, into, h, m)
		}
	}
}

// checkRoundTrip: a decoded message re-encodes, decodes to an equal message,
// and re-encodes to the same bytes.
func checkRoundTrip(t *testing.T, h Header, m Message) {
	t.Helper()
	l := DefaultLimits()
	frame, err := AppendFrame(nil, h, m, &l)
	if err != nil {
		t.Fatalf("decoded %#v does not re-encode: %v", m, err)
	}
	h2, m2, err := testDecoder(l).DecodeFrame(frame)
	if err != nil {
		t.Fatalf("re-encoded %#v does not decode: %v", m, err)
	}
	if h2 != h || !reflect.DeepEqual(m, m2) {
		t.Fatalf("round trip changed the message:\n%+v %#v\n%+v %#v", h, m, h2, m2)
	}
	again, err := AppendFrame(nil, h2, m2, &l)
	if err != nil || !bytes.Equal(frame, again) {
		t.Fatalf("encoding is not stable: %x vs %x (%v)", frame, again, err)
	}
}

// checkAllocBound measures the bytes decoding allocates. Other goroutines of
// the test binary may allocate at the same time, so an excess is measured a
// second time before it counts.
func checkAllocBound(t *testing.T, in []byte, decode decodeFunc) {
	t.Helper()
	bound := uint64(allocPerByte(decode.typ(in))*len(in) + allocConst)
	var got uint64
	for range 2 {
		got = allocatedBy(func() { _, _, _ = decode.decode(testDecoder(DefaultLimits()), in) })
		if got <= bound {
			return
		}
	}
	t.Fatalf("decoding %d bytes allocated %d bytes, bound %d", len(in), got, bound)
}

func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func fuzzTarget(f *testing.F, name string, seeds map[string][]byte, decode decodeFunc) {
	writeSeedFiles(f, name, seeds)
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkDecode(t, in, decode) })
}

func FuzzDecodeFrame(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeFrame", frameSeeds(f), decodeFrame)
}

func FuzzDecodePing(f *testing.F) {
	fuzzTarget(f, "FuzzDecodePing", bodySeeds(TypePing), decodeBodyOf(TypePing))
}

func FuzzDecodeHello(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeHello", bodySeeds(TypeHello), decodeBodyOf(TypeHello))
}

func FuzzDecodeLockRequest(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeLockRequest", bodySeeds(TypeLockRequest), decodeBodyOf(TypeLockRequest))
}

func FuzzDecodeConvertRequest(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeConvertRequest", bodySeeds(TypeConvertRequest), decodeBodyOf(TypeConvertRequest))
}

func FuzzDecodeUnlockRequest(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeUnlockRequest", bodySeeds(TypeUnlockRequest), decodeBodyOf(TypeUnlockRequest))
}

func FuzzDecodeCancelRequest(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeCancelRequest", bodySeeds(TypeCancelRequest), decodeBodyOf(TypeCancelRequest))
}

func FuzzDecodeCompletion(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeCompletion", bodySeeds(TypeCompletion), decodeBodyOf(TypeCompletion))
}

func FuzzDecodeBlocking(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeBlocking", bodySeeds(TypeBlocking), decodeBodyOf(TypeBlocking))
}

func FuzzDecodeRenew(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeRenew", bodySeeds(TypeRenew), decodeBodyOf(TypeRenew))
}

func FuzzDecodeHeartbeat(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeHeartbeat", bodySeeds(TypeHeartbeat), decodeBodyOf(TypeHeartbeat))
}

func FuzzDecodeHeartbeatAck(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeHeartbeatAck", bodySeeds(TypeHeartbeatAck), decodeBodyOf(TypeHeartbeatAck))
}

func FuzzDecodePropose(f *testing.F) {
	fuzzTarget(f, "FuzzDecodePropose", bodySeeds(TypePropose), decodeBodyOf(TypePropose))
}

func FuzzDecodePromise(f *testing.F) {
	fuzzTarget(f, "FuzzDecodePromise", bodySeeds(TypePromise), decodeBodyOf(TypePromise))
}

func FuzzDecodeCommit(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeCommit", bodySeeds(TypeCommit), decodeBodyOf(TypeCommit))
}

func FuzzDecodeRecoveryStatus(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeRecoveryStatus", bodySeeds(TypeRecoveryStatus), decodeBodyOf(TypeRecoveryStatus))
}

func FuzzDecodeRecoveryPhase(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeRecoveryPhase", bodySeeds(TypeRecoveryPhase), decodeBodyOf(TypeRecoveryPhase))
}

func FuzzDecodeAck(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeAck", bodySeeds(TypeAck), decodeBodyOf(TypeAck))
}

func FuzzDecodeLockReport(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeLockReport", bodySeeds(TypeLockReport), decodeBodyOf(TypeLockReport))
}

func FuzzDecodeMasterReport(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeMasterReport", bodySeeds(TypeMasterReport), decodeBodyOf(TypeMasterReport))
}

func FuzzDecodeDeadlockReport(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeDeadlockReport", bodySeeds(TypeDeadlockReport), decodeBodyOf(TypeDeadlockReport))
}

func FuzzDecodeDeadlockConfirm(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeDeadlockConfirm", bodySeeds(TypeDeadlockConfirm), decodeBodyOf(TypeDeadlockConfirm))
}

func FuzzDecodeDeadlockConfirmed(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeDeadlockConfirmed", bodySeeds(TypeDeadlockConfirmed), decodeBodyOf(TypeDeadlockConfirmed))
}

func FuzzDecodeDeadlockFail(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeDeadlockFail", bodySeeds(TypeDeadlockFail), decodeBodyOf(TypeDeadlockFail))
}

func FuzzDecodeMastery(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeMastery", bodySeeds(TypeMastery), decodeBodyOf(TypeMastery))
}

func FuzzDecodeSemaphoreRequest(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeSemaphoreRequest", bodySeeds(TypeSemaphoreRequest), decodeBodyOf(TypeSemaphoreRequest))
}

func FuzzDecodePermitReport(f *testing.F) {
	fuzzTarget(f, "FuzzDecodePermitReport", bodySeeds(TypePermitReport), decodeBodyOf(TypePermitReport))
}

func FuzzDecodeDescribeRequest(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeDescribeRequest", bodySeeds(TypeDescribeRequest), decodeBodyOf(TypeDescribeRequest))
}

func FuzzDecodeDescribeReply(f *testing.F) {
	fuzzTarget(f, "FuzzDecodeDescribeReply", bodySeeds(TypeDescribeReply), decodeBodyOf(TypeDescribeReply))
}
