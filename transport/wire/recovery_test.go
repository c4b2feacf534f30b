package wire

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/seed-a6839e30/dlm/modes"
)

// Tests of the recovery messages beyond the round trips every type gets:
// each rule refused on both sides, the bounds of the nested arrays, and the
// reuse of a Decoder's message.

func validMembers() []ViewMember {
	return []ViewMember{{Name: "a", BootID: 1}, {Name: "b", BootID: 2}, {Name: "c", BootID: 3}}
}

func validReportedLock() ReportedLock {
	return ReportedLock{Resource: "r", Lock: 1, Queue: QueueConverting, Granted: modes.PR, Requested: modes.EX, TTL: 1, LVB: []byte{1}, LVBFlags: LVBPresent}
}

func validResource() ReportedResource {
	return ReportedResource{Resource: "r", LVB: []byte{1}, LVBFlags: LVBPresent | LVBValid, Locks: []QueuedLock{
		{Node: 1, Lock: 1, Queue: QueueGranted, Granted: modes.PR},
		{Node: 2, Lock: 2, Queue: QueueConverting, Granted: modes.PR},
		{Node: 3, Lock: 3, Queue: QueueWaiting, Granted: modes.NL},
	}}
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
	l := DefaultLimits()
	longNode := strings.Repeat("n", MaxNodeName+1)
	longRes := strings.Repeat("r", l.MaxName+1)
	longLS := strings.Repeat("l", MaxLockspace+1)
	bigLVB := make([]byte, l.MaxLVB+1)

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
	lockReport := func(f func(*LockReport, *ReportedLock)) *LockReport {
		m := &LockReport{Epoch: 2, Lockspace: "ls", Locks: []ReportedLock{validReportedLock(), validReportedLock()}}
		f(m, &m.Locks[1])
		return m
	}
	masterReport := func(f func(*MasterReport, *ReportedResource)) *MasterReport {
		m := &MasterReport{Epoch: 2, Lockspace: "ls", LastToken: 5, Resources: []ReportedResource{validResource(), validResource()}}
		f(m, &m.Resources[1])
		return m
	}
	small := DefaultLimits()
	small.MaxReport = 20 // MaxQueued 320: 20 resources of 17 locks are 340
	overQueued := &MasterReport{Epoch: 2, Lockspace: "ls"}
	for range 20 {
		res := ReportedResource{Resource: "r"}
		for j := range 17 {
			res.Locks = append(res.Locks, QueuedLock{Lock: uint64(j + 1), Queue: QueueWaiting})
		}
		overQueued.Resources = append(overQueued.Resources, res)
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

		{"ack epoch 0", &Ack{}, nil},

		{"mastery epoch 0", &Mastery{}, nil},
		{"mastery short bitmap", &Mastery{Epoch: 1, Tables: make([]byte, MasteryBitmap-1)}, nil},
		{"mastery too many views", &Mastery{Epoch: 1, Views: manyViews(MaxMasteryViews + 1)}, nil},
		{"mastery view epoch 0", &Mastery{Epoch: 1, Views: []ViewRef{{Epoch: 0, ID: 1}}}, nil},
		{"mastery views out of order", &Mastery{Epoch: 1, Views: []ViewRef{{Epoch: 3}, {Epoch: 3}}}, nil},
		{"mastery too many aborted views", &Mastery{Epoch: 1, Aborted: manyViews(MaxMasteryViews + 1)}, nil},
		{"mastery aborted view epoch 0", &Mastery{Epoch: 1, Aborted: []ViewRef{{Epoch: 0, ID: 1}}}, nil},
		{"mastery aborted views out of order", &Mastery{Epoch: 1, Aborted: []ViewRef{{Epoch: 4}, {Epoch: 3}}}, nil},

		{"lock report epoch 0", lockReport(func(m *LockReport, _ *ReportedLock) { m.Epoch = 0 }), nil},
		{"lock report empty lockspace", lockReport(func(m *LockReport, _ *ReportedLock) { m.Lockspace = "" }), nil},
		{"lock report long lockspace", lockReport(func(m *LockReport, _ *ReportedLock) { m.Lockspace = longLS }), nil},
		{"lock report no locks", lockReport(func(m *LockReport, _ *ReportedLock) { m.Locks = nil }), nil},
		{"lock report too many locks", lockReport(func(m *LockReport, _ *ReportedLock) {
			m.Locks = make([]ReportedLock, l.MaxReport+1)
			for i := range m.Locks {
				m.Locks[i] = validReportedLock()
			}
		}), nil},
		{"lock report empty resource", lockReport(func(_ *LockReport, k *ReportedLock) { k.Resource = "" }), nil},
		{"lock report long resource", lockReport(func(_ *LockReport, k *ReportedLock) { k.Resource = longRes }), nil},
		{"lock report lock 0", lockReport(func(_ *LockReport, k *ReportedLock) { k.Lock = 0 }), nil},
		{"lock report queue 0", lockReport(func(_ *LockReport, k *ReportedLock) { k.Queue = 0 }), nil},
		{"lock report queue 4", lockReport(func(_ *LockReport, k *ReportedLock) { k.Queue = 4 }), nil},
		{"lock report granted mode", lockReport(func(_ *LockReport, k *ReportedLock) { k.Granted = modes.Count }), nil},
		{"lock report waiting not NL", lockReport(func(_ *LockReport, k *ReportedLock) { k.Queue, k.Granted = QueueWaiting, modes.CR }), nil},
		{"lock report requested mode", lockReport(func(_ *LockReport, k *ReportedLock) { k.Requested = 200 }), nil},
		{"lock report negative ttl", lockReport(func(_ *LockReport, k *ReportedLock) { k.TTL = -1 }), nil},
		{"lock report long lvb", lockReport(func(_ *LockReport, k *ReportedLock) { k.LVB = bigLVB }), nil},
		{"lock report lvb not present", lockReport(func(_ *LockReport, k *ReportedLock) { k.LVBFlags = LVBValid }), nil},
		{"lock report unknown lvb flags", lockReport(func(_ *LockReport, k *ReportedLock) { k.LVBFlags |= 4 }), nil},

		{"master report epoch 0", masterReport(func(m *MasterReport, _ *ReportedResource) { m.Epoch = 0 }), nil},
		{"master report empty lockspace", masterReport(func(m *MasterReport, _ *ReportedResource) { m.Lockspace = "" }), nil},
		{"master report long lockspace", masterReport(func(m *MasterReport, _ *ReportedResource) { m.Lockspace = longLS }), nil},
		{"master report too many resources", masterReport(func(m *MasterReport, _ *ReportedResource) {
			m.Resources = make([]ReportedResource, l.MaxReport+1)
			for i := range m.Resources {
				m.Resources[i] = ReportedResource{Resource: "r"}
			}
		}), nil},
		{"master report empty resource", masterReport(func(_ *MasterReport, r *ReportedResource) { r.Resource = "" }), nil},
		{"master report long resource", masterReport(func(_ *MasterReport, r *ReportedResource) { r.Resource = longRes }), nil},
		{"master report long lvb", masterReport(func(_ *MasterReport, r *ReportedResource) { r.LVB = bigLVB }), nil},
		{"master report lvb not present", masterReport(func(_ *MasterReport, r *ReportedResource) { r.LVBFlags = 0 }), nil},
		{"master report unknown lvb flags", masterReport(func(_ *MasterReport, r *ReportedResource) { r.LVBFlags = 0x80 | LVBPresent }), nil},
		{"master report too many queued on a resource", masterReport(func(_ *MasterReport, r *ReportedResource) {
			r.Locks = make([]QueuedLock, l.MaxReport+1)
			for i := range r.Locks {
				r.Locks[i] = QueuedLock{Lock: 1, Queue: QueueGranted}
			}
		}), nil},
		{"master report queued lock 0", masterReport(func(_ *MasterReport, r *ReportedResource) { r.Locks[1].Lock = 0 }), nil},
		{"master report queue 0", masterReport(func(_ *MasterReport, r *ReportedResource) { r.Locks[0].Queue = 0 }), nil},
		{"master report queue 4", masterReport(func(_ *MasterReport, r *ReportedResource) { r.Locks[2].Queue = 4 }), nil},
		{"master report granted mode", masterReport(func(_ *MasterReport, r *ReportedResource) { r.Locks[0].Granted = 6 }), nil},
		{"master report waiting not NL", masterReport(func(_ *MasterReport, r *ReportedResource) { r.Locks[2].Granted = modes.EX }), nil},
		{"master report out of queue order", masterReport(func(_ *MasterReport, r *ReportedResource) { r.Locks[0], r.Locks[2] = r.Locks[2], r.Locks[0] }), nil},
		{"master report over MaxQueued", overQueued, &small},
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
		assertRefusedBothWays(t, c.name, c.m, l, queued)
	}
}

// assertRefusedBothWays checks that m breaks a rule under l both ways:
// AppendFrame refuses it with ErrInvalid and leaves queued as it was, and a
// decoder refuses its body, written without the check, with ErrInvalid and
// no message.
func assertRefusedBothWays(t *testing.T, name string, m Message, l Limits, queued []byte) {
	t.Helper()
	out, err := AppendFrame(queued, Header{}, m, &l)
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("%s: AppendFrame: %v, want ErrInvalid", name, err)
	}
	if len(out) != len(queued) {
		t.Errorf("%s: buffer grew to %d bytes on error", name, len(out))
	}
	payload := rawPayload(Version, byte(m.Type()), 0, m.appendBody(nil))
	_, got, err := NewDecoder(l).Decode(payload)
	if !errors.Is(err, ErrInvalid) || got != nil {
		t.Errorf("%s: Decode: (%v, %v), want ErrInvalid", name, got, err)
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
	lr := &LockReport{Epoch: 1, Lockspace: "ls", Locks: make([]ReportedLock, l.MaxReport)}
	for i := range lr.Locks {
		lr.Locks[i] = validReportedLock()
	}
	mr := &MasterReport{Epoch: 1, Lockspace: "ls", Resources: make([]ReportedResource, l.MaxReport)}
	for i := range mr.Resources {
		mr.Resources[i] = ReportedResource{Resource: "r"}
	}
	// MaxQueued in all, MaxReport on one resource
	for i := range queuedPerReport {
		res := &mr.Resources[i]
		res.Locks = make([]QueuedLock, l.MaxReport)
		for j := range res.Locks {
			res.Locks[j] = QueuedLock{Node: uint32(i), Lock: uint64(j + 1), Queue: QueueGranted, Granted: modes.CR}
		}
	}
	for _, m := range []Message{
		lr, mr,
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
// that Limits.Validate accepts holds a view of MaxMembers members and a
// report of one lock with every field at its largest.
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
		var lvb []byte
		if l.MaxLVB > 0 {
			lvb = bytes.Repeat([]byte{0xff}, l.MaxLVB)
		}
		ls, res := strings.Repeat("l", MaxLockspace), strings.Repeat("r", l.MaxName)
		largest := []Message{
			&Propose{Epoch: max64, Coordinator: strings.Repeat("c", MaxNodeName), PrevEpoch: max64, Members: manyMembers(MaxMembers)},
			&LockReport{Epoch: max64, Lockspace: ls, Locks: []ReportedLock{{
				Resource: res, Lock: max64, Owner: max64, Queue: QueueConverting, Granted: modes.EX, Requested: modes.EX,
				Token: max64, TTL: 1<<63 - 1, LVB: lvb, LVBSeq: max64, LVBFlags: LVBPresent | LVBValid,
			}}},
			&MasterReport{Epoch: max64, Lockspace: ls, LastToken: max64, Resources: []ReportedResource{{
				Resource: res, LVB: lvb, LVBSeq: max64, LVBFlags: LVBPresent | LVBValid,
				Locks: []QueuedLock{{Node: ^uint32(0), Lock: max64, Queue: QueueGranted, Granted: modes.EX}},
			}}},
			&DeadlockReport{Epoch: max64, Seq: max64, Edges: []WaitEdge{{
				Lockspace: ls, Resource: res, Mode: modes.EX, WaiterNode: ^uint32(0), WaiterLock: max64, WaiterOwner: max64, WaiterGen: max64,
				Kind: BlockAhead, BlockerNode: ^uint32(0) - 1, BlockerLock: max64, BlockerOwner: max64, Stamp: max64,
			}}},
			&DeadlockFail{Epoch: max64, Lockspace: ls, Resource: res, Node: ^uint32(0), Lock: max64, Gen: max64, Detail: strings.Repeat("d", MaxErr)},
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
// keeps a value (or an LVB aliasing the old frame).
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

	// MasterReport: 5 resources of 3 locks, then 2 resources of 1 and 0
	big := &MasterReport{Epoch: 1, Lockspace: "ls", LastToken: 9}
	for i := range 5 {
		res := validResource()
		res.Resource = fmt.Sprint("res-", i)
		big.Resources = append(big.Resources, res)
	}
	m1 := decode(big).(*MasterReport)
	arr, arr0 := &m1.Resources[0], &m1.Resources[0].Locks[0]
	small := &MasterReport{Epoch: 2, Lockspace: "ls", Resources: []ReportedResource{
		{Resource: "x", Locks: []QueuedLock{{Node: 9, Lock: 9, Queue: QueueGranted, Granted: modes.EX}}},
		{Resource: "y"},
	}}
	m2 := decode(small).(*MasterReport)
	if m2 != m1 || &m2.Resources[0] != arr || &m2.Resources[0].Locks[0] != arr0 {
		t.Error("the resources array or its locks array was not reused")
	}
	checkTail("resources", m2.Resources)
	checkTail("locks of resource 0", m2.Resources[0].Locks)
	if m3 := decode(&MasterReport{Epoch: 3, Lockspace: "ls", LastToken: 10}).(*MasterReport); m3.Resources != nil {
		t.Errorf("an empty report decoded to %#v, want nil resources", m3.Resources)
	}

	// LockReport: 6 locks with LVBs, then 2
	lbig := &LockReport{Epoch: 1, Lockspace: "ls"}
	for i := range 6 {
		k := validReportedLock()
		k.Lock = uint64(i + 1)
		lbig.Locks = append(lbig.Locks, k)
	}
	l1 := decode(lbig).(*LockReport)
	larr := &l1.Locks[0]
	l2 := decode(&LockReport{Epoch: 1, Lockspace: "ls", Locks: lbig.Locks[4:]}).(*LockReport)
	if &l2.Locks[0] != larr {
		t.Error("the locks array was not reused")
	}
	checkTail("reported locks", l2.Locks)

	// Propose and Commit
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
// smallest of these counts would take 24 KiB and by the largest 480 MB.
func TestNestedBombsFailFast(t *testing.T) {
	for _, typ := range []Type{TypeMasterReport, TypeLockReport, TypePropose, TypeCommit, TypeDeadlockReport, TypeDeadlockConfirm, TypeDeadlockConfirmed} {
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

// A view's member names do not go into the Decoder's intern table: a view of
// more members than the table holds would fill it for the life of the
// connection, and building it costs far more than the frame.
func TestViewsDoNotFillInternTable(t *testing.T) {
	d := NewDecoder(DefaultLimits())
	m := &Commit{Epoch: 1, Coordinator: "coordinator", Members: shortNames(maxInterned + 44)}
	if _, _, err := d.DecodeFrame(mustFrame(t, Header{}, m)); err != nil {
		t.Fatal(err)
	}
	if len(d.intern) != 1 {
		t.Fatalf("intern table holds %d names after one view, want the coordinator's", len(d.intern))
	}
	checkDecode(t, m.appendBody(nil), decodeBodyOf(TypeCommit))
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

// manyViews returns n view references in increasing epochs.
func manyViews(n int) []ViewRef {
	vs := make([]ViewRef, n)
	for i := range vs {
		vs[i] = ViewRef{Epoch: uint64(i + 1), ID: uint64(i)}
	}
	return vs
}

// A Mastery without aborted views is encoded as a sender that knows no
// such field encodes it (three fields), and one with them adds a fourth:
// either decodes, and the first with no aborted views.
func TestMasteryAbortedIsAnOptionalLastField(t *testing.T) {
	views := []ViewRef{{Epoch: 3, ID: 9}}
	for _, m := range []*Mastery{
		{Epoch: 5, Views: views},
		{Epoch: 5, Views: views, Aborted: []ViewRef{{Epoch: 4, ID: 7}}},
	} {
		body := m.appendBody(nil)
		if want := byte(0x90 | 3 + min(len(m.Aborted), 1)); body[0] != want {
			t.Fatalf("%+v: array header %#x, want %#x", m, body[0], want)
		}
		_, got, err := decodeBodyOf(TypeMastery).decode(NewDecoder(DefaultLimits()), body)
		if err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("decoded %+v, want %+v", got, m)
		}
	}
}
