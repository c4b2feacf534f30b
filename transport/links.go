package transport

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Handler receives incoming requests and one-way messages. It runs on the
// goroutine that reads the connection the message came on (its reader
// goroutine, or a goroutine waiting in Call or Await that took over the
// reading), one message at a time per connection, in the order sent, so it
// must not block: hand slow work to another goroutine. in.Msg, and any byte
// slice in it, is valid only until the handler returns; strings may be
// kept. Send, Go and Reply never block and may be called from a handler;
// Call and Await wait and must not be.
type Handler func(in Inbound)

// Inbound is one incoming message.
type Inbound struct {
	From    string       // sender's node name, from its Hello
	BootID  uint64       // sender's boot ID, from its Hello
	ReplyTo ReplyTo      // where to send the reply; zero for a one-way message
	Msg     wire.Message // the decoded, validated message
}

// ReplyTo names a request to answer: the peer, its boot and the request id.
// It is a small value: keep it as long as needed (a queued lock may be
// granted seconds after its request) and pass it to Links.Reply.
type ReplyTo struct {
	Peer   string
	BootID uint64
	ID     uint64
	// p is the peer whose connection brought the request, if known: Reply
	// then needs no lookup by name (it looks up Peer if p was removed).
	p *peer
}

// IsRequest reports whether the message expects a reply.
func (r ReplyTo) IsRequest() bool { return r.ID != 0 }

// Links holds the connections of one node to its peers. See the package
// documentation for the design. All methods are safe for concurrent use.
type Links struct {
	cfg Config
	log *slog.Logger
	met *metrics

	nextID atomic.Uint64 // request ids, unique for the life of the Links

	mu     sync.RWMutex
	closed bool
	peers  map[string]*peer
	// view is peers and closed as of their last change, for the lookups of
	// every message without a lock: replaced (under mu), never changed.
	view    atomic.Pointer[peerView]
	inbound map[*inConn]struct{}
	// acceptSeq numbers accepted connections, so that the latest from a
	// peer is the one its link adopts.
	acceptSeq uint64
	// recv counts, per peer name, what this node handled of that peer's
	// latest send session (session.go).
	recv map[string]*recvCounter

	callSlots sync.Pool // *callSlot of finished Calls
	pingFrame []byte    // the encoded heartbeat answer, written as is

	// Batching of what handlers send: while a reader goroutine handles a
	// batch of incoming messages (handling > 0), peers with new bytes wait
	// in deferred, and the reader writes them out before it reads again.
	// handling is increased without deferMu (a sender that misses a batch
	// just beginning writes at once, which is always correct) but
	// decreased under it, with the list taken in the same step.
	deferMu  sync.Mutex
	handling atomic.Int32
	deferred []*peer

	wg sync.WaitGroup
}

// New validates cfg, starts accepting connections on cfg.StreamLayer and
// returns the Links. Peers are added with SetPeer.
func New(cfg Config) (*Links, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.BootID == 0 {
		cfg.BootID = randomNonZero()
	}
	if cfg.Seed == 0 {
		cfg.Seed = cfg.BootID
	}
	if cfg.watcherPark <= 0 {
		cfg.watcherPark = watcherPark
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("transport: metrics: %w", err)
	}
	l := &Links{
		cfg:     cfg,
		log:     log.With("node", cfg.Name),
		met:     met,
		peers:   map[string]*peer{},
		inbound: map[*inConn]struct{}{},
	}
	l.view.Store(&peerView{peers: map[string]*peer{}})
	l.pingFrame, _ = wire.AppendFrame(nil, wire.Header{}, &wire.Ping{}, &cfg.Limits) // a Ping is always valid
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

func randomNonZero() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if v := binary.LittleEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}

// Name returns this node's name.
func (l *Links) Name() string { return l.cfg.Name }

// BootID returns this node's boot ID (chosen by New if the Config had none).
func (l *Links) BootID() uint64 { return l.cfg.BootID }

// Addr returns the address the stream layer listens on.
func (l *Links) Addr() net.Addr { return l.cfg.StreamLayer.Addr() }

// SetPeer adds the peer name at addr, or moves it to a new address, and
// starts connecting to it if name sorts after this node's name, or else
// waits for it to connect (adopting at once a connection it already dialled).
// Until the first connection or its failure (or, when waiting, a dial and a
// handshake timeout), messages to it are queued (bounded by
// WriteBufferLimit); afterwards, while there is no connection, they fail with
// ErrUnreachable.
func (l *Links) SetPeer(name, addr string) error {
	if name == "" || len(name) > wire.MaxNodeName || addr == "" {
		return fmt.Errorf("transport: SetPeer(%q, %q): need a name of 1..%d bytes and an address", name, addr, wire.MaxNodeName)
	}
	if name == l.cfg.Name {
		return fmt.Errorf("transport: SetPeer(%q): that is this node", name)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	old := l.peers[name]
	if old != nil && old.addr == addr {
		l.mu.Unlock()
		return nil
	}
	p := newPeer(l, name, addr)
	l.peers[name] = p
	l.publishLocked()
	waiting := l.dialledBy(name)
	l.wg.Add(1)
	l.mu.Unlock()
	if old != nil {
		old.stop(ErrPeerRemoved)
	}
	go p.run()
	if waiting != nil {
		p.offer(waiting)
	}
	return nil
}

// Redial tells the links that the peer name is reachable again (membership
// saw it join, or restart with a new boot): if this node dials it and the
// link is down, waiting out the backoff of failed attempts, it dials now.
// Otherwise it does nothing. The backoff spaces attempts at a peer that
// does not answer; a peer that came back answers the first.
func (l *Links) Redial(name string) {
	p, err := l.peer(name)
	if err != nil || p.accepts {
		return
	}
	p.mu.Lock()
	down := p.state == down
	p.mu.Unlock()
	if !down {
		return
	}
	select {
	case p.redial <- struct{}{}:
	default: // one is pending already
	}
}

// dialledBy returns the latest connection the peer name dialled to this node
// that is still open, or nil; with l.mu held.
func (l *Links) dialledBy(name string) *inConn {
	var last *inConn
	for ic := range l.inbound {
		if ic.from == name && (last == nil || ic.seq > last.seq) {
			last = ic
		}
	}
	return last
}

// RemovePeer disconnects and forgets a peer. Its pending calls fail with
// ErrPeerRemoved (their callbacks run on a library goroutine), and every
// connection with it is closed.
func (l *Links) RemovePeer(name string) {
	l.mu.Lock()
	p := l.peers[name]
	delete(l.peers, name)
	l.publishLocked()
	var in []*inConn
	for c := range l.inbound {
		if c.from == name {
			in = append(in, c)
		}
	}
	l.mu.Unlock()
	if p != nil {
		p.stop(ErrPeerRemoved)
	}
	for _, c := range in {
		_ = c.conn.Close()
	}
}

// Peers returns the names of the peers that are set.
func (l *Links) Peers() []string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]string, 0, len(l.peers))
	for name := range l.peers {
		out = append(out, name)
	}
	return out
}

type peerView struct {
	peers  map[string]*peer
	closed bool
}

// publishLocked replaces the view after peers or closed changed; with mu held.
func (l *Links) publishLocked() {
	l.view.Store(&peerView{peers: maps.Clone(l.peers), closed: l.closed})
}

// userPeer is peer for a message from the user: control messages are refused.
func (l *Links) userPeer(name string, m wire.Message) (*peer, error) {
	if err := checkUserType(m); err != nil {
		return nil, err
	}
	return l.peer(name)
}

func checkUserType(m wire.Message) error {
	if t := m.Type(); t == wire.TypePing || t == wire.TypeHello {
		return fmt.Errorf("%w: %v", ErrReserved, t)
	}
	return nil
}

func (l *Links) peer(name string) (*peer, error) {
	v := l.view.Load()
	p := v.peers[name]
	switch {
	case v.closed:
		return nil, ErrClosed
	case p == nil:
		return nil, fmt.Errorf("%w: %s", ErrUnknownPeer, name)
	}
	return p, nil
}

// WaitConnected returns when the link to peer is up (nil),
// when ctx ends, or when the peer is removed or the Links closed. A caller
// that got ErrUnreachable can use it to learn when to retry.
func (l *Links) WaitConnected(ctx context.Context, peer string) error {
	p, err := l.peer(peer)
	if err != nil {
		return err
	}
	return p.waitUp(ctx)
}

// Send queues a one-way message to a peer. It never blocks: the message is
// encoded into the peer's write buffer and the connection's writer sends it
// with whatever else is queued. An invalid message is refused (wire.ErrInvalid)
// and nothing is queued.
func (l *Links) Send(peer string, m wire.Message) error {
	p, err := l.userPeer(peer, m)
	if err != nil {
		return err
	}
	return p.send(wire.Header{}, m, nil)
}

// Flush waits until everything queued for every peer so far has been
// handed to the kernel, or ctx ends. A node that is about to close uses it
// so that its last messages (the release of its locks) are not lost.
func (l *Links) Flush(ctx context.Context) error {
	l.mu.RLock()
	waits := make([]<-chan struct{}, 0, len(l.peers))
	for _, p := range l.peers {
		waits = append(waits, p.flushWait())
	}
	l.mu.RUnlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Post queues a one-way message that need not leave at once (an unlock, a
// cancel: nobody waits for an answer). It never blocks. Rather than write
// it now, the sender hands it to the writer goroutine, so that the caller
// does not pay for a write syscall, and a Send that follows soon carries
// it in the same write.
func (l *Links) Post(peer string, m wire.Message) error {
	p, err := l.userPeer(peer, m)
	if err != nil {
		return err
	}
	return p.post(m)
}

// Piggyback queues a one-way message that may wait a little for company.
// If nobody waits for anything on the link (no Await, no Call), it leaves
// with the next message to the same peer, or when the link's parked
// reader next looks, whichever comes first: within 20 µs in a busy
// process, within a millisecond in an idle one, whose timers have that
// granularity. Otherwise, and on links that do not
// lend their reading (TLS, in-process), it is a Post. dlm sends the unlock
// of a lock nobody else asked for this way, so that a goroutine that
// unlocks and locks again on the same master pays one write for both. It
// never blocks.
func (l *Links) Piggyback(peer string, m wire.Message) error {
	p, err := l.userPeer(peer, m)
	if err != nil {
		return err
	}
	return p.piggyback(m)
}

// Reply answers a request. It never blocks. It fails with ErrStaleReply if
// the requester restarted since, and with ErrUnreachable if there is no
// connection to it now; in both cases nobody could receive the reply.
func (l *Links) Reply(to ReplyTo, m wire.Message) error {
	if !to.IsRequest() {
		return ErrNotRequest
	}
	if err := checkUserType(m); err != nil {
		return err
	}
	p := to.p
	if p == nil || p.name != to.Peer || p.ctx.Err() != nil { // unknown, or removed since
		var err error
		if p, err = l.peer(to.Peer); err != nil {
			return err
		}
	}
	return p.reply(to, m)
}

// Call sends a request and waits for its reply, or for ctx to end, or for
// the connection to fail (ErrConnLost), the peer to be removed
// (ErrPeerRemoved) or the Links to close (ErrClosed). The reply is the
// caller's to keep.
//
// Over plain TCP the calling goroutine may read the peer's connection while
// it waits (see "Receiving" in the package doc), and so run the Handler and
// Go callbacks for what arrives: Call must not be made while holding
// anything they may need, or it deadlocks on itself. A ctx that ends
// interrupts that reading (context.AfterFunc).
func (l *Links) Call(ctx context.Context, peer string, m wire.Message) (wire.Message, error) {
	return l.call(ctx, peer, m, nil)
}

// CallInto is Call with the reply decoded into reply, which the caller
// provides and may reuse from call to call: it spares the allocation of a
// new message for each reply. A reply of another type fails the call with
// ErrWrongReply and leaves reply as it was; after any other error, reply's
// contents are unspecified. The reply's byte slices are its own, as with
// Call. reply must not be used by anyone else until CallInto returns.
func (l *Links) CallInto(ctx context.Context, peer string, m, reply wire.Message) error {
	if reply == nil {
		return errors.New("transport: CallInto needs a message for the reply")
	}
	_, err := l.call(ctx, peer, m, reply)
	return err
}

func (l *Links) call(ctx context.Context, peer string, m, into wire.Message) (wire.Message, error) {
	p, err := l.userPeer(peer, m)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return p.call(ctx, m, into)
}

// Waiter is a goroutine's wait for something a peer sends: Done reports
// whether it has arrived. It is called on other goroutines, after each
// batch of incoming messages, and must be cheap and must not block.
type Waiter interface{ Done() bool }

// Wait is a registered wait that Await returned; End must be called once
// the waiting goroutine stops waiting, whatever ended it.
type Wait struct {
	r     *inReader
	token uint64
}

// End ends the wait.
func (w Wait) End() {
	if w.token != 0 {
		w.r.unregister(w.token)
	}
}

// Await lends the calling goroutine to the reading of the connection to
// peer while it waits for something that peer sends (a Call's reply, a
// lock's grant): if nobody else reads it, it reads and handles what
// arrives, Handler calls included, until w is done, ctx ends, the
// connection fails, or the wait is interrupted (Lender.Interrupt). It is
// only a way to be woken by the network rather than by the connection's
// reader goroutine, which saves a goroutine hand-off per round trip: the
// caller still waits for its outcome in its usual way afterwards, and then
// calls End on the result. While another goroutine holds the reading, the
// connection's reader goroutine reads for this one. Plain TCP connections
// only; on others Await does nothing.
//
// A waiter whose outcome may come from elsewhere than peer (a local event,
// another connection) must be interrupted when it does: use Lender, whose
// Interrupt does that, rather than Await.
//
// Like Call, Await must not be called while holding anything a Handler or
// Go callback may need.
func (l *Links) Await(ctx context.Context, peer string, w Waiter) Wait {
	return l.Lender(peer).Await(ctx, w)
}

// Lender returns the reading of the connection to peer as it can be lent
// to waiting goroutines, or nil if it cannot (no connection yet, or not
// plain TCP); the methods of a nil Lender do nothing. A Lender belongs to
// one connection: after a reconnect, get the new one.
func (l *Links) Lender(peer string) *Lender {
	if p, err := l.peer(peer); err == nil {
		return p.lender()
	}
	return nil
}

// Lender is the reading of one connection, as lent by Await.
type Lender struct{ r *inReader }

// Await is Links.Await on this Lender's connection.
func (ld *Lender) Await(ctx context.Context, w Waiter) Wait {
	if ld == nil {
		return Wait{}
	}
	return Wait{ld.r, ld.r.help(ctx, w)}
}

// Interrupt ends the reading of the goroutine that reads this connection in
// Await, if any, so that it looks at its Waiter again: call it when a
// Waiter's outcome came from elsewhere than this connection, after Done
// reports it. Cheap when nobody is blocked reading; safe from any
// goroutine, the reading one included.
func (ld *Lender) Interrupt() {
	if ld != nil {
		ld.r.interrupt()
	}
}

// Go sends a request and returns at once. Unless Go returns an error, cb
// runs exactly once, on a library goroutine, with the reply or with the
// error that ended the wait (ErrConnLost, ErrPeerRemoved, ErrClosed). cb
// must not block; the reply is valid only during cb, like a handler's
// message. There is no timeout: the call waits as long as the connection
// lives (a lock request may wait long for its grant).
func (l *Links) Go(peer string, m wire.Message, cb func(reply wire.Message, err error)) error {
	if cb == nil {
		return errors.New("transport: Go needs a callback")
	}
	p, err := l.userPeer(peer, m)
	if err != nil {
		return err
	}
	return p.send(wire.Header{}, m, cb)
}

// Close closes the listener, every connection and every peer. Pending calls
// fail with ErrClosed. It returns when every goroutine of the Links has
// ended, with its metrics unregistered; it must not be called from a
// Handler or callback.
func (l *Links) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	peers := l.peers
	l.peers = map[string]*peer{}
	l.publishLocked()
	in := make([]*inConn, 0, len(l.inbound))
	for c := range l.inbound {
		in = append(in, c)
	}
	l.mu.Unlock()
	l.goodbye(peers)
	err := l.cfg.StreamLayer.Close()
	for _, p := range peers {
		p.stop(ErrClosed)
	}
	for _, c := range in {
		_ = c.conn.Close()
	}
	l.wg.Wait()
	l.met.group.Unregister()
	return err
}

func (l *Links) isClosed() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.closed
}

func (l *Links) acceptLoop() {
	defer l.wg.Done()
	for {
		c, err := l.cfg.StreamLayer.Accept()
		if err != nil {
			if !l.isClosed() && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
				l.log.Warn("accept failed; no longer accepting", "err", err)
			}
			return
		}
		ic := newInConn(c)
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			_ = c.Close()
			return
		}
		l.acceptSeq++
		ic.seq = l.acceptSeq
		l.inbound[ic] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.serveInbound(ic)
	}
}

// deferKick puts p on the deferred list if a reader goroutine is handling a
// batch (it will write p's bytes before it next reads), and reports whether
// it did.
func (l *Links) deferKick(p *peer) bool {
	if l.handling.Load() == 0 {
		return false // no batch under way: write now (a batch that begins meanwhile changes nothing)
	}
	l.deferMu.Lock()
	defer l.deferMu.Unlock()
	if l.handling.Load() == 0 {
		return false
	}
	if !p.deferred {
		p.deferred = true
		l.deferred = append(l.deferred, p)
	}
	return true
}

// beginBatch marks a reader goroutine as handling messages.
func (l *Links) beginBatch() { l.handling.Add(1) }

// endBatch ends a reader goroutine's batch and writes out every deferred
// peer. Under the same mutex as deferKick, so a sender that saw a batch
// under way is always on the list this (or another) reader writes out.
func (l *Links) endBatch(scratch []*peer) []*peer {
	l.deferMu.Lock()
	l.handling.Add(-1)
	out := append(scratch[:0], l.deferred...)
	for _, p := range l.deferred {
		p.deferred = false
	}
	clear(l.deferred)
	l.deferred = l.deferred[:0]
	l.deferMu.Unlock()
	for _, p := range out {
		p.writeInline()
	}
	clear(out)
	return out[:0]
}

// goodbyeTimeout bounds how long Close waits for its goodbyes to leave and
// for its peers to close their side.
const goodbyeTimeout = 2 * time.Second

// goodbye tells every peer whose link is up that this node is closing (a
// Ping with Closing), so that it ends its session at once rather than wait
// for a reconnection, and lets what is queued leave. Then it half-closes
// each TCP connection and waits, briefly, for the peer to close its side:
// a socket closed with bytes unread is reset, and the reset can drop what
// this node sent last before the peer read it.
func (l *Links) goodbye(peers map[string]*peer) {
	ctx, cancel := context.WithTimeout(context.Background(), goodbyeTimeout)
	defer cancel()
	var flushed []<-chan struct{}
	for _, p := range peers {
		p.mu.Lock()
		if p.state == up {
			_, _ = p.appendLocked(wire.Header{}, &wire.Ping{Closing: true})
		}
		p.mu.Unlock()
		flushed = append(flushed, p.flushWait())
	}
	for _, w := range flushed {
		select {
		case <-w:
		case <-ctx.Done():
			return
		}
	}
	var ended []<-chan struct{}
	for _, p := range peers {
		p.mu.Lock()
		c, up := p.conn, p.state == up
		p.mu.Unlock()
		r := p.reader.Load()
		hc, ok := c.(interface{ CloseWrite() error })
		if !up || !ok || r == nil {
			continue
		}
		if hc.CloseWrite() == nil {
			ended = append(ended, r.ic.readDone)
		}
	}
	for _, e := range ended {
		select {
		case <-e:
		case <-ctx.Done():
			return
		}
	}
}
