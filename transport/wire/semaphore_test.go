package wire

import (
	"errors"
	"testing"

	"github.com/seed-a6839e30/dlm/modes"
)

// invalidSemaphoreMessages break each rule of the semaphore and describe
// messages once.
func invalidSemaphoreMessages() []struct {
	name string
	m    Message
} {
	req := func(f func(*SemaphoreRequest)) Message {
		m := &SemaphoreRequest{Epoch: 1, Lockspace: "ls", Resource: "r", Lock: 1, Permits: 3, Count: 1}
		f(m)
		return m
	}
	report := func(f func(*ReportedPermit)) Message {
		p := ReportedPermit{Resource: "r", Lock: 1, Queue: QueueGranted, Permits: 3, Count: 1}
		f(&p)
		return &PermitReport{Epoch: 1, Lockspace: "ls", Permits: []ReportedPermit{p}}
	}
	reply := func(f func(*DescribeReply)) Message {
		m := &DescribeReply{Epoch: 1, Status: DescribeFound, Locks: sampleDescribed()}
		f(m)
		return m
	}
	return []struct {
		name string
		m    Message
	}{
		{"semaphore epoch 0", req(func(m *SemaphoreRequest) { m.Epoch = 0 })},
		{"semaphore lock 0", req(func(m *SemaphoreRequest) { m.Lock = 0 })},
		{"semaphore no resource", req(func(m *SemaphoreRequest) { m.Resource = "" })},
		{"semaphore of no permits", req(func(m *SemaphoreRequest) { m.Permits, m.Count = 0, 0 })},
		{"semaphore over MaxPermits", req(func(m *SemaphoreRequest) { m.Permits = MaxPermits + 1 })},
		{"semaphore count 0", req(func(m *SemaphoreRequest) { m.Count = 0 })},
		{"semaphore count over permits", req(func(m *SemaphoreRequest) { m.Count = 4 })},
		{"semaphore negative timeout", req(func(m *SemaphoreRequest) { m.Timeout = -1 })},
		{"semaphore negative ttl", req(func(m *SemaphoreRequest) { m.TTL = -1 })},
		{"permit report empty", &PermitReport{Epoch: 1, Lockspace: "ls"}},
		{"permit report epoch 0", &PermitReport{Lockspace: "ls", Permits: []ReportedPermit{{Resource: "r", Lock: 1, Queue: QueueGranted, Permits: 1, Count: 1}}}},
		{"permit report converting", report(func(p *ReportedPermit) { p.Queue = QueueConverting })},
		{"permit report queue 0", report(func(p *ReportedPermit) { p.Queue = 0 })},
		{"permit report lock 0", report(func(p *ReportedPermit) { p.Lock = 0 })},
		{"permit report count over permits", report(func(p *ReportedPermit) { p.Count = 9 })},
		{"permit report negative ttl", report(func(p *ReportedPermit) { p.TTL = -5 })},
		{"describe no resource", &DescribeRequest{Epoch: 1, Lockspace: "ls"}},
		{"describe epoch 0", &DescribeRequest{Lockspace: "ls", Resource: "r"}},
		{"describe reply status 0", reply(func(m *DescribeReply) { m.Status = 0 })},
		{"describe reply status 4", reply(func(m *DescribeReply) { m.Status = 4 })},
		{"describe reply locks with none", reply(func(m *DescribeReply) { m.Status = DescribeNone })},
		{"describe reply omitted with retry", &DescribeReply{Epoch: 1, Status: DescribeRetry, Omitted: 1}},
		{"describe reply out of order", reply(func(m *DescribeReply) { m.Locks[0], m.Locks[3] = m.Locks[3], m.Locks[0] })},
		{"describe reply waiting not NL", reply(func(m *DescribeReply) { m.Locks[3].Granted = modes.PR })},
		{"describe reply bad mode", reply(func(m *DescribeReply) { m.Locks[0].Requested = 9 })},
		{"describe reply converting permits", reply(func(m *DescribeReply) { m.Locks[2].Permits, m.Locks[2].Count = 2, 1 })},
		{"describe reply permits in a mode", reply(func(m *DescribeReply) { m.Locks[1].Granted = modes.EX })},
		{"describe reply negative wait", reply(func(m *DescribeReply) { m.Locks[2].Waited = -1 })},
		{"describe reply lock 0", reply(func(m *DescribeReply) { m.Locks[0].Lock = 0 })},
		{"describe reply negative ttl", reply(func(m *DescribeReply) { m.Locks[0].TTL = -1 })},
		{"describe reply no node", reply(func(m *DescribeReply) { m.Locks[1].Node = "" })},
		{"describe reply long node", reply(func(m *DescribeReply) { m.Locks[1].Node += "n" })},
	}
}

func TestSemaphoreMessagesRefuseInvalid(t *testing.T) {
	queued := mustFrame(t, Header{}, &Ping{})
	for _, c := range invalidSemaphoreMessages() {
		assertRefusedBothWays(t, c.name, c.m, DefaultLimits(), queued)
	}
}

// The hand-made seeds of the new decoders fail the way they are meant to:
// array headers declaring more than the frame holds before anything is
// sized by them, rule breaks as invalid.
func TestSemaphoreSeedsFail(t *testing.T) {
	for _, typ := range []Type{TypeSemaphoreRequest, TypePermitReport, TypeDescribeReply} {
		for name, body := range typeSeeds(typ) {
			_, m, err := NewDecoder(DefaultLimits()).Decode(rawPayload(Version, byte(typ), 0, body))
			want := ErrInvalid
			if len(name) > 4 && name[:4] == "bomb" {
				want = ErrDeclaredLength
			}
			if !errors.Is(err, want) || m != nil {
				t.Errorf("%v seed %s: (%v, %v), want %v", typ, name, m, err, want)
			}
		}
	}
}

func TestDescribeReplyAtLimit(t *testing.T) {
	l := DefaultLimits()
	l.MaxReport = 4
	locks := append(sampleDescribed(), sampleDescribed()[3])
	if _, err := AppendFrame(nil, Header{}, &DescribeReply{Epoch: 1, Status: DescribeFound, Locks: locks}, &l); !errors.Is(err, ErrInvalid) {
		t.Errorf("a reply of %d locks under MaxReport %d: %v, want ErrInvalid", len(locks), l.MaxReport, err)
	}
	if _, err := AppendFrame(nil, Header{}, &DescribeReply{Epoch: 1, Status: DescribeFound, Locks: locks[:4], Omitted: 1}, &l); err != nil {
		t.Errorf("a reply of MaxReport locks: %v", err)
	}
}
