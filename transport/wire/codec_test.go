package wire

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

func TestRoundTripEveryType(t *testing.T) {
	seen := map[Type]bool{}
	l := DefaultLimits()
	d := testDecoder(l)
	for i, m := range samples() {
		seen[m.Type()] = true
		h := Header{ID: uint64(i) + 1, Reply: i%2 == 0}
		frame := mustFrame(t, h, m)
		gh, gm, err := d.DecodeFrame(frame)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		h.Type = m.Type()
		if gh != h {
			t.Errorf("%T: header %+v, want %+v", m, gh, h)
		}
		if !reflect.DeepEqual(gm, m) {
			t.Errorf("%T: got %#v, want %#v", m, gm, m)
		}
		checkRoundTrip(t, gh, gm)
	}
	for ty := Type(1); ty < clientTypeEnd; ty++ {
		if ty.Known() && !seen[ty] {
			t.Errorf("no sample of %v", ty)
		}
	}
}

// A message from DecodeOwned keeps nothing of the payload: every sample,
// decoded and then its buffer overwritten, still equals what was sent.
func TestDecodeOwnedSurvivesBufferReuse(t *testing.T) {
	d := testDecoder(DefaultLimits())
	for i, m := range samples() {
		frame := mustFrame(t, Header{ID: uint64(i) + 1, Reply: true}, m)
		_, got, err := d.DecodeOwned(frame[PrefixSize:])
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		for j := range frame {
			frame[j] = 0xa5
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%T changed with the frame buffer:\ngot  %#v\nwant %#v", m, got, m)
		}
	}
}

// DecodeInto fills the caller's message, owns its byte slices, refuses a
// payload of another type without touching the message, and allocates
// nothing for a message without byte slices.
func TestDecodeInto(t *testing.T) {
	d := testDecoder(DefaultLimits())
	all := samples()
	for i, m := range all {
		frame := mustFrame(t, Header{ID: uint64(i) + 1, Reply: true}, m)
		into := newMessage(m.Type())
		h, err := d.DecodeInto(frame[PrefixSize:], into)
		if err != nil || h.ID != uint64(i)+1 || !h.Reply {
			t.Fatalf("%T: %+v, %v", m, h, err)
		}
		for j := range frame {
			frame[j] = 0xa5
		}
		if !reflect.DeepEqual(into, m) {
			t.Errorf("%T:\ngot  %#v\nwant %#v", m, into, m)
		}
	}
	req := &LockRequest{Epoch: 1, Lockspace: "ls", Resource: "r", Lock: 1, Mode: 5}
	frame := mustFrame(t, Header{ID: 1}, req)
	c := &Completion{Epoch: 7, Lock: 9}
	if _, err := d.DecodeInto(frame[PrefixSize:], c); !errors.Is(err, ErrWrongType) {
		t.Fatalf("a LockRequest into a Completion: %v", err)
	}
	if !reflect.DeepEqual(c, &Completion{Epoch: 7, Lock: 9}) {
		t.Fatalf("the refused decode changed the message: %+v", c)
	}
	reply := mustFrame(t, Header{ID: 2, Reply: true}, &Completion{Epoch: 1, Lockspace: "ls", Lock: 3, Status: StatusGranted, Mode: 5, Token: 30})
	n := testing.AllocsPerRun(100, func() {
		if _, err := d.DecodeInto(reply[PrefixSize:], c); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 || c.Token != 30 {
		t.Fatalf("DecodeInto of a Completion: %v allocs, token %d", n, c.Token)
	}
}

func TestDecodeHeader(t *testing.T) {
	frame := mustFrame(t, Header{ID: 9, Reply: true}, samples()[0])
	d := testDecoder(DefaultLimits())
	h, err := d.DecodeHeader(frame[PrefixSize:])
	if err != nil || h != (Header{Type: samples()[0].Type(), ID: 9, Reply: true}) {
		t.Fatalf("DecodeHeader = %+v, %v", h, err)
	}
	frame[PrefixSize] = Version + 1
	if _, err := d.DecodeHeader(frame[PrefixSize:]); !errors.Is(err, ErrVersion) {
		t.Fatalf("wrong version: %v", err)
	}
}

// Each kind of bad input maps to its own sentinel, and no message comes back.
func TestDecodeErrorsAreDistinct(t *testing.T) {
	seeds := frameSeeds(t)
	cases := map[string]error{
		"huge-length":        ErrFrameTooLarge,
		"short-prefix":       ErrTruncated,
		"truncated":          ErrTruncated,
		"trailing":           ErrTrailingBytes,
		"wrong-version":      ErrVersion,
		"unknown-type":       ErrUnknownType,
		"bomb-array32-renew": ErrDeclaredLength,
		"bomb-array32-body":  ErrDeclaredLength,
		"map-bomb":           ErrDeclaredLength,
		"str-bomb":           ErrDeclaredLength,
		"bomb-array32-max":   ErrDeclaredLength,
		"str-bomb-max":       ErrDeclaredLength,
		"epoch-zero":         ErrInvalid,
		"bad-mode":           ErrInvalid,
	}
	for name, want := range cases {
		_, m, err := testDecoder(DefaultLimits()).DecodeFrame(seeds[name])
		if !errors.Is(err, want) || m != nil {
			t.Errorf("%s: got (%v, %v), want %v", name, m, err, want)
		}
	}
	// a body with a field of the wrong msgpack type
	_, _, err := testDecoder(DefaultLimits()).Decode(rawPayload(Version, byte(TypeBlocking), 0, []byte{0x94, 0xa1, 'x', 1, 1, 1}))
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("wrong field type: %v, want ErrMalformed", err)
	}
	// a reply flag without a request id
	_, _, err = testDecoder(DefaultLimits()).Decode(rawPayload(Version, byte(TypePing)|replyFlag, 0, []byte{0x90}))
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("reply without id: %v, want ErrMalformed", err)
	}
	// trailing bytes inside the frame, after the body
	_, _, err = testDecoder(DefaultLimits()).Decode(rawPayload(Version, byte(TypePing), 0, []byte{0x93, 0, 0, 0xc2, 0x90}))
	if !errors.Is(err, ErrTrailingBytes) {
		t.Errorf("trailing body bytes: %v, want ErrTrailingBytes", err)
	}
}

func TestFrameLengthRefusesBeforeReading(t *testing.T) {
	l := DefaultLimits()
	if _, err := FrameLength([]byte{0, 0x10, 0, 1}, &l); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("1 MiB + 1: %v", err)
	}
	if n, err := FrameLength([]byte{0, 0x10, 0, 0}, &l); err != nil || n != 1<<20 {
		t.Fatalf("exactly 1 MiB: %d, %v", n, err)
	}
	if _, err := FrameLength([]byte{0, 0, 0, 9}, &l); !errors.Is(err, ErrTruncated) {
		t.Fatalf("shorter than header: %v", err)
	}
}

// Invalid messages are refused by the encoder too, and the buffer is left as
// it was: a refused message loses nothing that was queued before it.
func TestAppendFrameRefusesInvalid(t *testing.T) {
	l := DefaultLimits()
	long := strings.Repeat("x", l.MaxName+1)
	bad := []Message{
		&LockRequest{Epoch: 0, Lockspace: "ls", Resource: "r", Lock: 1},
		&LockRequest{Epoch: 1, Lockspace: "", Resource: "r", Lock: 1},
		&LockRequest{Epoch: 1, Lockspace: strings.Repeat("l", 65), Resource: "r", Lock: 1},
		&LockRequest{Epoch: 1, Lockspace: "ls", Resource: "", Lock: 1},
		&LockRequest{Epoch: 1, Lockspace: "ls", Resource: long, Lock: 1},
		&LockRequest{Epoch: 1, Lockspace: "ls", Resource: "r", Lock: 0},
		&LockRequest{Epoch: 1, Lockspace: "ls", Resource: "r", Lock: 1, Mode: 6},
		&LockRequest{Epoch: 1, Lockspace: "ls", Resource: "r", Lock: 1, Timeout: -1},
		&LockRequest{Epoch: 1, Lockspace: "ls", Resource: "r", Lock: 1, TTL: -1},
		&ConvertRequest{Epoch: 1, Lockspace: "ls", Resource: "r", Lock: 1, LVB: make([]byte, l.MaxLVB+1), LVBOp: LVBWrite},
		&ConvertRequest{Epoch: 1, Lockspace: "ls", Resource: "r", Lock: 1, LVBOp: 3},
		&UnlockRequest{Epoch: 1, Lockspace: "ls", Resource: "r", Lock: 1, LVB: []byte{1}},
		&Completion{Epoch: 1, Lockspace: "ls", Lock: 1, Status: 0},
		&Completion{Epoch: 1, Lockspace: "ls", Lock: 1, Status: 8},
		&Completion{Epoch: 1, Lockspace: "ls", Lock: 1, Status: StatusGranted, LVBFlags: 4},
		&Completion{Epoch: 1, Lockspace: "ls", Lock: 1, Status: StatusGranted, LVB: []byte{1}},
		&Completion{Epoch: 1, Lockspace: "ls", Lock: 1, Status: StatusError, Err: strings.Repeat("e", MaxErr+1)},
		&Blocking{Epoch: 1, Lockspace: "ls", Lock: 1, Mode: 200},
		&Renew{Epoch: 1, Lockspace: "ls"},
		&Renew{Epoch: 1, Lockspace: "ls", Locks: make([]uint64, l.MaxRenew+1)},
		&Renew{Epoch: 1, Lockspace: "ls", Locks: []uint64{1, 0}},
		&Hello{Version: 0, ClusterID: "c", Node: "n", BootID: 1, Session: 1},
		&Hello{Version: 1, ClusterID: "", Node: "n", BootID: 1, Session: 1},
		&Hello{Version: 1, ClusterID: "c", Node: "", BootID: 1, Session: 1},
		&Hello{Version: 1, ClusterID: "c", Node: "n", BootID: 0, Session: 1},
		&Hello{Version: 1, ClusterID: "c", Node: "n", BootID: 1, Session: 0},
	}
	queued := mustFrame(t, Header{}, &Ping{})
	for _, m := range bad {
		out, err := AppendFrame(queued, Header{}, m, &l)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%#v: %v, want ErrInvalid", m, err)
		}
		if len(out) != len(queued) {
			t.Errorf("%#v: buffer grew to %d bytes on error", m, len(out))
		}
	}
	if _, err := AppendFrame(nil, Header{Reply: true}, &Ping{}, &l); !errors.Is(err, ErrMalformed) {
		t.Errorf("reply without id: %v", err)
	}
	small := l
	small.MaxFrame = 1024
	big := &UnlockRequest{Epoch: 1, Lockspace: "ls", Resource: "r", Lock: 1, LVB: make([]byte, 2000), LVBOp: LVBWrite}
	if out, err := AppendFrame(queued, Header{}, big, &small); !errors.Is(err, ErrFrameTooLarge) || len(out) != len(queued) {
		t.Errorf("oversized frame: %v, %d bytes", err, len(out))
	}
}

// A limit smaller than the default is applied by the decoder before it
// copies the field.
func TestDecoderAppliesLimits(t *testing.T) {
	l := DefaultLimits()
	l.MaxName = 4
	frame := mustFrame(t, Header{}, &CancelRequest{Epoch: 1, Lockspace: "ls", Resource: "longer", Lock: 1})
	if _, _, err := testDecoder(l).DecodeFrame(frame); !errors.Is(err, ErrInvalid) {
		t.Fatalf("resource over MaxName: %v", err)
	}
}

func TestLimitsValidate(t *testing.T) {
	if err := DefaultLimits().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []Limits{
		{MaxFrame: 10, MaxName: 1, MaxLVB: 0, MaxRenew: 1, MaxReport: 1},
		{MaxFrame: 1 << 20, MaxName: 0, MaxLVB: 0, MaxRenew: 1, MaxReport: 1},
		{MaxFrame: 1 << 20, MaxName: 1, MaxLVB: -1, MaxRenew: 1, MaxReport: 1},
		{MaxFrame: 1 << 20, MaxName: 1, MaxLVB: 0, MaxRenew: 0, MaxReport: 1},
		{MaxFrame: 1 << 20, MaxName: 1, MaxLVB: 0, MaxRenew: 1, MaxReport: 0},
		{MaxFrame: 1 << 20, MaxName: 1, MaxLVB: 0, MaxRenew: 1, MaxReport: 1<<16 + 1},
		{MaxFrame: 1 << 20, MaxName: 256, MaxLVB: 1 << 20, MaxRenew: 1, MaxReport: 1},
		{MaxFrame: 1 << 20, MaxName: 256, MaxLVB: 64, MaxRenew: 200000, MaxReport: 1},
		// a view of MaxMembers members with its configuration needs about 784 KiB
		{MaxFrame: 256 << 10, MaxName: 256, MaxLVB: 64, MaxRenew: 1, MaxReport: 1},
	}
	for _, l := range bad {
		if err := l.Validate(); err == nil {
			t.Errorf("%+v accepted", l)
		}
	}
	good := []Limits{
		{MaxFrame: 800 << 10, MaxName: 256, MaxLVB: 4096, MaxRenew: 4096, MaxReport: 1},
		{MaxFrame: 64 << 20, MaxName: 1 << 16, MaxLVB: 1 << 20, MaxRenew: 1 << 20, MaxReport: 1 << 16},
	}
	for _, l := range good {
		if err := l.Validate(); err != nil {
			t.Errorf("%+v refused: %v", l, err)
		}
	}
}

func TestReasonCoversSentinels(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Reasons() {
		if seen[r] {
			t.Fatalf("duplicate reason %q", r)
		}
		seen[r] = true
	}
	if Reason(errors.New("x")) != "other" || Reason(ErrVersion) != "version" {
		t.Fatal("Reason mapping broken")
	}
}

// Steady traffic does not allocate for interned names; a resource name costs
// at most one allocation (none when the same name came just before).
func TestDecodeAllocations(t *testing.T) {
	frame := mustFrame(t, Header{ID: 1}, samples()[3])
	d := testDecoder(DefaultLimits())
	if _, _, err := d.DecodeFrame(frame); err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(100, func() {
		if _, _, err := d.DecodeFrame(frame); err != nil {
			t.Fatal(err)
		}
	})
	if n > 1 {
		t.Fatalf("decoding a lock request: %v allocs, want ≤ 1", n)
	}
}

// TestRecentResourceNames: an unlock naming the resource its lock request
// named gets the request's string, without allocating; every name decodes
// right however the recent slots collide.
func TestRecentResourceNames(t *testing.T) {
	d := testDecoder(DefaultLimits())
	decodeResource := func(m Message) string {
		t.Helper()
		_, got, err := d.DecodeFrame(mustFrame(t, Header{}, m))
		if err != nil {
			t.Fatal(err)
		}
		switch g := got.(type) {
		case *LockRequest:
			return g.Resource
		case *UnlockRequest:
			return g.Resource
		}
		t.Fatalf("decoded %T", got)
		return ""
	}
	req := &LockRequest{Epoch: 1, Lockspace: "ls", Resource: "inode/42", Lock: 1, Mode: 5}
	unl := &UnlockRequest{Epoch: 1, Lockspace: "ls", Resource: "inode/42", Lock: 1}
	first := decodeResource(req)
	second := decodeResource(unl)
	if first != "inode/42" || second != first || unsafe.StringData(first) != unsafe.StringData(second) {
		t.Fatalf("decoded %q then %q, not one shared string", first, second)
	}
	frame := mustFrame(t, Header{}, unl)
	if n := testing.AllocsPerRun(100, func() {
		if _, _, err := d.DecodeFrame(frame); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("an unlock after its request: %v allocs, want 0", n)
	}
	for i := range 1000 { // many more names than slots: collisions replace
		name := fmt.Sprintf("r%d", i%300)
		if got := decodeResource(&UnlockRequest{Epoch: 1, Lockspace: "ls", Resource: name, Lock: 1}); got != name {
			t.Fatalf("decoded %q, want %q", got, name)
		}
	}
}
