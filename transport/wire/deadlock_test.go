package wire

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/seed-a6839e30/dlm/modes"
)

// Tests of the deadlock messages beyond the round trips, fuzz targets and
// properties every type gets: each rule refused on both sides, the edge
// count at its limit, and the reuse of a Decoder's arrays.

func validEdge() WaitEdge {
	return WaitEdge{Lockspace: "ls", Resource: "r", Mode: modes.EX, WaiterNode: 1, WaiterLock: 1, WaiterGen: 1,
		Kind: BlockHolder, BlockerNode: 2, BlockerLock: 1, Stamp: 5}
}

// manyEdges returns n valid edges, each with its own waiter.
func manyEdges(n int) []WaitEdge {
	es := make([]WaitEdge, n)
	for i := range es {
		es[i] = validEdge()
		es[i].WaiterLock = uint64(i + 1)
	}
	return es
}

func invalidDeadlockMessages() []invalidCase {
	l := DefaultLimits()
	longRes := strings.Repeat("r", l.MaxName+1)
	longLS := strings.Repeat("l", MaxLockspace+1)
	report := func(f func(*DeadlockReport, *WaitEdge)) *DeadlockReport {
		m := &DeadlockReport{Epoch: 2, Seq: 1, Edges: manyEdges(2)}
		f(m, &m.Edges[1])
		return m
	}
	confirm := func(f func(*DeadlockConfirm, *WaitEdge)) *DeadlockConfirm {
		m := &DeadlockConfirm{Epoch: 2, Edges: manyEdges(2)}
		f(m, &m.Edges[0])
		return m
	}
	fail := func(f func(*DeadlockFail)) *DeadlockFail {
		m := &DeadlockFail{Epoch: 2, Lockspace: "ls", Resource: "r", Node: 1, Lock: 1, Gen: 1}
		f(m)
		return m
	}
	return []invalidCase{
		{"report epoch 0", report(func(m *DeadlockReport, _ *WaitEdge) { m.Epoch = 0 }), nil},
		{"report too many edges", report(func(m *DeadlockReport, _ *WaitEdge) { m.Edges = manyEdges(MaxEdges + 1) }), nil},
		{"report empty lockspace", report(func(_ *DeadlockReport, e *WaitEdge) { e.Lockspace = "" }), nil},
		{"report long lockspace", report(func(_ *DeadlockReport, e *WaitEdge) { e.Lockspace = longLS }), nil},
		{"report empty resource", report(func(_ *DeadlockReport, e *WaitEdge) { e.Resource = "" }), nil},
		{"report long resource", report(func(_ *DeadlockReport, e *WaitEdge) { e.Resource = longRes }), nil},
		{"report mode", report(func(_ *DeadlockReport, e *WaitEdge) { e.Mode = modes.Count }), nil},
		{"report waiter lock 0", report(func(_ *DeadlockReport, e *WaitEdge) { e.WaiterLock = 0 }), nil},
		{"report blocker lock 0", report(func(_ *DeadlockReport, e *WaitEdge) { e.BlockerLock = 0 }), nil},
		{"report waits for itself", report(func(_ *DeadlockReport, e *WaitEdge) { e.BlockerNode, e.BlockerLock = e.WaiterNode, e.WaiterLock }), nil},
		{"report waiter generation 0", report(func(_ *DeadlockReport, e *WaitEdge) { e.WaiterGen = 0 }), nil},
		{"report kind 0", report(func(_ *DeadlockReport, e *WaitEdge) { e.Kind = 0 }), nil},
		{"report kind 3", report(func(_ *DeadlockReport, e *WaitEdge) { e.Kind = 3 }), nil},
		{"report ahead generation 0", report(func(_ *DeadlockReport, e *WaitEdge) { e.Kind, e.Stamp = BlockAhead, 0 }), nil},

		{"confirm epoch 0", confirm(func(m *DeadlockConfirm, _ *WaitEdge) { m.Epoch = 0 }), nil},
		{"confirm no edges", confirm(func(m *DeadlockConfirm, _ *WaitEdge) { m.Edges = nil }), nil},
		{"confirm too many edges", confirm(func(m *DeadlockConfirm, _ *WaitEdge) { m.Edges = manyEdges(MaxEdges + 1) }), nil},
		{"confirm bad edge", confirm(func(_ *DeadlockConfirm, e *WaitEdge) { e.WaiterGen = 0 }), nil},

		{"confirmed epoch 0", &DeadlockConfirmed{Held: []bool{true}}, nil},
		{"confirmed no answers", &DeadlockConfirmed{Epoch: 1}, nil},
		{"confirmed too many answers", &DeadlockConfirmed{Epoch: 1, Held: make([]bool, MaxEdges+1)}, nil},

		{"fail epoch 0", fail(func(m *DeadlockFail) { m.Epoch = 0 }), nil},
		{"fail empty lockspace", fail(func(m *DeadlockFail) { m.Lockspace = "" }), nil},
		{"fail long lockspace", fail(func(m *DeadlockFail) { m.Lockspace = longLS }), nil},
		{"fail empty resource", fail(func(m *DeadlockFail) { m.Resource = "" }), nil},
		{"fail long resource", fail(func(m *DeadlockFail) { m.Resource = longRes }), nil},
		{"fail lock 0", fail(func(m *DeadlockFail) { m.Lock = 0 }), nil},
		{"fail generation 0", fail(func(m *DeadlockFail) { m.Gen = 0 }), nil},
		{"fail long detail", fail(func(m *DeadlockFail) { m.Detail = strings.Repeat("d", MaxErr+1) }), nil},
	}
}

// Each rule of each deadlock message is enforced twice: AppendFrame refuses
// to send the message, and a decoder refuses its body written without the
// check. Both with ErrInvalid, the buffer untouched, no message returned.
func TestDeadlockMessagesRefuseInvalid(t *testing.T) {
	queued := mustFrame(t, Header{}, &Ping{})
	for _, c := range invalidDeadlockMessages() {
		assertRefusedBothWays(t, c.name, c.m, DefaultLimits(), queued)
	}
}

// MaxEdges edges, and MaxEdges answers, are accepted by the encoder and the
// decoder, and fit the default frame with names of a usual length.
func TestDeadlockMessagesAtLimits(t *testing.T) {
	l := DefaultLimits()
	edges := manyEdges(MaxEdges)
	for i := range edges {
		edges[i].Resource = fmt.Sprintf("a-resource-name-of-usual-length/%06d", i)
	}
	for _, m := range []Message{
		&DeadlockReport{Epoch: 1, Seq: 1, Edges: edges},
		&DeadlockConfirm{Epoch: 1, Edges: edges},
		&DeadlockConfirmed{Epoch: 1, Held: make([]bool, MaxEdges)},
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

// Decoding reuses the edge and answer arrays and leaves nothing of an
// earlier frame past their new length.
func TestDeadlockDecodeReuse(t *testing.T) {
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
	r1 := decode(&DeadlockReport{Epoch: 1, Seq: 1, Edges: manyEdges(5)}).(*DeadlockReport)
	first := &r1.Edges[0]
	r2 := decode(&DeadlockReport{Epoch: 1, Seq: 2, Edges: manyEdges(2)}).(*DeadlockReport)
	if &r2.Edges[0] != first {
		t.Error("the edges array was not reused")
	}
	for i, e := range r2.Edges[:cap(r2.Edges)][len(r2.Edges):] {
		if e != (WaitEdge{}) {
			t.Errorf("edge %d past the length keeps %+v", i+len(r2.Edges), e)
		}
	}
	if r3 := decode(&DeadlockReport{Epoch: 1, Seq: 3}).(*DeadlockReport); r3.Edges != nil {
		t.Errorf("an empty report decoded to %#v, want nil edges", r3.Edges)
	}
	c1 := decode(&DeadlockConfirmed{Epoch: 1, Held: []bool{true, true, true}}).(*DeadlockConfirmed)
	c2 := decode(&DeadlockConfirmed{Epoch: 1, Held: []bool{false}}).(*DeadlockConfirmed)
	if &c1.Held[0] != &c2.Held[0] || c2.Held[:3][1] || c2.Held[:3][2] {
		t.Errorf("answers not reused or not cleared: %v", c2.Held[:3])
	}
}
