package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Client is a connection to the cluster through one agent at a time, and
// the session it carries. Safe for concurrent use.
type Client struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	cn      *conn         // nil while reconnecting
	up      chan struct{} // closed when cn is set again
	addr    int           // index in cfg.Addrs of the agent
	session uint64
	key     uint64
	node    string
	ttl     time.Duration
	lease   time.Duration // the latest lease an agent gave
	nextID  uint64
	// lastReply is the id of the last reply read in the session, the
	// Welcome's included: a resume names it (ClientHello.Read) for the
	// agent to give again the pushes sent after it. owed counts the
	// frames read since the client last said so (ClientAck), and acked
	// is the reply that ClientAck named.
	lastReply uint64
	pushes    uint64 // pushes read after lastReply
	owed      int
	acked     uint64
	ackDue    bool          // a ClientAck goes with the next request (transmit), or alone (acker)
	ackKick   chan struct{} // wakes the acker
	pending   map[uint64]*call
	locks     map[uint64]*Lock
	orphans   []uint64 // locks lost here that the agent may still hold
	// orphanedAt is when the latest orphan was lost; giveBackT gives the
	// orphans back LostGrace after it (orphanLocked).
	orphanedAt time.Time
	giveBackT  *time.Timer
	trust      time.Time
	trustT     *time.Timer
	nextOwner  uint64
	closed     bool

	callbacks *dispatcher
	stop      chan struct{}
	wg        sync.WaitGroup
}

// Dial connects to the first of addrs that answers, with DefaultConfig.
func Dial(ctx context.Context, addrs ...string) (*Client, error) {
	cfg := DefaultConfig()
	cfg.Addrs = addrs
	return DialConfig(ctx, cfg)
}

// DialConfig connects to the first of cfg.Addrs that answers and opens a
// session there, trying them in turn until ctx ends.
func DialConfig(ctx context.Context, cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{
		cfg: cfg, pending: map[uint64]*call{}, locks: map[uint64]*Lock{},
		up: make(chan struct{}), callbacks: newDispatcher(), stop: make(chan struct{}),
		ackKick: make(chan struct{}, 1),
	}
	c.log = cfg.Logger
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	for {
		for i := range cfg.Addrs {
			err := c.connect(ctx, i, false)
			if err == nil {
				c.wg.Add(3)
				go func() { defer c.wg.Done(); c.callbacks.run(c.stop) }()
				go func() { defer c.wg.Done(); c.keepAlive() }()
				go func() { defer c.wg.Done(); c.acker() }()
				return c, nil
			}
			errs = append(errs, fmt.Errorf("%s: %w", cfg.Addrs[i], err))
			if errors.Is(err, ErrUnauthorized) {
				return nil, errors.Join(errs...)
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("client: no agent answered: %w", errors.Join(append(errs, ctx.Err())...))
		case <-time.After(50 * time.Millisecond):
		}
		errs = errs[:0]
	}
}

// connect dials agent i and sends the ClientHello: resuming the session if
// resume, opening one otherwise. On success the connection is the
// client's.
func (c *Client) connect(ctx context.Context, i int, resume bool) error {
	addr := c.cfg.Addrs[i]
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	if c.cfg.TLS != nil {
		tc := tls.Client(nc, c.cfg.TLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			return fmt.Errorf("%w: TLS: %w", ErrUnauthorized, err)
		}
		nc = tc
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	cn := newConn(c, nc, addr)
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	hello := &wire.ClientHello{Name: c.cfg.Name, Token: c.cfg.Token, TTL: int64(c.cfg.SessionTTL), Version: wire.ClientProtocol}
	if resume && c.session != 0 {
		hello.Session, hello.Key = c.session, c.key
		hello.Read, hello.Pushes, hello.Waiting = c.lastReply, c.pushes, c.waitingLocked()
	}
	c.mu.Unlock()
	sent := time.Now()
	cn.lastID = id // nobody else has cn yet
	if err := cn.send(wire.Header{ID: id}, hello); err != nil {
		_ = nc.Close()
		return err
	}
	h, m, n, err := cn.readFrame()
	if err != nil {
		_ = nc.Close()
		if c.cfg.TLS != nil && tlsAlert(err) {
			// With TLS 1.3 the agent judges the client's certificate
			// after the client's side of the handshake is done: its
			// refusal is the alert that arrives instead of a welcome.
			return fmt.Errorf("%w: TLS: %w", ErrUnauthorized, err)
		}
		return err
	}
	var w wire.ClientWelcome
	switch m := m.(type) {
	case *wire.ClientWelcome:
		if !h.Reply || h.ID != id {
			err = fmt.Errorf("%w: welcome for request %d, sent %d", ErrProtocol, h.ID, id)
		}
		w = *m
		w.Node = m.Node
	case *wire.ClientError:
		err = agentError(m.Code, m.Text)
	default:
		err = fmt.Errorf("%w: the agent answered the hello with %v", ErrProtocol, m.Type())
	}
	_, _ = cn.br.Discard(n)
	if err != nil {
		_ = nc.Close()
		return err
	}
	_ = nc.SetDeadline(time.Time{})
	c.attach(cn, i, id, &w, sent)
	return nil
}

// waitingLocked lists the requests a resume names as waited for: those
// sent and not answered, oldest first, at most wire.MaxResumeWaiting (more
// than an agent lets wait; past it, requests nobody waits for are
// forgotten and the others fail). Caller holds c.mu.
func (c *Client) waitingLocked() []uint64 {
	var waited, oneway []uint64
	for id, cl := range c.pending {
		switch {
		case !cl.sent || cl.done:
		case cl.oneway:
			oneway = append(oneway, id)
		default:
			waited = append(waited, id)
		}
	}
	slices.Sort(waited)
	slices.Sort(oneway)
	if n := wire.MaxResumeWaiting; len(waited)+len(oneway) > n {
		for _, id := range waited[min(n, len(waited)):] {
			cl := c.pending[id]
			delete(c.pending, id)
			cl.err = fmt.Errorf("%w: more requests waited for an answer across a reconnection than a resume names (%d)", lockapi.ErrUnavailable, n)
			cl.finish()
		}
		waited = waited[:min(n, len(waited))]
		for _, id := range oneway[n-len(waited):] {
			delete(c.pending, id) // nobody waits for its answer
		}
		oneway = oneway[:n-len(waited)]
	}
	ids := append(waited, oneway...)
	slices.Sort(ids)
	return ids
}

// attach makes cn the client's connection after its Welcome w to hello
// id: a resumed session carries on (requests the agent had not read are
// sent again, with new ids; the others it answers on cn, again if their
// answers were lost); a new one replaces the old, whose locks are lost.
func (c *Client) attach(cn *conn, i int, id uint64, w *wire.ClientWelcome, sent time.Time) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		_ = cn.nc.Close()
		return
	}
	c.lastReply, c.pushes, c.owed, c.acked, c.ackDue = id, 0, 0, 0, false
	if !w.Resumed {
		if c.session != 0 {
			c.dropSessionLocked(fmt.Errorf("%w: the agent no longer has the session", lockapi.ErrLockLost))
		}
		c.session, c.key, c.orphans = w.Session, w.Key, nil
	}
	c.addr, c.node, c.ttl, c.lease = i, w.Node, time.Duration(w.TTL), time.Duration(w.Lease)
	c.extendTrustLocked(sent, time.Duration(w.Lease))
	var resend []*call
	for _, cl := range c.pending {
		if cl.sent && cl.id <= w.LastRequest {
			continue // the agent has it; its answer comes on this connection, again if it was lost
		}
		if cl.abandoned {
			// Its caller gave up, and the agent never read it: nothing
			// to send, nor to cancel (a cancel already posted names an
			// id the agent never saw, and is answered as such).
			delete(c.pending, cl.id)
			continue
		}
		// The agent never read it: it goes again on cn, as a new request
		// (transmit gives it an id above the hello's), by whoever comes
		// first, this goroutine or the caller waiting for it.
		cl.sent = false
		resend = append(resend, cl)
	}
	slices.SortFunc(resend, func(a, b *call) int { return cmpU64(a.id, b.id) })
	for _, cl := range resend {
		// A new id at once: the agent may answer the old one (a resume
		// named it, and the agent never read it), and that answer is
		// not this request's.
		delete(c.pending, cl.id)
		c.nextID++
		cl.id = c.nextID
		c.pending[cl.id] = cl
	}
	c.cn = cn
	orphans := c.orphansDueLocked()
	close(c.up)
	c.wg.Add(1)
	c.mu.Unlock()
	go func() { defer c.wg.Done(); cn.watch() }()
	for _, cl := range resend {
		if c.transmit(cn, cl, false) != nil {
			return // connDown reconnects and sends them again
		}
	}
	for _, id := range orphans {
		c.post(&wire.ClientUnlock{Lock: id})
	}
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// dropSessionLocked forgets the session's locks (lost, with why) and
// fails its requests about them: the agent no longer has them. Requests
// for new locks stay, to be sent in the next session (one the old session
// never granted cannot be granted twice). Caller holds c.mu.
func (c *Client) dropSessionLocked(why error) {
	for id, lk := range c.locks {
		delete(c.locks, id)
		lk.loseLocked(why)
	}
	for id, cl := range c.pending {
		if isNewLock(cl.msg) && !cl.done && !cl.abandoned && !c.closed {
			cl.sent = false
			continue
		}
		delete(c.pending, id)
		if !cl.done {
			cl.err = fmt.Errorf("%w: the session was lost before an answer came", lockapi.ErrUnavailable)
			cl.finish()
		}
	}
}

// extendTrustLocked moves the end of the client's trust in its locks to
// sent + lease, shortened by the clock drift. Caller holds c.mu.
func (c *Client) extendTrustLocked(sent time.Time, lease time.Duration) {
	rho := c.cfg.ClockDrift
	end := sent.Add(time.Duration(float64(lease) * (1 - rho) / (1 + rho)))
	if !end.After(c.trust) {
		return
	}
	c.trust = end
	if c.trustT == nil {
		c.trustT = time.AfterFunc(time.Until(end), c.trustTimer)
	} else {
		c.trustT.Reset(time.Until(end))
	}
}

// trustTimer fires when the client's trust may have run out: unless a
// newer answer extended it, every lock is lost.
func (c *Client) trustTimer() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if d := time.Until(c.trust); d > 0 {
		c.trustT.Reset(d)
		c.mu.Unlock()
		return
	}
	why := fmt.Errorf("%w: no word from the agent within its lease", lockapi.ErrLockLost)
	for id, lk := range c.locks {
		delete(c.locks, id)
		lk.loseLocked(why)
		c.orphanLocked(id)
	}
	c.mu.Unlock()
}

// orphanLocked notes that the lock id, lost here, may still be held at
// the agent, and has it given back LostGrace from now: not at once, so
// that the program, told by Lost, stops using the lock before the agent
// can grant it to another. Caller holds c.mu.
func (c *Client) orphanLocked(id uint64) {
	c.orphans = append(c.orphans, id)
	c.orphanedAt = time.Now()
	if c.giveBackT == nil {
		c.giveBackT = time.AfterFunc(c.cfg.LostGrace, c.giveBack)
	} else {
		c.giveBackT.Reset(c.cfg.LostGrace)
	}
}

// orphansDueLocked returns the orphans to give back now, and forgets
// them: none while the client has no connection (attach gives them back)
// or before LostGrace has passed since the latest was lost (giveBackT
// will). Caller holds c.mu.
func (c *Client) orphansDueLocked() []uint64 {
	if c.cn == nil || time.Since(c.orphanedAt) < c.cfg.LostGrace {
		return nil
	}
	orphans := c.orphans
	c.orphans = nil
	return orphans
}

// giveBack unlocks the orphans at the agent once they are due.
func (c *Client) giveBack() {
	c.mu.Lock()
	var orphans []uint64
	if !c.closed {
		orphans = c.orphansDueLocked()
	}
	c.mu.Unlock()
	for _, id := range orphans {
		c.post(&wire.ClientUnlock{Lock: id})
	}
}

// connDown runs once when cn fails: requests wait while the client
// reconnects.
func (c *Client) connDown(cn *conn, err error) {
	c.mu.Lock()
	if c.cn != cn {
		c.mu.Unlock()
		return
	}
	c.cn = nil
	c.up = make(chan struct{})
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return
	}
	c.log.Info("connection to the agent lost; reconnecting", "agent", cn.addr, "err", err)
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.reconnect() }()
}

// reconnect resumes the session with its agent while the client still
// trusts its locks; after that it tries every agent in turn, the session's
// first (which may still have it) and then the others, until one answers
// or the client closes.
func (c *Client) reconnect() {
	backoff := 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for round := 0; ; round++ {
		c.mu.Lock()
		home, trusted := c.addr, time.Now().Before(c.trust)
		c.mu.Unlock()
		tries := []int{home}
		if !trusted {
			for k := 1; k < len(c.cfg.Addrs); k++ {
				tries = append(tries, (home+k)%len(c.cfg.Addrs))
			}
		}
		for _, i := range tries {
			if ctx.Err() != nil {
				return
			}
			err := c.connect(ctx, i, i == home)
			if err == nil {
				return
			}
			c.log.Debug("reconnect failed", "agent", c.cfg.Addrs[i], "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// conn returns the current connection, waiting while the client
// reconnects.
func (c *Client) conn(ctx context.Context) (*conn, error) {
	for {
		c.mu.Lock()
		cn, up, closed := c.cn, c.up, c.closed
		c.mu.Unlock()
		switch {
		case closed:
			return nil, lockapi.ErrClosed
		case cn != nil:
			return cn, nil
		}
		select {
		case <-up:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// newCall registers a request.
func (c *Client) newCall(m wire.Message) *call {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	cl := newCall(c.nextID, m)
	c.pending[cl.id] = cl
	return cl
}

// sleep returns the channel that wakes cl's caller (making it), which
// goes to sleep while another goroutine reads cn: until cl is answered,
// it counts in cn.asleep, for the watcher to read for it.
func (c *Client) sleep(cn *conn, cl *call) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl.ch == nil {
		cl.ch = make(chan struct{}, 1)
		if cl.done {
			cl.ch <- struct{}{}
		}
	}
	if !cl.done && cl.sleeper == nil {
		cl.sleeper = cn
		cn.asleep.Add(1)
	}
	return cl.ch
}

// wake undoes sleep for a caller that woke before cl was answered.
func (c *Client) wake(cl *call) {
	c.mu.Lock()
	cl.unsleepLocked()
	c.mu.Unlock()
}

func (c *Client) isDone(cl *call) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cl.done
}

// do sends a request and waits for its answer, across reconnections, as
// long as ctx allows. A ctx that ends first abandons the request (and
// cancels it at the agent, if it may wait there and the agent has not
// timed it out): ctx's error is returned, unless the answer came as ctx
// ended.
func (c *Client) do(ctx context.Context, cl *call) error {
	for {
		cn, err := c.conn(ctx)
		if err != nil {
			if answered, aerr := c.abandon(ctx, cl); answered {
				return aerr
			}
			return err
		}
		if err := c.transmit(cn, cl, false); err != nil {
			continue // sent again once reconnected
		}
		_ = cn.await(ctx, cl) // the outcome is read from cl below
		c.mu.Lock()
		done, cerr := cl.done, cl.err
		if done {
			delete(c.pending, cl.id)
		}
		c.mu.Unlock()
		if done {
			return cerr
		}
		if ctx.Err() != nil {
			if answered, aerr := c.abandon(ctx, cl); answered {
				// The answer came as ctx ended, after the look above: it
				// stands (a grant is the caller's, registered already).
				return aerr
			}
			return ctx.Err()
		}
		// errConnLost: wait for the next connection; the call stays.
	}
}

// abandon gives up on a request whose caller stopped waiting, unless its
// answer is in already: then it reports true and the answer's error. One
// still waiting at the agent is cancelled there; if it is granted first,
// the grant is given back (dispatch).
//
// With the caller's ctx, no ClientCancel goes if ctx's deadline ended it
// and the request's own timeout has passed too: told the timeout when it
// was sent (timeoutOf: ctx's deadline, less the answer's margin), the
// agent's master fails the request at its next look at the clock (a
// tick, a request, a release: never granting it after that), and a
// cancel would only cost the client, the agent and the master another
// message each, and its answer one more. Under contention with short
// deadlines (a request for a coupon), that is most of the traffic.
func (c *Client) abandon(ctx context.Context, cl *call) (answered bool, err error) {
	c.mu.Lock()
	if cl.done {
		delete(c.pending, cl.id)
		err := cl.err
		c.mu.Unlock()
		return true, err
	}
	cl.abandoned = true
	sent, sentAt := cl.sent, cl.sentAt
	c.mu.Unlock()
	timeout := agentTimeout(cl.msg)
	switch {
	case !sent:
	case timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) && time.Since(sentAt) >= timeout:
		// Timed out at the agent: its answer, or a grant it had sent
		// first (given back, dispatch), is on the way.
	case isWaiting(cl.msg):
		c.post(&wire.ClientCancel{Request: cl.id})
	}
	return false, nil
}

// isWaiting reports whether m is a request that may wait at the agent,
// which ClientCancel withdraws.
func isWaiting(m wire.Message) bool {
	switch m.(type) {
	case *wire.ClientLock, *wire.ClientConvert, *wire.ClientAcquire, *wire.ClientDescribe:
		return true
	}
	return false
}

// post sends a request nobody waits for; an error in its answer is only
// logged. It may wait a moment to leave with the next request
// (conn.queueLazyLocked).
func (c *Client) post(m wire.Message) { c.postLazy(m, true) }

// postLazy is post, with lazy false for a request that must not wait.
func (c *Client) postLazy(m wire.Message, lazy bool) {
	cl := c.newCall(m)
	c.mu.Lock()
	cl.oneway = true
	cn := c.cn
	c.mu.Unlock()
	if cn != nil {
		_ = c.transmit(cn, cl, lazy) // if it is lost, attach sends it again
	}
}

// transmit sends cl on cn, unless it was sent already (by another
// goroutine: the caller waiting for it and a resume may both try) or cn is
// no longer the client's connection. The agent takes a request only if its
// id is above every id it has read in the session, and reads one
// connection's frames in the order they are written, so the id is checked
// under cn's write mutex: a call whose id is not above the last one written
// on cn (it was made before cn's hello, or made before another call that
// went first) is given the next id. Lazy requests are queued to leave with
// the next write (conn.queueLazyLocked).
func (c *Client) transmit(cn *conn, cl *call, lazy bool) error {
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	c.mu.Lock()
	switch {
	case cl.sent || cl.done:
		c.mu.Unlock()
		return nil
	case c.cn != cn:
		c.mu.Unlock()
		return errConnLost
	}
	// Ahead of cl, in the same write: the reader that counted the frames
	// never writes (a write may wait for the agent, which may wait for the
	// client to read).
	c.queueAckLocked(cn)
	if cl.id <= cn.lastID {
		delete(c.pending, cl.id)
		c.nextID++
		cl.id = c.nextID
		c.pending[cl.id] = cl
	}
	cl.sent = true
	if agentTimeout(cl.msg) > 0 {
		cl.sentAt = time.Now()
	}
	h := wire.Header{ID: cl.id}
	cn.lastID = cl.id
	c.mu.Unlock()
	if lazy {
		return cn.queueLazyLocked(h, cl.msg)
	}
	return cn.sendLocked(h, cl.msg)
}

// queueAckLocked queues the ClientAck that is due, if one is, to leave
// with cn's next write (or within lazyDelay). Caller holds cn.wmu and
// c.mu.
func (c *Client) queueAckLocked(cn *conn) {
	if !c.ackDue {
		return
	}
	c.ackDue = false
	if c.lastReply == c.acked {
		// Only pushes since: an acknowledgement names a reply, so these
		// are told with the next reply's.
		return
	}
	c.owed, c.acked = 0, c.lastReply
	c.nextID++
	ack := newCall(c.nextID, &wire.ClientAck{Read: c.lastReply})
	ack.oneway, ack.sent = true, true
	c.pending[ack.id] = ack
	cn.lastID = ack.id
	if err := cn.queueLazyLocked(wire.Header{ID: ack.id}, ack.msg); err != nil {
		delete(c.pending, ack.id)
	}
}

// acker sends the acknowledgements no request took along: a client that
// only reads (the agent pushing a flood of lost locks) still tells the
// agent what it read, and the agent, which sends such floods only as fast
// as they are acknowledged, goes on.
func (c *Client) acker() {
	for {
		select {
		case <-c.stop:
			return
		case <-c.ackKick:
		}
		c.mu.Lock()
		cn := c.cn
		c.mu.Unlock()
		if cn == nil {
			continue // the hello of the next connection says what was read
		}
		cn.wmu.Lock()
		c.mu.Lock()
		if c.cn == cn {
			c.queueAckLocked(cn)
		}
		c.mu.Unlock()
		cn.wmu.Unlock()
	}
}

// dispatch handles a frame from the agent: an answer to a call, or a
// push. m is valid only during the call.
func (c *Client) dispatch(cn *conn, h wire.Header, m wire.Message) {
	c.mu.Lock()
	switch {
	case h.Reply:
		c.lastReply, c.pushes = h.ID, 0
	case m.Type() == wire.TypeClientBlocking || m.Type() == wire.TypeClientLost:
		c.pushes++ // the pushes the agent keeps; not a one-way ClientError
	}
	if c.owed++; c.owed >= ackEvery {
		c.ackDue = true
		if c.owed >= 2*ackEvery && c.lastReply != c.acked {
			// Twice as many read and no request took the acknowledgement
			// along: it goes alone.
			select {
			case c.ackKick <- struct{}{}:
			default:
			}
		}
	}
	c.mu.Unlock()
	if h.Reply {
		c.answer(h.ID, m)
		return
	}
	switch m := m.(type) {
	case *wire.ClientBlocking:
		c.mu.Lock()
		lk := c.locks[m.Lock]
		c.mu.Unlock()
		if lk != nil && lk.onBlock != nil {
			c.callbacks.push(lk.onBlock, m.Mode)
		}
	case *wire.ClientLost:
		why := agentError(m.Code, m.Text)
		if !errors.Is(why, lockapi.ErrLockLost) {
			why = fmt.Errorf("%w: %w", lockapi.ErrLockLost, why)
		}
		c.mu.Lock()
		if lk := c.locks[m.Lock]; lk != nil {
			delete(c.locks, m.Lock)
			lk.loseLocked(why)
		}
		c.mu.Unlock()
	case *wire.ClientError:
		err := agentError(m.Code, m.Text)
		c.log.Warn("the agent is closing the connection", "agent", cn.addr, "err", err)
		if m.Code == wire.CodeSessionEnded {
			c.mu.Lock()
			c.dropSessionLocked(err)
			c.session, c.key = 0, 0
			c.mu.Unlock()
		}
	}
}

// ackEvery is how many frames the client reads before it tells the agent
// (ClientAck, which leaves with the next request, or alone once twice as
// many came and no request did): the agent keeps what
// it sent until then, to give it again after a reconnection.
const ackEvery = 64

// ack makes the next request tell the agent what the client read, if it
// read anything since it last did.
func (c *Client) ack() {
	c.mu.Lock()
	if c.owed > 0 {
		c.ackDue = true
	}
	c.mu.Unlock()
}

// answer hands the agent's answer to call id.
func (c *Client) answer(id uint64, m wire.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.pending[id]
	if cl == nil || cl.done {
		return // answered already: a resume may bring an answer again
	}
	if cl.oneway {
		delete(c.pending, id)
		if e, ok := m.(*wire.ClientError); ok && e.Code != wire.CodeNotHeld && e.Code != wire.CodeLockLost {
			c.log.Warn("request refused", "type", cl.msg.Type(), "err", agentError(e.Code, e.Text))
		}
		return
	}
	cl.deliver(m)
	g, granted := m.(*wire.ClientGrant)
	switch {
	case cl.abandoned:
		delete(c.pending, id)
		if isNewLock(cl.msg) && granted {
			c.postLocked(&wire.ClientUnlock{Lock: g.Lock}) // granted after its caller gave up
		}
	case cl.lock != nil && granted && cl.err == nil:
		// The lock is the client's from the moment its grant is read, so
		// that a push about it right behind the grant finds it.
		if !time.Now().Before(c.trust) {
			// Granted after the client's trust in its session ran out
			// (its other locks are lost already): the agent may end the
			// session, and the master give the lock to another, at any
			// moment, with no word reaching the client first. The
			// request fails (the caller reads cl.err only once c.mu is
			// let go) and the grant goes back.
			cl.err = fmt.Errorf("%w: %w", lockapi.ErrLockLost, errUntrustedGrant)
			c.postLocked(&wire.ClientUnlock{Lock: g.Lock})
			break
		}
		cl.lock.grantLocked(&cl.grant)
		c.locks[g.Lock] = cl.lock
	}
}

// isNewLock reports whether m asks for a new lock or new permits: a
// request whose grant makes something the client must give back.
func isNewLock(m wire.Message) bool {
	switch m.(type) {
	case *wire.ClientLock, *wire.ClientAcquire:
		return true
	}
	return false
}

// postLocked sends, for a caller that holds c.mu, the unlock of a lock
// granted to nobody, on a goroutine of its own (not under the mutex) and
// at once: the master counts the lock as held, and whoever waits for it
// waits, until the unlock is in; no next request of the client's is worth
// that wait.
func (c *Client) postLocked(m wire.Message) {
	go c.postLazy(m, false)
}

// keepAlive renews the session every third of the shorter of its TTL and
// the agent's last lease, until the client closes.
func (c *Client) keepAlive() {
	for {
		c.mu.Lock()
		every := min(c.ttl, c.lease) / 3
		c.mu.Unlock()
		every = max(every, 10*time.Millisecond)
		select {
		case <-c.stop:
			return
		case <-time.After(every):
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		c.ack() // leaves with the keep-alive: an idle session's agent keeps little
		_ = c.renew(ctx, 0)
		cancel()
	}
}

// renew sends a keep-alive (of the session, or of lock id's own TTL) and
// extends the client's trust by the agent's answer.
func (c *Client) renew(ctx context.Context, id uint64) error {
	cl := c.newCall(&wire.ClientKeepAlive{Lock: id})
	sent := time.Now()
	if err := c.do(ctx, cl); err != nil {
		return err
	}
	c.mu.Lock()
	c.lease = time.Duration(cl.lease)
	c.extendTrustLocked(sent, time.Duration(cl.lease))
	c.mu.Unlock()
	return nil
}

// Node returns the name of the agent's node the client is (or was last)
// connected to.
func (c *Client) Node() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.node
}

// Session returns the session's id at its agent.
func (c *Client) Session() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// byeTimeout bounds how long Close waits for the agent to end the session.
const byeTimeout = 2 * time.Second

// Close ends the session (its locks released at once, as by Unlock) and
// the connection. Locks still held report ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	cn := c.cn
	c.mu.Unlock()
	if cn != nil {
		// On the connection there is, if any: a session being reconnected
		// is left to expire rather than waited for.
		cl := c.newCall(&wire.ClientBye{})
		if c.transmit(cn, cl, false) == nil {
			ctx, cancel := context.WithTimeout(context.Background(), byeTimeout)
			_ = cn.await(ctx, cl)
			cancel()
		}
	}
	c.mu.Lock()
	c.closed = true
	cn = c.cn
	c.dropSessionLocked(fmt.Errorf("%w: the client closed", lockapi.ErrClosed))
	if c.trustT != nil {
		c.trustT.Stop()
	}
	if c.giveBackT != nil {
		c.giveBackT.Stop()
	}
	c.mu.Unlock()
	close(c.stop)
	if cn != nil {
		cn.fail(lockapi.ErrClosed)
	}
	c.wg.Wait()
	return nil
}

// Lockspace returns the lockspace called name (opened at the agent on its
// first lock).
func (c *Client) Lockspace(name string) *Lockspace { return &Lockspace{c: c, name: name} }

// ownerID hands out the session's owner ids.
func (c *Client) ownerID() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextOwner++
	return c.nextOwner
}
