package clientport

import (
	"fmt"
	"slices"

	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// A protocol 2 session keeps a note of every frame the agent sent the
// client since the client last acknowledged what it read (ClientAck, or
// the read reply its resuming hello names): frames written into a
// connection that then died are lost with it, and a resume gives them
// again. A note holds what the frame cannot be rebuilt without, and no
// more: a grant is rebuilt from its lock's state (the client cannot act
// on a lock whose grant it has not read, so the state is the grant's),
// a refusal keeps its code and text, a description the resource it
// describes (it is asked again).

// keptKind is what a kept note stands for.
type keptKind uint8

const (
	keptWelcome  keptKind = iota + 1 // a Welcome: a reply a client reads, never waits for again
	keptGrant                        // a ClientGrant of lock, rebuilt from its state
	keptOK                           // a ClientOK
	keptAlive                        // a ClientAlive, rebuilt: the lease from now
	keptError                        // a ClientError (code, text)
	keptResource                     // a ClientResource: described again
	keptBlocking                     // the push ClientBlocking (lock, mode)
	keptLost                         // the push ClientLost (lock, code, text)
)

// kept is one frame sent. id is its request id, 0 for a push.
type kept struct {
	id   uint64
	lock uint64
	text string
	what *described // keptResource only
	kind keptKind
	code wire.ClientCode
	mode modes.Mode
}

// described is what a description is asked again with.
type described struct{ lockspace, resource string }

// keptSize approximates a note's bytes, for the MaxOutbox bound.
func (k *kept) size() int { return 56 + len(k.text) }

// noteOf makes the note of frame (h, m).
func noteOf(h wire.Header, m wire.Message) (kept, bool) {
	k := kept{id: h.ID}
	switch m := m.(type) {
	case *wire.ClientGrant:
		k.kind, k.lock = keptGrant, m.Lock
	case *wire.ClientOK:
		k.kind = keptOK
	case *wire.ClientAlive:
		k.kind = keptAlive
	case *wire.ClientError:
		if h.ID == 0 {
			return k, false // why the connection ends: not given again
		}
		k.kind, k.code, k.text = keptError, m.Code, m.Text
	case *wire.ClientResource:
		k.kind = keptResource
	case *wire.ClientWelcome:
		k.kind = keptWelcome
	case *wire.ClientBlocking:
		k.kind, k.lock, k.mode = keptBlocking, m.Lock, m.Mode
	case *wire.ClientLost:
		k.kind, k.lock, k.code, k.text = keptLost, m.Lock, m.Code, m.Text
	default:
		return k, false
	}
	return k, true
}

// keepLocked notes a frame sent (protocol 2). Caller holds ss.mu. It
// reports false when the notes outgrew MaxOutbox: a client that never
// acknowledges what it reads; the caller ends the session.
func (ss *session) keepLocked(k kept) bool {
	ss.kept = append(ss.kept, k)
	ss.keptBytes += k.size()
	return ss.keptBytes <= ss.srv.cfg.MaxOutbox
}

// ack forgets the notes up to and including the reply to request read:
// the client has read them (frames arrive in the order they are sent).
func (ss *session) ack(id uint64, m *wire.ClientAck) {
	ss.mu.Lock()
	ss.dropReadLocked(m.Read)
	ss.drainLostLocked()
	ss.mu.Unlock()
	ss.replyLazy(id, okMsg)
}

// dropReadLocked forgets the notes up to and including the reply to read,
// if it is among them. Caller holds ss.mu.
func (ss *session) dropReadLocked(read uint64) bool {
	for i := range ss.kept {
		if ss.kept[i].id != read {
			continue
		}
		for _, k := range ss.kept[:i+1] {
			ss.keptBytes -= k.size()
		}
		n := copy(ss.kept, ss.kept[i+1:])
		clear(ss.kept[n:])
		ss.kept = ss.kept[:n]
		if n == 0 && cap(ss.kept) > maxKeptIdle {
			ss.kept = nil // an idle session keeps little
		}
		return true
	}
	return false
}

// trimKept gives back the room of the notes beyond those kept: the
// session's connection is going idle, and a busy spell before left room
// for a hundred notes (6 KiB) that an idle session would keep otherwise.
func (ss *session) trimKept() {
	ss.mu.Lock()
	if cap(ss.kept) > len(ss.kept) {
		ss.kept = slices.Clip(slices.Clone(ss.kept))
		if len(ss.kept) == 0 {
			ss.kept = nil
		}
	}
	ss.mu.Unlock()
}

// maxKeptIdle is the most notes' room a session keeps while it has none:
// room for what a busy client reads between two acknowledgements (the Go
// client's 64 frames, and what is in flight), so that it reuses it, and
// little for a session that went idle.
const maxKeptIdle = 128

// replayLocked answers hello h (request id) of protocol 2 with Welcome w
// and, on a resume, gives the client what its last connection may have
// swallowed, right after the Welcome: the pushes sent after
// the reply it last read, in their order, and an answer to each request
// it waits for: the kept one (a grant rebuilt from its lock), none yet if
// the request still waits (its answer comes when it is ready), none if
// the agent never read it (the Welcome's last_request says so: the client
// sends it again), and otherwise CodeUnknownRequest. Descriptions to ask
// again go to the session's again, for describeAgain once ss.mu is released. Caller
// holds ss.mu, and the connection's batch is open.
func (ss *session) replayLocked(id uint64, w *wire.ClientWelcome, h *wire.ClientHello) {
	old := ss.kept
	ss.kept, ss.keptBytes = nil, 0
	ss.sendLocked(wire.Header{ID: id, Reply: true}, w, false)
	if !w.Resumed {
		return
	}
	start := 0
	for i := range old {
		if old[i].id == h.Read && old[i].id != 0 {
			start = i + 1
			break
		}
	}
	if len(h.Waiting) > 0 {
		ss.srv.met.replayed.Add(float64(len(h.Waiting)))
	}
	waiting := make(map[uint64]bool, len(h.Waiting))
	for _, id := range h.Waiting {
		waiting[id] = true
	}
	give := func(k *kept) {
		delete(waiting, k.id)
		if k.kind == keptResource {
			ss.x().again = append(ss.x().again, *k)
			return
		}
		ss.resendLocked(k)
	}
	skip := h.Pushes // read after that reply
	for i := range old[start:] {
		k := &old[start+i]
		if k.id == 0 && skip > 0 {
			skip--
			continue
		}
		if k.id == 0 || waiting[k.id] {
			give(k)
		}
	}
	for i := range old[:start] {
		// Read, says the client, and yet waited for: it is given again.
		if k := &old[i]; k.id != 0 && waiting[k.id] {
			give(k)
		}
	}
	for _, id := range h.Waiting {
		if !waiting[id] || ss.pending[id] != nil || id > ss.handled {
			continue
		}
		ss.srv.met.refused[refusedUnknownRequest].Inc()
		ss.sendLocked(wire.Header{ID: id, Reply: true}, &wire.ClientError{Code: wire.CodeUnknownRequest,
			Text: truncate(fmt.Sprintf("request %d: the agent has no answer of it to give again (it answered it and the client acknowledged it, or no request had that id)", id))}, false)
	}
}

// resendLocked sends a kept frame again, rebuilt from what it stood for.
// Caller holds ss.mu.
func (ss *session) resendLocked(k *kept) {
	h := wire.Header{ID: k.id, Reply: k.id != 0}
	switch k.kind {
	case keptGrant:
		if g, ok := ss.grantOfLocked(k.lock); ok {
			ss.sendLocked(h, &g, false)
			return
		}
		// Unlocked or lost since its grant, which the client never read:
		// the ClientLost, kept too, is for a lock it does not know.
		ss.sendLocked(h, &wire.ClientError{Code: wire.CodeLockLost,
			Text: truncate(fmt.Sprintf("lock %d was lost after it was granted, before the client read its grant", k.lock))}, false)
	case keptOK:
		ss.sendLocked(h, okMsg, false)
	case keptAlive:
		if lease, err := ss.lease(); err != nil {
			ss.sendLocked(h, errorMsg(err), false)
		} else {
			ss.sendLocked(h, &wire.ClientAlive{Lease: int64(lease)}, false)
		}
	case keptError:
		ss.sendLocked(h, &wire.ClientError{Code: k.code, Text: k.text}, false)
	case keptBlocking:
		ss.sendLocked(h, &wire.ClientBlocking{Lock: k.lock, Mode: k.mode}, false)
	case keptLost:
		ss.sendLocked(h, &wire.ClientLost{Lock: k.lock, Code: k.code, Text: k.text}, false)
	case keptWelcome:
		ss.srv.met.refused[refusedUnknownRequest].Inc()
		ss.sendLocked(h, &wire.ClientError{Code: wire.CodeUnknownRequest,
			Text: truncate(fmt.Sprintf("request %d was a hello: its Welcome is not given again", k.id))}, false)
	}
}

// grantOfLocked is the ClientGrant of the session's lock, hold or
// permits of that id as they stand. Caller holds ss.mu.
func (ss *session) grantOfLocked(id uint64) (wire.ClientGrant, bool) {
	if h := ss.seen().holds[id]; h != nil {
		return *holdGrant(id, h.h), true
	}
	if p := ss.seen().permits[id]; p != nil {
		return wire.ClientGrant{Lock: id, Mode: modes.NL, Token: p.Token()}, true
	}
	lk := ss.ds.Lock(id)
	if lk == nil || lk.Err() != nil {
		return wire.ClientGrant{}, false
	}
	v, ok := lk.Value()
	g := wire.ClientGrant{Lock: lk.ID(), Mode: lk.Mode(), Token: lk.Token(), Demoted: lk.Demoted(),
		LVB: v, LVBSeq: lk.ValueSeq(), LVBFlags: wire.LVBPresent}
	if ok {
		g.LVBFlags |= wire.LVBValid
	}
	return g, true
}

// describeAgain asks again for the descriptions a resume found unread.
func (ss *session) describeAgain() {
	ss.mu.Lock()
	again := ss.seen().again
	if ss.rare != nil {
		ss.rare.again = nil
	}
	ss.mu.Unlock()
	for _, k := range again {
		ls, err := ss.lockspace(k.what.lockspace)
		if err != nil {
			ss.fail(k.id, err)
			continue
		}
		ss.describeIn(k.id, ls, k.what.resource, int64(ss.ttl))
	}
}
