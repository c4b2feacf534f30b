package master

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/seed-a6839e30/dlm/modes"
	"pgregory.net/rapid"
)

// semModel is the reference a semaphore is checked against: a deliberately
// plain list of holders and a FIFO list of waiters, granting from the head
// while its permits are free.
type semModel struct {
	permits uint32
	holders map[LockID]uint32
	waiting []semWaiter
}

type semWaiter struct {
	id    LockID
	count uint32
}

func (s *semModel) used() uint32 {
	var n uint32
	for _, c := range s.holders {
		n += c
	}
	return n
}

// settle grants from the head of the queue while it fits, and returns
// what it granted, in order.
func (s *semModel) settle() []LockID {
	var out []LockID
	for len(s.waiting) > 0 && s.waiting[0].count <= s.permits-s.used() {
		w := s.waiting[0]
		s.waiting = s.waiting[1:]
		s.holders[w.id] = w.count
		out = append(out, w.id)
	}
	return out
}

func (s *semModel) remove(id LockID) {
	delete(s.holders, id)
	s.waiting = slices.DeleteFunc(s.waiting, func(w semWaiter) bool { return w.id == id })
}

// semMachine drives a Table's semaphores with random requests from several
// nodes, tries, releases, cancels, timeouts, purges and remasters, and
// compares it with semModel after every step: the same holders with the
// same permits, the same waiters in the same order, the same grants
// reported, never more permits granted than there are, and every grant's
// token above every token issued before.
type semMachine struct {
	t        *Table
	models   map[string]*semModel
	nextID   map[NodeID]uint64
	deadline map[LockID]Tick // queued requests with a timeout
	maxToken uint64
}

var semNames = []string{"s", "t"}

func newSemMachine(rt *rapid.T) *semMachine {
	cfg := DefaultConfig()
	cfg.MaxWaitersPerResource = 8
	m := &semMachine{t: New(cfg), models: map[string]*semModel{}, nextID: map[NodeID]uint64{}, deadline: map[LockID]Tick{}}
	for _, name := range semNames {
		m.models[name] = &semModel{permits: uint32(rapid.IntRange(1, 6).Draw(rt, "permits-"+name)), holders: map[LockID]uint32{}}
	}
	return m
}

func (m *semMachine) model(id LockID) (*semModel, string) {
	for _, name := range semNames {
		s := m.models[name]
		if _, ok := s.holders[id]; ok || slices.ContainsFunc(s.waiting, func(w semWaiter) bool { return w.id == id }) {
			return s, name
		}
	}
	return nil, ""
}

func (m *semMachine) Request(rt *rapid.T) {
	name := rapid.SampledFrom(semNames).Draw(rt, "sem")
	s := m.models[name]
	node := rapid.SampledFrom(propNodes).Draw(rt, "node")
	m.nextID[node]++
	req := Request{
		Resource: name, Lock: LockID{Node: node, ID: m.nextID[node]}, Mode: modes.NL,
		Permits: s.permits, Count: uint32(rapid.IntRange(1, int(s.permits)).Draw(rt, "count")),
		Timeout: Tick(rapid.SampledFrom([]int{0, 0, 3}).Draw(rt, "timeout")),
	}
	if rapid.IntRange(0, 4).Draw(rt, "try") == 0 {
		req.Flags = NoQueue
	}
	for _, dl := range m.deadline {
		if dl == m.t.Now()+req.Timeout {
			req.Timeout = 0 // deadlines stay unique: see Tick
		}
	}
	res, err := m.t.Request(req)
	fits := len(s.waiting) == 0 && req.Count <= s.permits-s.used()
	switch {
	case fits:
		if err != nil || res.Status != Granted {
			rt.Fatalf("request %+v with %d of %d free and no waiter: %v %v", req, s.permits-s.used(), s.permits, res, err)
		}
		s.holders[req.Lock] = req.Count
		m.checkToken(rt, res.Token)
	case req.Flags&NoQueue != 0:
		if !errors.Is(err, ErrNotQueued) {
			rt.Fatalf("try %+v that cannot be granted: %v %v, want ErrNotQueued", req, res, err)
		}
	case len(s.waiting) >= m.t.Config().MaxWaitersPerResource:
		if !errors.Is(err, ErrLimit) {
			rt.Fatalf("request %+v past the waiter limit: %v %v", req, res, err)
		}
	default:
		if err != nil || res.Status != Queued {
			rt.Fatalf("request %+v that must wait: %v %v", req, res, err)
		}
		s.waiting = append(s.waiting, semWaiter{req.Lock, req.Count})
		if req.Timeout > 0 {
			m.deadline[req.Lock] = m.t.Now() + req.Timeout
		}
	}
	m.compareEffects(rt, nil, nil)
}

// pick draws a lock of the model, granted or waiting as asked.
func (m *semMachine) pick(rt *rapid.T, granted, waiting bool) (LockID, bool) {
	var ids []LockID
	for _, name := range semNames {
		s := m.models[name]
		if granted {
			for id := range s.holders {
				ids = append(ids, id)
			}
		}
		if waiting {
			for _, w := range s.waiting {
				ids = append(ids, w.id)
			}
		}
	}
	if len(ids) == 0 {
		return LockID{}, false
	}
	slices.SortFunc(ids, func(a, b LockID) int { return cmpUint(uint64(a.Node)<<32|a.ID, uint64(b.Node)<<32|b.ID) })
	return rapid.SampledFrom(ids).Draw(rt, "lock"), true
}

func (m *semMachine) Release(rt *rapid.T) {
	id, ok := m.pick(rt, true, true)
	if !ok {
		rt.Skip("no lock")
	}
	s, _ := m.model(id)
	_, held := s.holders[id]
	if err := m.t.Release(Release{Lock: id}); err != nil {
		rt.Fatalf("release %v: %v", id, err)
	}
	s.remove(id)
	delete(m.deadline, id)
	var failed []LockID
	if !held {
		failed = []LockID{id}
	}
	m.compareEffects(rt, m.settle(s), failed)
}

func (m *semMachine) Cancel(rt *rapid.T) {
	id, ok := m.pick(rt, false, true)
	if !ok {
		rt.Skip("nothing waits")
	}
	s, _ := m.model(id)
	if err := m.t.Cancel(id, 0); err != nil {
		rt.Fatalf("cancel %v: %v", id, err)
	}
	s.remove(id)
	delete(m.deadline, id)
	m.compareEffects(rt, m.settle(s), []LockID{id})
}

func (m *semMachine) Tick(rt *rapid.T) {
	now := m.t.Now() + Tick(rapid.IntRange(1, 4).Draw(rt, "dt"))
	m.t.Tick(now)
	// Deadlines are unique (Request sees to it), so the table fails the
	// expired requests in deadline order, and each failure may let the
	// requests behind it in.
	var failed, granted []LockID
	for {
		var next LockID
		var at Tick
		for id, dl := range m.deadline {
			if dl <= now && (at == 0 || dl < at) {
				next, at = id, dl
			}
		}
		if at == 0 {
			break
		}
		s, _ := m.model(next)
		s.remove(next)
		delete(m.deadline, next)
		failed = append(failed, next)
		granted = append(granted, m.settle(s)...)
	}
	m.compareEffects(rt, granted, failed)
}

func (m *semMachine) Purge(rt *rapid.T) {
	node := rapid.SampledFrom(propNodes).Draw(rt, "node")
	m.t.PurgeNode(node)
	var granted []LockID
	for _, name := range semNames {
		s := m.models[name]
		for id := range s.holders {
			if id.Node == node {
				s.remove(id)
			}
		}
		for _, w := range slices.Clone(s.waiting) {
			if w.id.Node == node {
				s.remove(w.id)
				delete(m.deadline, w.id)
			}
		}
		granted = append(granted, m.settle(s)...)
	}
	m.nextID[node] += 1000
	m.compareEffects(rt, granted, nil)
}

// Remaster rebuilds every semaphore in a new table from its locks' states,
// in the old queue order, as recovery does.
func (m *semMachine) Remaster(rt *rapid.T) {
	old := m.t
	nt := New(old.Config())
	nt.Tick(old.Now())
	nt.RaiseTokenFloor(old.LastToken())
	for _, name := range semNames {
		rs, ok := old.Resource(name)
		if !ok {
			continue
		}
		for _, ls := range rs.Locks {
			if ls.Permits != m.models[name].permits {
				rt.Fatalf("%v reports %d permits, the semaphore has %d", ls, ls.Permits, m.models[name].permits)
			}
			if err := nt.Restore(ls); err != nil {
				rt.Fatalf("restore %v: %v", ls, err)
			}
		}
	}
	nt.FinishRecovery()
	m.t = nt
	clear(m.deadline) // a restored request's timeout is its requester's to enforce
	m.compareEffects(rt, nil, nil)
}

// settle is semModel.settle, and a granted request's timeout no longer
// applies.
func (m *semMachine) settle(s *semModel) []LockID {
	granted := s.settle()
	for _, id := range granted {
		delete(m.deadline, id)
	}
	return granted
}

func (m *semMachine) checkToken(rt *rapid.T, tok uint64) {
	if tok <= m.maxToken {
		rt.Fatalf("token %d not above %d, issued before", tok, m.maxToken)
	}
	m.maxToken = tok
}

// compareEffects checks that the table reported exactly the grants (in
// order, with new tokens) and failures the model expects.
func (m *semMachine) compareEffects(rt *rapid.T, granted, failed []LockID) {
	var gotGranted, gotFailed []LockID
	for _, e := range m.t.Effects() {
		switch e.Kind {
		case EffectGranted:
			gotGranted = append(gotGranted, e.Lock)
			m.checkToken(rt, e.Token)
		case EffectFailed:
			gotFailed = append(gotFailed, e.Lock)
		default:
			rt.Fatalf("unexpected effect %v", e)
		}
	}
	slices.SortFunc(failed, cmpLockID)
	slices.SortFunc(gotFailed, cmpLockID)
	if fmt.Sprint(granted) != fmt.Sprint(gotGranted) || fmt.Sprint(failed) != fmt.Sprint(gotFailed) {
		rt.Fatalf("effects: granted %v failed %v, model says granted %v failed %v\n%s", gotGranted, gotFailed, granted, failed, m.t.Dump())
	}
}

func cmpLockID(a, b LockID) int {
	if a.Node != b.Node {
		return cmpUint(uint64(a.Node), uint64(b.Node))
	}
	return cmpUint(a.ID, b.ID)
}

// Check compares the table with the model.
func (m *semMachine) Check(rt *rapid.T) {
	for _, name := range semNames {
		s := m.models[name]
		rs, ok := m.t.Resource(name)
		if !ok {
			if len(s.holders)+len(s.waiting) > 0 {
				rt.Fatalf("%q is gone; the model has %v waiting %v", name, s.holders, s.waiting)
			}
			continue
		}
		holders := map[LockID]uint32{}
		var waiting []semWaiter
		var used uint32
		for _, ls := range rs.Locks {
			switch ls.Queue {
			case QueueGranted:
				holders[ls.Lock] = ls.Count
				used += ls.Count
			case QueueWaiting:
				waiting = append(waiting, semWaiter{ls.Lock, ls.Count})
			default:
				rt.Fatalf("%v on a semaphore", ls)
			}
		}
		if used > s.permits {
			rt.Fatalf("%q: %d permits granted of %d", name, used, s.permits)
		}
		if len(waiting) > 0 && waiting[0].count <= s.permits-used {
			rt.Fatalf("%q: the head %v waits with %d permits free (a lost wake-up)", name, waiting[0], s.permits-used)
		}
		if fmt.Sprint(holders) != fmt.Sprint(s.holders) || fmt.Sprint(waiting) != fmt.Sprint(s.waiting) {
			rt.Fatalf("%q: table holders %v waiting %v; model holders %v waiting %v", name, holders, waiting, s.holders, s.waiting)
		}
	}
}

func TestSemaphoreProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newSemMachine(rt)
		rt.Repeat(rapid.StateMachineActions(m))
	})
}

// TestSemaphoreBadInputLeavesTableAlone: every refused semaphore request
// and restore leaves the table exactly as it was.
func TestSemaphoreBadInputLeavesTableAlone(t *testing.T) {
	tbl := New(DefaultConfig())
	if _, err := tbl.Request(Request{Resource: "s", Lock: LockID{1, 1}, Permits: 3, Count: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Request(Request{Resource: "r", Lock: LockID{1, 2}, Mode: modes.EX}); err != nil {
		t.Fatal(err)
	}
	before, tok := tbl.Dump(), tbl.LastToken()
	for _, c := range []struct {
		req  Request
		want error
	}{
		{Request{Resource: "s", Lock: LockID{2, 1}, Permits: 4, Count: 1}, ErrPermitsMismatch},
		{Request{Resource: "s", Lock: LockID{2, 1}, Mode: modes.PR}, ErrKind},
		{Request{Resource: "r", Lock: LockID{2, 1}, Permits: 3, Count: 1}, ErrKind},
		{Request{Resource: "s", Lock: LockID{2, 1}, Permits: 3, Count: 0}, ErrInvalidPermits},
		{Request{Resource: "s", Lock: LockID{2, 1}, Count: 1}, ErrInvalidPermits},
		{Request{Resource: "s", Lock: LockID{2, 1}, Permits: 3, Count: 4}, ErrInvalidPermits},
		{Request{Resource: "u", Lock: LockID{2, 1}, Permits: MaxPermits + 1, Count: 1}, ErrInvalidPermits},
		{Request{Resource: "s", Lock: LockID{2, 1}, Permits: 3, Count: 1, Mode: modes.EX}, ErrInvalidFlags},
		{Request{Resource: "s", Lock: LockID{2, 1}, Permits: 3, Count: 1, Flags: QueueConvert}, ErrInvalidFlags},
		{Request{Resource: "s", Lock: LockID{1, 1}, Permits: 3, Count: 1}, ErrLockExists},
		{Request{Resource: "s", Lock: LockID{2, 1}, Permits: 3, Count: 2, Flags: NoQueue}, ErrNotQueued},
		{Request{Resource: "", Lock: LockID{2, 1}, Permits: 3, Count: 1}, ErrEmptyName},
	} {
		if _, err := tbl.Request(c.req); !errors.Is(err, c.want) {
			t.Errorf("Request(%+v) = %v, want %v", c.req, err, c.want)
		}
	}
	for _, c := range []struct {
		ls   LockState
		want error
	}{
		{LockState{Resource: "s", Lock: LockID{2, 1}, Queue: QueueGranted, Permits: 4, Count: 1}, ErrPermitsMismatch},
		{LockState{Resource: "s", Lock: LockID{2, 1}, Queue: QueueGranted, Permits: 3, Count: 2}, ErrIncompatible},
		{LockState{Resource: "s", Lock: LockID{2, 1}, Queue: QueueConverting, Permits: 3, Count: 1}, ErrInvalidFlags},
		{LockState{Resource: "s", Lock: LockID{2, 1}, Queue: QueueGranted, Granted: modes.EX, Requested: modes.EX}, ErrKind},
		{LockState{Resource: "r", Lock: LockID{2, 1}, Queue: QueueGranted, Permits: 3, Count: 1}, ErrKind},
	} {
		if err := tbl.Restore(c.ls); !errors.Is(err, c.want) {
			t.Errorf("Restore(%+v) = %v, want %v", c.ls, err, c.want)
		}
	}
	if _, err := tbl.Convert(Convert{Lock: LockID{1, 1}, Mode: modes.EX}); !errors.Is(err, ErrKind) {
		t.Errorf("Convert of a semaphore lock = %v, want ErrKind", err)
	}
	tbl.FinishRecovery()
	if after := tbl.Dump(); after != before || tbl.LastToken() != tok || tbl.PendingEffects() != 0 {
		t.Errorf("bad input changed the table:\n%s\nto\n%s", before, after)
	}
}
