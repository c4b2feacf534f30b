package client

import (
	"slices"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// call is one request: sent, and kept until the agent answers it, across
// reconnections of the same session. Its fields after id are guarded by
// Client.mu.
type call struct {
	id  uint64
	msg wire.Message // the request, to send again after a resume
	// ch wakes a caller that waits while another goroutine reads its
	// answer; made only then (a caller that reads its own answer needs
	// none).
	ch chan struct{}
	// sleeper is the connection whose asleep count counts the caller,
	// asleep until the answer comes (Client.sleep).
	sleeper *conn

	sent      bool
	sentAt    time.Time // when it was last sent, if it carries a timeout
	done      bool
	oneway    bool  // nobody waits for the answer (unlock, cancel)
	abandoned bool  // the caller gave up: a grant that comes is given back
	lock      *Lock // a ClientLock's lock, handed to the client with its grant

	// outcome
	err   error
	grant wire.ClientGrant // LVB copied
	lease int64
	res   *wire.ClientResource
}

func newCall(id uint64, m wire.Message) *call {
	return &call{id: id, msg: m}
}

// deliver records the agent's answer m (valid only during the call).
// Caller holds Client.mu.
func (cl *call) deliver(m wire.Message) {
	switch m := m.(type) {
	case *wire.ClientError:
		cl.err = agentError(m.Code, m.Text)
	case *wire.ClientGrant:
		cl.grant = *m
		cl.grant.LVB = slices.Clone(m.LVB)
	case *wire.ClientAlive:
		cl.lease = m.Lease
	case *wire.ClientResource:
		r := *m
		r.LVB = slices.Clone(m.LVB)
		r.Locks = slices.Clone(m.Locks)
		cl.res = &r
	case *wire.ClientOK, *wire.ClientWelcome:
	default:
		cl.err = agentError(wire.CodeProtocol, "unexpected answer "+m.Type().String())
	}
	cl.finish()
}

// finish marks the call answered and wakes its caller. Caller holds
// Client.mu.
func (cl *call) finish() {
	cl.done = true
	cl.unsleepLocked()
	if cl.ch != nil {
		select {
		case cl.ch <- struct{}{}:
		default:
		}
	}
}

// unsleepLocked takes the caller out of its connection's asleep count.
// Caller holds Client.mu.
func (cl *call) unsleepLocked() {
	if cl.sleeper != nil {
		cl.sleeper.asleep.Add(-1)
		cl.sleeper = nil
	}
}

// agentTimeout is how long after reading m the agent times it out by
// itself (wire's Timeout), 0 for a request it does not time out.
func agentTimeout(m wire.Message) time.Duration {
	switch m := m.(type) {
	case *wire.ClientLock:
		return time.Duration(m.Timeout)
	case *wire.ClientConvert:
		return time.Duration(m.Timeout)
	case *wire.ClientAcquire:
		return time.Duration(m.Timeout)
	case *wire.ClientDescribe:
		return time.Duration(m.Timeout)
	}
	return 0
}
