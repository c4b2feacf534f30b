package clientport

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// session is a client's session at the agent: a dlm.Session of the node,
// the locks the client holds in it (by their node lock id, the handle the
// client names them by), its requests still waiting, and the connection
// it is reached through, if any.
type session struct {
	srv *Server
	id  uint64
	key uint64
	ttl time.Duration
	ds  *dlm.Session
	in  dlm.LockOption // dlm.InSession(ds), made once

	// proto is the client protocol the session was opened with: 0 for
	// protocol 1, or wire.ClientProtocol.
	proto uint8

	mu   sync.Mutex
	c    *conn  // nil while the client is away
	kept []kept // protocol 2: frames sent and not acknowledged (kept.go)
	// keptBytes approximates kept's size; past MaxOutbox the session ends.
	keptBytes int
	pending   map[uint64]*op // waiting requests, by request id
	rare      *sessionRare   // made on first use (see x)
	last      uint64         // highest request id read, hellos included: ids must go above it
	// handled is the highest id of a request handled, which a Welcome
	// reports: a hello is not one (its Welcome answers it), so that a
	// client whose Welcome was lost does not take the requests it sent
	// before for read.
	handled uint64
	over    bool // the session ended
	giveUp  bool // the session is ending for what it kept (too much to send or keep)
}

// sessionRare is what a session needs only for some requests or while
// its client is away: apart, so that the many idle sessions an agent
// serves stay small (about 150 bytes of session each).
type sessionRare struct {
	outbox  []byte                  // protocol 1: frames for the client while it is away
	again   []kept                  // protocol 2: descriptions a resume asks again
	lost    []kept                  // protocol 2: lost-lock pushes waiting for room in the notes (pushLost)
	lostIDs map[uint64]struct{}     // the ids of lost's locks, for lostUntold
	holds   map[uint64]*hold        // holds on the agent's shared-lock cache (ClientCached); its locks are ds's
	permits map[uint64]*dlm.Permit  // permits of semaphores (ClientAcquire), by id; their locks are ds's
	owners  map[ownerKey]*dlm.Owner // the owners the client named
}

// x returns the session's sessionRare, made if it has none, to write to.
// Caller holds ss.mu.
func (ss *session) x() *sessionRare {
	if ss.rare == nil {
		ss.rare = &sessionRare{}
	}
	return ss.rare
}

// seen returns the session's sessionRare to read, without making one.
// Caller holds ss.mu.
func (ss *session) seen() sessionRare {
	if ss.rare == nil {
		return sessionRare{}
	}
	return *ss.rare
}

type ownerKey struct {
	lockspace string
	id        uint64
}

// op is a request that waits: a lock, a conversion, permits, a
// description or a renewal.
type op struct {
	cancel    func() // withdraws it (ClientCancel, the session's end)
	stop      func() // ends its context once answered (a renewal's), or nil
	cancelled bool   // ClientCancel came for it
}

// errSessionGone: a ClientHello resumes a session this agent does not have
// (expired, or never was), or with the wrong key.
var errSessionGone = errors.New("no such session to resume")

// errNoSession: the agent cannot open sessions (its node is closing).
var errNoSession = errors.New("the agent opens no session")

// openSession resumes the session a ClientHello names, or starts one.
func (s *Server) openSession(h *wire.ClientHello) (*session, bool, error) {
	if h.Session != 0 {
		if ss := s.session(h.Session); ss != nil && ss.ds.Err() == nil {
			var a, b [8]byte
			binary.BigEndian.PutUint64(a[:], ss.key)
			binary.BigEndian.PutUint64(b[:], h.Key)
			if subtle.ConstantTimeCompare(a[:], b[:]) == 1 {
				s.met.resumed.Inc()
				return ss, true, nil
			}
			return nil, false, fmt.Errorf("%w: wrong key for session %x", errSessionGone, h.Session)
		}
		// Expired or unknown: a new session; the Welcome says it is not
		// the old one, and the client then knows its locks are gone.
	}
	ttl := time.Duration(h.TTL)
	switch {
	case ttl == 0:
		ttl = s.cfg.DefaultTTL
	case ttl < s.cfg.MinTTL:
		ttl = s.cfg.MinTTL
	case ttl > s.cfg.MaxTTL:
		ttl = s.cfg.MaxTTL
	}
	ss := &session{srv: s, id: random64(), key: random64(), ttl: ttl, proto: h.Version}
	ds, err := s.node.NewSession(ttl, dlm.OnLockLost(ss.lockLost), dlm.OnSessionEnd(ss.ended))
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", errNoSession, err)
	}
	ss.ds, ss.in = ds, dlm.InSession(ds)
	s.addSession(ss)
	return ss, false, nil
}

func random64() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return binary.BigEndian.Uint64(b[:]) | 1
}

// errProtocolMismatch: a ClientHello resumes a session with another
// protocol than the one that opened it.
var errProtocolMismatch = errors.New("resume in another client protocol")

// attach makes c the session's connection and answers the ClientHello h
// (request id) with the Welcome, followed by whatever the client may have
// missed: in protocol 2 what its hello asks for (replayLocked), in
// protocol 1 whatever was queued while the client was away.
func (ss *session) attach(c *conn, id uint64, h *wire.ClientHello, resumed bool) error {
	if resumed && h.Version != ss.proto {
		ss.srv.met.refused[refusedProtocol].Inc()
		return fmt.Errorf("%w: session %x speaks protocol %d, the hello %d", errProtocolMismatch, ss.id, max(ss.proto, 1), max(h.Version, 1))
	}
	lease, err := ss.lease()
	if err != nil {
		return err // ending, or the agent has no quorum: nothing to trust
	}
	ss.mu.Lock()
	old := ss.c
	ss.c = c
	c.s = ss
	w := &wire.ClientWelcome{
		Session: ss.id, Key: ss.key, TTL: int64(ss.ttl), Lease: int64(lease),
		Node: ss.srv.node.Name(), Resumed: resumed, LastRequest: ss.handled,
		MaxLocks: uint32(ss.srv.cfg.MaxLocks), MaxPending: uint32(ss.srv.cfg.MaxPending), MaxFrame: uint32(ss.srv.cfg.MaxFrame),
	}
	ss.last = max(ss.last, id)
	c.w.beginBatch()
	if ss.proto == 0 {
		c.w.queue(wire.Header{ID: id, Reply: true}, w, false)
		if out := ss.seen().outbox; len(out) > 0 {
			c.w.queueRaw(out)
			ss.x().outbox = nil
		}
	} else {
		ss.replayLocked(id, w, h)
		ss.drainLostLocked()
	}
	ss.mu.Unlock()
	c.w.endBatch()
	if old != nil {
		old.close() // a client that came back before its old connection was seen to die
	}
	ss.describeAgain()
	return nil
}

// detach leaves the session waiting for a resume, if c is still its
// connection.
func (ss *session) detach(c *conn) {
	ss.mu.Lock()
	if ss.c == c {
		ss.c = nil
	}
	ss.mu.Unlock()
}

// send queues a frame for the client: on its connection, or (protocol 1)
// in the outbox while it is away; a protocol 2 session keeps a note of it
// too (kept.go). block says the caller may write it itself.
func (ss *session) send(h wire.Header, m wire.Message, block bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.sendNotedLocked(h, m, block, nil)
}

// sendLocked is send for a caller that holds ss.mu.
func (ss *session) sendLocked(h wire.Header, m wire.Message, block bool) {
	ss.sendNotedLocked(h, m, block, nil)
}

// replyLazy answers id with m, an answer no client waits for (a
// successful unlock's): it may wait to leave with the next frame
// (writer.queueLazy).
func (ss *session) replyLazy(id uint64, m wire.Message) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.deliverLocked(wire.Header{ID: id, Reply: true}, m, false, true, nil)
}

// sendNotedLocked is sendLocked, with what a description's note needs.
func (ss *session) sendNotedLocked(h wire.Header, m wire.Message, block bool, what *described) {
	ss.deliverLocked(h, m, block, false, what)
}

// deliverLocked is sendNotedLocked; lazy queues the frame with
// writer.queueLazy.
func (ss *session) deliverLocked(h wire.Header, m wire.Message, block, lazy bool, what *described) {
	if ss.proto != 0 && !ss.over && !ss.giveUp {
		if k, ok := noteOf(h, m); ok {
			k.what = what
			if !ss.keepLocked(k) {
				// A client that does not acknowledge what it reads, or is
				// away too long with too much happening: give it up.
				ss.kept, ss.keptBytes, ss.giveUp = nil, 0, true
				ss.srv.met.refused[refusedUnacknowledged].Inc()
				ss.srv.log.Warn("client session ended: the agent keeps too much it sent the client and the client did not acknowledge",
					"session", fmt.Sprintf("%x", ss.id), "limit", ss.srv.cfg.MaxOutbox)
				go ss.end()
			}
		}
	}
	if ss.c != nil {
		if lazy {
			ss.c.w.queueLazy(h, m)
		} else {
			ss.c.w.queue(h, m, block)
		}
		return
	}
	if ss.over || ss.proto != 0 {
		return // protocol 2: given again when the client resumes
	}
	b, err := wire.AppendFrame(ss.x().outbox, h, m, &ss.srv.limits)
	if err != nil {
		return
	}
	ss.x().outbox = b
	if len(ss.x().outbox) > ss.srv.cfg.MaxOutbox {
		// Away too long with too much happening: give it up.
		ss.x().outbox = nil
		ss.srv.met.refused[refusedSlowClient].Inc()
		go ss.end()
	}
}

// reply answers request id.
func (ss *session) reply(id uint64, m wire.Message, block bool) {
	ss.send(wire.Header{ID: id, Reply: true}, m, block)
}

// lease is how long the client may trust its locks from now: until the
// session's lease ends at its masters' side, or the node's quorum lease
// does, whichever comes first.
func (ss *session) lease() (time.Duration, error) {
	end := ss.ds.LeaseEnds()
	if end.IsZero() {
		if err := ss.ds.Err(); err != nil {
			return 0, err
		}
		return 0, dlm.ErrSessionEnded
	}
	q, held := ss.srv.node.QuorumLease()
	if !held {
		return 0, fmt.Errorf("%w: the agent holds no quorum lease", dlm.ErrNoQuorum)
	}
	if !q.IsZero() && q.Before(end) {
		end = q
	}
	d := time.Until(end)
	if d <= 0 {
		return 0, fmt.Errorf("%w: the agent's lease is ending", dlm.ErrNoQuorum)
	}
	return d, nil
}

// lockLost runs on the node's callback goroutine for every lock of the
// session that is lost: the client is told, and the lock forgotten (its
// Unlock ends it in the node's books, telling its master if it still
// has it).
func (ss *session) lockLost(lk *dlm.Lock, why error) {
	ss.forgetPermit(lk.ID())
	_ = lk.Unlock()
	ss.pushLost(lk.ID(), why)
}

// pushLost tells the client that its lock id is lost. A protocol 2
// session sends these pushes only while its notes (kept.go) take less
// than half of MaxOutbox, and queues the rest until the client
// acknowledges what it read (ack), or comes back if it is away: a session
// that loses its hundred thousand locks at once then neither outgrows its
// notes nor floods its connection, and ends only if its client stops
// acknowledging.
func (ss *session) pushLost(id uint64, why error) {
	m := &wire.ClientLost{Lock: id, Code: codeOf(why), Text: truncate(why.Error())}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.proto != 0 && !ss.over && !ss.giveUp && (ss.c == nil || !ss.roomLocked() || len(ss.seen().lost) > 0) {
		r := ss.x()
		r.lost = append(r.lost, kept{lock: id, kind: keptLost, code: m.Code, text: m.Text})
		if r.lostIDs == nil {
			r.lostIDs = map[uint64]struct{}{}
		}
		r.lostIDs[id] = struct{}{}
		return
	}
	ss.sendLocked(wire.Header{}, m, false)
}

// roomLocked reports whether the notes leave room for more pushes: half of
// MaxOutbox, the other half for the answers to requests while the client's
// acknowledgement is on its way. Caller holds ss.mu.
func (ss *session) roomLocked() bool { return ss.keptBytes < ss.srv.cfg.MaxOutbox/2 }

// lostUntold reports whether lock id is lost and the client not yet told
// (pushLost): a request naming it is refused as for a lost lock, not as
// for one the session never held.
func (ss *session) lostUntold(id uint64) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	_, ok := ss.seen().lostIDs[id]
	return ok
}

// drainLostLocked sends the lost-lock pushes that waited (pushLost), as
// many as there is room for. Caller holds ss.mu.
func (ss *session) drainLostLocked() {
	r := ss.rare
	if r == nil || len(r.lost) == 0 {
		return
	}
	n := 0
	for n < len(r.lost) && ss.c != nil && !ss.over && !ss.giveUp && ss.roomLocked() {
		ss.resendLocked(&r.lost[n])
		delete(r.lostIDs, r.lost[n].lock)
		n++
	}
	if n == len(r.lost) || ss.over || ss.giveUp {
		r.lost, r.lostIDs = nil, nil
		return
	}
	clear(r.lost[:n])
	r.lost = r.lost[n:]
}

// ended runs once the session's dlm session ended (expired, or closed).
func (ss *session) ended(why error) {
	ss.mu.Lock()
	ss.over = true
	c := ss.c
	holds := ss.seen().holds
	ss.kept, ss.keptBytes = nil, 0
	if r := ss.rare; r != nil {
		r.outbox, r.again, r.holds, r.lost, r.lostIDs = nil, nil, nil, nil, nil
	}
	ss.mu.Unlock()
	for _, h := range holds {
		h.release()
	}
	ss.srv.removeSession(ss)
	if c != nil {
		c.w.queue(wire.Header{}, &wire.ClientError{Code: wire.CodeSessionEnded, Text: truncate(why.Error())}, false)
		c.w.finish()
	}
}

// end ends the session now: its locks released, its waiting requests
// failed.
func (ss *session) end() {
	ss.mu.Lock()
	pending := make([]*op, 0, len(ss.pending))
	for _, o := range ss.pending {
		pending = append(pending, o)
	}
	ss.mu.Unlock()
	_ = ss.ds.Close()
	for _, o := range pending {
		if o.cancel != nil {
			o.cancel()
		}
	}
	ss.mu.Lock()
	holds := ss.seen().holds
	if ss.rare != nil {
		ss.rare.holds = nil
	}
	ss.mu.Unlock()
	for _, h := range holds {
		h.release()
	}
}
