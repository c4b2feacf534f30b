package clientport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Server is an agent's client port. Serve it on one or more listeners;
// Close ends every session (releasing its locks) and connection.
type Server struct {
	cfg    Config
	node   *dlm.Node
	log    *slog.Logger
	met    *metrics
	limits wire.Limits
	tls    *tls.Config
	// cluster is the cluster of the agent's certificate: with TLS, clients
	// must present a client certificate of it.
	cluster string

	// ctx ends when the server closes: the requests that wait (locks,
	// conversions, renewals) wait under it.
	ctx    context.Context
	cancel context.CancelFunc

	nconns atomic.Int64 // connections open, for MaxConnections

	holdIDs atomic.Uint64 // ids of cache holds: high bit set, apart from lock ids

	// poll watches idle connections so that they need no goroutine (nil
	// where it cannot, or with ParkAfter 0); readers and decoders are the
	// buffers parked connections gave back.
	poll     *poller
	readings sync.Pool // *reading, its frame reader reading nothing
	// answers writes the answers connections hold for a request's answer
	// (writer.endBatch) that did not come soon enough.
	answers answerFlusher

	mu       sync.Mutex
	caches   map[string]*dlm.Cache // the shared-lock cache of each lockspace, made on first use
	sessions map[uint64]*session
	conns    map[*conn]struct{} // open, parked or not
	lns      map[net.Listener]struct{}
	closed   bool
	wg       sync.WaitGroup // connections (from accept to their end) and the requests they wait on
}

// ErrServerClosed is returned by Serve once Close was called.
var ErrServerClosed = errors.New("clientport: server closed")

// New returns a client port for cfg.Node.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("clientport: metrics: %w", err)
	}
	s := &Server{
		cfg: cfg, node: cfg.Node, met: met, limits: cfg.limits(),
		sessions: map[uint64]*session{}, conns: map[*conn]struct{}{}, lns: map[net.Listener]struct{}{},
	}
	s.log = cfg.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("component", "clientport")
	if cfg.TLS != nil {
		s.tls, _ = cfg.TLS.ServerConfig() // Validate checked it
		id, _ := cfg.TLS.Identity()
		s.cluster = id.Cluster
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.poll = newPoller(cfg.ParkAfter, s.wake, s.log, met.parked)
	return s, nil
}

// Serve accepts client connections on ln until ln fails or the server is
// closed (then it returns ErrServerClosed). It closes ln when it returns.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ln.Close()
		return ErrServerClosed
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
		_ = ln.Close()
	}()
	backoff := time.Duration(0)
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			if temporary(err) {
				// Out of file descriptors and the like: wait, do not spin.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "in", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.accept(nc)
	}
}

// temporary reports whether Accept may succeed again after err (EMFILE,
// ENFILE, ECONNABORTED and timeouts say so).
func temporary(err error) bool {
	var t interface{ Temporary() bool }
	var ne net.Error
	return errors.As(err, &t) && t.Temporary() || errors.As(err, &ne) && ne.Timeout()
}

// accept admits a connection within MaxConnections, or tells it why not.
func (s *Server) accept(nc net.Conn) {
	if n := s.nconns.Add(1); n > int64(s.cfg.MaxConnections) {
		s.nconns.Add(-1)
		s.met.refused[refusedConnections].Inc()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			refuse(nc, s.tls, &wire.ClientError{Code: wire.CodeLimit, Text: fmt.Sprintf("the agent serves %d client connections, its limit", s.cfg.MaxConnections)}, &s.limits)
		}()
		return
	}
	c := newConn(s, nc)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.nconns.Add(-1)
		_ = nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.met.connections.Inc()
	go c.serve()
}

// ended forgets a connection that ended.
func (s *Server) ended(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.nconns.Add(-1)
	s.met.connections.Dec()
	s.wg.Done()
}

// wake starts a reader for a parked connection: it has something to
// read, or it was closed.
func (s *Server) wake(c *conn) { go c.run(false) }

// reading returns a frame reader of nc and a decoder, a parked
// connection's if one is free.
func (s *Server) reading(nc net.Conn, idle time.Duration) *reading {
	if rd, ok := s.readings.Get().(*reading); ok {
		rd.fr.Reset(nc, idle)
		return rd
	}
	return &reading{fr: transport.NewFrameReader(nc, idle, &s.limits, s.cfg.ReadBuffer), dec: wire.NewClientDecoder(s.limits)}
}

// putReading keeps what a connection no longer reads with.
func (s *Server) putReading(rd *reading) {
	rd.fr.Reset(nil, 0)
	s.readings.Put(rd)
}

// refuse tells a connection the agent will not serve it, as well as a
// connection that may not even have started TLS can be told, and closes
// it. It spends at most a second on it.
func refuse(nc net.Conn, cfg *tls.Config, m *wire.ClientError, l *wire.Limits) {
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(time.Second))
	if cfg != nil {
		tc := tls.Server(nc, cfg)
		if tc.Handshake() != nil {
			return
		}
		nc = tc
	}
	frame, err := wire.AppendFrame(nil, wire.Header{}, m, l)
	if err == nil {
		_, _ = nc.Write(frame)
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops accepting, ends every session (its locks released, its
// waiting requests failed) and every connection, and waits for them and
// the poller of idle connections.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for ln := range s.lns {
		_ = ln.Close()
	}
	sessions := make([]*session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		sessions = append(sessions, ss)
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	caches := s.caches
	s.caches = nil
	s.mu.Unlock()
	s.cancel()
	for _, ss := range sessions {
		ss.end()
	}
	s.answers.close()
	for _, c := range caches {
		_ = c.Close()
	}
	for _, c := range conns {
		c.close() // a parked one gets a reader, which ends it
	}
	s.wg.Wait()
	s.poll.close()
	s.met.group.Unregister()
	return nil
}

// Sessions returns how many sessions the server keeps, connected or not.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

func (s *Server) addSession(ss *session) {
	s.mu.Lock()
	s.sessions[ss.id] = ss
	s.mu.Unlock()
	s.met.sessions.Inc()
}

func (s *Server) removeSession(ss *session) {
	s.mu.Lock()
	_, ok := s.sessions[ss.id]
	delete(s.sessions, ss.id)
	s.mu.Unlock()
	if ok {
		s.met.sessions.Dec()
	}
}

// cache returns the shared-lock cache of ls, making it.
func (s *Server) cache(ls *dlm.Lockspace) (*dlm.Cache, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, dlm.ErrClosed
	}
	if c := s.caches[ls.Name()]; c != nil {
		return c, nil
	}
	c, err := ls.NewCache(dlm.DefaultCacheConfig())
	if err != nil {
		return nil, err
	}
	if s.caches == nil {
		s.caches = map[string]*dlm.Cache{}
	}
	s.caches[ls.Name()] = c
	return c, nil
}

// holdID is the id a cache hold is named by: its high bit tells it from
// lock ids (a node's counter, started at a random point below 2^40, shifted
// over the shard's byte: below 2^63 for as long as a node can live).
func (s *Server) holdID() uint64 { return s.holdIDs.Add(1) | 1<<63 }

func (s *Server) session(id uint64) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}
