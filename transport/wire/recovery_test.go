package wire

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// Tests of the recovery messages beyond the round trips every type gets:
// each rule refused on both sides, the bounds of the arrays, and the reuse of
// a Decoder's message.

func validMembers() []ViewMember {
	return []ViewMember{{Name: "a", BootID: 1}, {Name: "b", BootID: 2}, {Name: "c", BootID: 3}}
}

// manyMembers returns n members with distinct names of the longest length,
// sorted.
func manyMembers(n int) []ViewMember {
	ms := make([]ViewMember, n)
	for i := range ms {
		name := fmt.Sprintf("%05d", i)
		ms[i] = ViewMember{Name: name + strings.Repeat("n", MaxNodeName-len(name)), BootID: ^uint64(0)}
	}
	return ms
}

type invalidCase struct {
	name string
	m    Message
	l    *Limits // nil: DefaultLimits
}

func invalidRecoveryMessages() []invalidCase {
	longNode := strings.Repeat("n", MaxNodeName+1)

	propose := func(f func(*Propose)) *Propose {
		m := &Propose{Epoch: 2, Coordinator: "a", PrevEpoch: 1, Members: validMembers()}
		f(m)
		return m
	}
	commit := func(f func(*Commit)) *Commit {
		m := &Commit{Epoch: 2, Coordinator: "a", Members: validMembers()}
		f(m)
		return m
	}

	return []invalidCase{
		{"propose epoch 0", propose(func(m *Propose) { m.Epoch = 0 }), nil},
		{"propose empty coordinator", propose(func(m *Propose) { m.Coordinator = "" }), nil},
		{"propose long coordinator", propose(func(m *Propose) { m.Coordinator = longNode }), nil},
		{"propose no members", propose(func(m *Propose) { m.Members = nil }), nil},
		{"propose too many members", propose(func(m *Propose) { m.Members = manyMembers(MaxMembers + 1) }), nil},
		{"propose empty member name", propose(func(m *Propose) { m.Members[0].Name = "" }), nil},
		{"propose long member name", propose(func(m *Propose) { m.Members[2].Name = longNode }), nil},
		{"propose boot id 0", propose(func(m *Propose) { m.Members[1].BootID = 0 }), nil},
		{"propose unsorted", propose(func(m *Propose) { m.Members[0], m.Members[1] = m.Members[1], m.Members[0] }), nil},
		{"propose duplicate", propose(func(m *Propose) { m.Members[1].Name = "a" }), nil},

		{"promise epoch 0", &Promise{Epoch: 0, OK: true}, nil},
		{"promise long reason", &Promise{Epoch: 1, Reason: strings.Repeat("e", MaxErr+1)}, nil},

		{"commit epoch 0", commit(func(m *Commit) { m.Epoch = 0 }), nil},
		{"commit empty coordinator", commit(func(m *Commit) { m.Coordinator = "" }), nil},
		{"commit long coordinator", commit(func(m *Commit) { m.Coordinator = longNode }), nil},
		{"commit no members", commit(func(m *Commit) { m.Members = nil }), nil},
		{"commit too many members", commit(func(m *Commit) { m.Members = manyMembers(MaxMembers + 1) }), nil},
		{"commit long member name", commit(func(m *Commit) { m.Members[2].Name = longNode }), nil},
		{"commit boot id 0", commit(func(m *Commit) { m.Members[2].BootID = 0 }), nil},
		{"commit unsorted", commit(func(m *Commit) { m.Members[1], m.Members[2] = m.Members[2], m.Members[1] }), nil},
		{"commit duplicate", commit(func(m *Commit) { m.Members[2].Name = "b" }), nil},

		{"recovery status epoch 0", &RecoveryStatus{Epoch: 0, Phase: 1}, nil},
		{"recovery status phase 0", &RecoveryStatus{Epoch: 1, Phase: 0}, nil},
		{"recovery status phase over max", &RecoveryStatus{Epoch: 1, Phase: MaxPhase + 1}, nil},
		{"recovery phase epoch 0", &RecoveryPhase{Epoch: 0, Phase: 1}, nil},
		{"recovery phase phase 0", &RecoveryPhase{Epoch: 1, Phase: 0}, nil},
		{"recovery phase phase over max", &RecoveryPhase{Epoch: 1, Phase: 255}, nil},
	}
}

// Each rule of each recovery message is enforced twice: AppendFrame refuses
// to send the message, and a decoder refuses its body written without the
// check. Both with ErrInvalid, the buffer untouched, no message returned.
func TestRecoveryMessagesRefuseInvalid(t *testing.T) {
	queued := mustFrame(t, Header{}, &Ping{})
	for _, c := range invalidRecoveryMessages() {
		l := DefaultLimits()
		if c.l != nil {
			l = *c.l
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("%s: limits: %v", c.name, err)
		}
		out, err := AppendFrame(queued, Header{}, c.m, &l)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: AppendFrame: %v, want ErrInvalid", c.name, err)
		}
		if len(out) != len(queued) {
			t.Errorf("%s: buffer grew to %d bytes on error", c.name, len(out))
		}
		payload := rawPayload(Version, byte(c.m.Type()), 0, c.m.appendBody(nil))
		_, m, err := NewDecoder(l).Decode(payload)
		if !errors.Is(err, ErrInvalid) || m != nil {
			t.Errorf("%s: Decode: (%v, %v), want ErrInvalid", c.name, m, err)
		}
	}
}

// The heartbeats have no rule to break: every value of their fields is
// allowed, epoch 0 included.
func TestHeartbeatsAlwaysValid(t *testing.T) {
	l := DefaultLimits()
	for _, m := range []Message{&Heartbeat{}, &Heartbeat{Epoch: ^uint64(0)}, &HeartbeatAck{}, &HeartbeatAck{Epoch: 1, Member: true}} {
		if err := m.Validate(&l); err != nil {
			t.Errorf("%#v: %v", m, err)
		}
	}
}

// The counts at their limits are accepted, by the encoder and the decoder.
func TestRecoveryMessagesAtLimits(t *testing.T) {
	l := DefaultLimits()
	for _, m := range []Message{
		&Propose{Epoch: 1, Coordinator: strings.Repeat("c", MaxNodeName), Members: manyMembers(MaxMembers)},
		&Commit{Epoch: 1, Coordinator: "c", Members: manyMembers(MaxMembers)},
		&RecoveryStatus{Epoch: 1, Phase: MaxPhase},
	} {
		frame := mustFrame(t, Header{ID: 1}, m)
		_, got, err := NewDecoder(l).DecodeFrame(frame)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("%T: round trip changed the message", m)
		}
	}
}

// MaxFrame is checked against the largest message: the smallest MaxFrame
// that Limits.Validate accepts holds a view of MaxMembers members with every
// field at its largest.
func TestLimitsHoldLargestMessages(t *testing.T) {
	for _, base := range []Limits{
		DefaultLimits(),
		{MaxName: 1 << 16, MaxLVB: 1 << 20, MaxRenew: 1, MaxReport: 1},
		{MaxName: 1, MaxLVB: 0, MaxRenew: 100000, MaxReport: 1 << 16},
	} {
		// the smallest MaxFrame Validate accepts
		lo, hi := 1024, 64<<20
		for lo < hi {
			mid := (lo + hi) / 2
			l := base
			l.MaxFrame = mid
			if l.Validate() == nil {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		l := base
		l.MaxFrame = lo
		if err := l.Validate(); err != nil {
			t.Fatalf("%+v: no MaxFrame is enough: %v", base, err)
		}
		max64 := ^uint64(0)
		largest := []Message{
			&Propose{Epoch: max64, Coordinator: strings.Repeat("c", MaxNodeName), PrevEpoch: max64, Members: manyMembers(MaxMembers)},
		}
		for _, m := range largest {
			if _, err := AppendFrame(nil, Header{ID: max64, Reply: true}, m, &l); err != nil {
				t.Errorf("MaxFrame %d (limits %+v): %T: %v", l.MaxFrame, base, m, err)
			}
		}
	}
}

// Decoding into the Decoder's message reuses its arrays, and leaves nothing
// of an earlier frame reachable through them: no element past the new length
// keeps a value.
func TestDecodeReuseLeavesNothingStale(t *testing.T) {
	d := NewDecoder(DefaultLimits())
	decode := func(m Message) Message {
		t.Helper()
		_, got, err := d.DecodeFrame(mustFrame(t, Header{ID: 1}, m))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("got %#v, want %#v", got, m)
		}
		return got
	}
	checkTail := func(what string, s any) {
		t.Helper()
		v := reflect.ValueOf(s)
		full := v.Slice3(0, v.Cap(), v.Cap())
		for i := v.Len(); i < v.Cap(); i++ {
			if !full.Index(i).IsZero() {
				t.Errorf("%s: element %d past the length %d keeps %+v", what, i, v.Len(), full.Index(i))
			}
		}
	}

	// Propose
	p1 := decode(&Propose{Epoch: 1, Coordinator: "a", Members: validMembers()}).(*Propose)
	parr := &p1.Members[0]
	p2 := decode(&Propose{Epoch: 2, Coordinator: "a", Members: []ViewMember{{Name: "z", BootID: 5}}}).(*Propose)
	if &p2.Members[0] != parr {
		t.Error("the members array was not reused")
	}
	checkTail("members", p2.Members)
}

// Array headers that declare more elements than the frame can hold, at any
// depth, are refused before anything is sized by them: decoding them
// allocates almost nothing (the error text), where sizing a slice by the
// largest of these counts would take 480 MB.
func TestNestedBombsFailFast(t *testing.T) {
	for _, typ := range []Type{TypePropose, TypeCommit} {
		for name, body := range typeSeeds(typ) {
			if !strings.HasPrefix(name, "bomb") {
				continue
			}
			payload := rawPayload(Version, byte(typ), 0, body)
			d := NewDecoder(DefaultLimits())
			_, _, _ = d.Decode(payload) // caches the message
			_, m, err := d.Decode(payload)
			if !errors.Is(err, ErrDeclaredLength) || m != nil {
				t.Errorf("%v %s: (%v, %v), want ErrDeclaredLength", typ, name, m, err)
			}
			var got uint64
			for range 3 { // other goroutines may allocate meanwhile
				if got = allocatedBy(func() { _, _, _ = d.Decode(payload) }); got <= 2048 {
					break
				}
			}
			if got > 2048 {
				t.Errorf("%v %s: refusing %d bytes allocated %d bytes", typ, name, len(payload), got)
			}
		}
	}
}

func TestSortMembers(t *testing.T) {
	ms := []ViewMember{{Name: "node-2", BootID: 2}, {Name: "Node-9", BootID: 9}, {Name: "node-10", BootID: 10}, {Name: "a", BootID: 1}}
	SortMembers(ms)
	if err := checkMembers(ms); err != nil {
		t.Fatal(err)
	}
	if ms[0].Name != "Node-9" || ms[3].Name != "node-2" {
		t.Fatalf("byte order expected: %v", ms)
	}
}
