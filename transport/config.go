package transport

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Config configures a Links. Start from DefaultConfig, set the identity,
// StreamLayer and Handler, then call New (which calls Validate).
type Config struct {
	// Name is this node's name in the cluster, 1..wire.MaxNodeName bytes.
	// Peers check it against the name they dialled.
	Name string
	// ClusterID names the cluster, 1..wire.MaxClusterID bytes. Connections
	// from or to a node of another cluster are refused at the handshake.
	ClusterID string
	// BootID identifies this process start; peers use it to tell a restart
	// from a reconnect. 0 means New picks a random one.
	BootID uint64
	// StreamLayer listens for and dials connections: ListenTCP for real
	// networks, memnet's listener in tests. The Links closes it on Close.
	StreamLayer StreamLayer
	// Handler receives every incoming request and one-way message, on the
	// goroutine reading the connection. Required. See Handler for its rules.
	Handler Handler
	// Limits bound frames and message fields, in both directions.
	Limits wire.Limits
	// WriteBufferLimit is how many bytes may wait in one peer's write buffer.
	// Past it the link is failed (ErrWriteBufferFull) instead of blocking the
	// sender or growing. Default 8 MiB: at 100 B a message, 80k messages, far
	// more than a healthy peer ever lags.
	WriteBufferLimit int
	// DialTimeout bounds one connection attempt. A node that waits to be
	// dialled (its peer's name sorts first) queues messages for a new peer
	// for DialTimeout plus HandshakeTimeout before they fail fast. Default 2 s.
	DialTimeout time.Duration
	// HandshakeTimeout bounds the TLS and Hello exchange after the dial.
	// Default 2 s.
	HandshakeTimeout time.Duration
	// WriteTimeout bounds one flush of the write buffer; a peer that does not
	// read for that long fails the link. Default 5 s.
	WriteTimeout time.Duration
	// HeartbeatInterval is how often each end of a link sends a Ping, so
	// that both see traffic even when idle. Default 500 ms.
	HeartbeatInterval time.Duration
	// IdleTimeout fails a connection on which nothing arrived for that long
	// (at most 9/8 of it: the read deadline moves in eighths): a peer that
	// vanished without closing (power loss, partition). Must be at least
	// twice HeartbeatInterval. Default 3 s.
	IdleTimeout time.Duration
	// OnLinkDown, if set, is called when an established connection to a
	// peer goes down. Within SessionTimeout nothing sent on it is lost: the
	// next connection resends it (OnSessionLost says when that failed). It
	// runs on the peer's manager goroutine and must not block.
	OnLinkDown func(peer string, err error)
	// SessionTimeout is how long a link's session outlives a broken
	// connection: frames sent meanwhile queue (within WriteBufferLimit),
	// and on the next connection each end resends what the other did not
	// handle, so that nothing is lost and nothing arrives twice (see
	// "Sessions" in the package doc). Past it, or past WriteBufferLimit,
	// the session ends: what was not delivered is lost (OnSessionLost)
	// and sends fail fast with ErrUnreachable until the next connection.
	// 0 ends a session with its connection. Default 30 s: longer than any
	// reconnection between live nodes, short enough that a dead peer's
	// queue does not linger.
	SessionTimeout time.Duration
	// OnSessionLost, if set, is called when frames sent to a peer, or by
	// it, may have been lost for good: a session ended before it was
	// delivered (timeout, overflow, bad input), or the peer started a new
	// one that did not resume this node's. A peer that restarted (a new
	// boot) is reported too. It runs on a library goroutine and must not
	// block. A protocol that needs every message (dlm's) resynchronises
	// with the peer then.
	OnSessionLost func(peer string, err error)
	// Backoff spaces reconnection attempts to an unreachable peer.
	Backoff Backoff
	// Seed seeds the backoff jitter. 0 means derive it from BootID.
	Seed uint64
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
	// Registerer receives the metrics; nil means no metrics are registered.
	// Wrap it (prometheus.WrapRegistererWith) to run several Links in one
	// process.
	Registerer prometheus.Registerer

	// watcherPark replaces the const of that name when set: only tests
	// do (export_test.go), to tell a piggybacked message that left with
	// the next one from one the parked watcher took along.
	watcherPark time.Duration
}

// Backoff is a capped, jittered exponential backoff: attempt n waits
// min(Max, Initial·Multiplier^(n-1)), scaled by a random factor in
// [1-Jitter, 1].
type Backoff struct {
	// Initial is the wait before the first retry. Default 50 ms.
	Initial time.Duration
	// Max caps the wait. Default 2 s.
	Max time.Duration
	// Multiplier grows the wait per failed attempt, ≥ 1. Default 2.
	Multiplier float64
	// Jitter in [0, 1] is the fraction of the wait that is randomised, so
	// that nodes that lost a peer together do not redial in lockstep.
	// Default 0.5.
	Jitter float64
}

// DefaultConfig returns a Config with every tunable set to the default
// documented on its field. Name, ClusterID, StreamLayer and Handler are left
// for the caller.
func DefaultConfig() Config {
	return Config{
		Limits:            wire.DefaultLimits(),
		WriteBufferLimit:  8 << 20,
		DialTimeout:       2 * time.Second,
		HandshakeTimeout:  2 * time.Second,
		WriteTimeout:      5 * time.Second,
		HeartbeatInterval: 500 * time.Millisecond,
		IdleTimeout:       3 * time.Second,
		SessionTimeout:    30 * time.Second,
		Backoff:           Backoff{Initial: 50 * time.Millisecond, Max: 2 * time.Second, Multiplier: 2, Jitter: 0.5},
	}
}

// Validate reports the first problem with c, or nil.
func (c *Config) Validate() error {
	var errs []error
	check := func(bad bool, format string, args ...any) {
		if bad {
			errs = append(errs, fmt.Errorf("transport: "+format, args...))
		}
	}
	check(c.Name == "" || len(c.Name) > wire.MaxNodeName, "Name must be 1..%d bytes", wire.MaxNodeName)
	check(c.ClusterID == "" || len(c.ClusterID) > wire.MaxClusterID, "ClusterID must be 1..%d bytes", wire.MaxClusterID)
	check(c.StreamLayer == nil, "StreamLayer is required")
	check(c.Handler == nil, "Handler is required")
	if err := c.Limits.Validate(); err != nil {
		errs = append(errs, err)
	}
	check(c.WriteBufferLimit < c.Limits.MaxFrame+wire.PrefixSize, "WriteBufferLimit %d must hold one largest frame (%d)", c.WriteBufferLimit, c.Limits.MaxFrame+wire.PrefixSize)
	check(c.DialTimeout <= 0 || c.HandshakeTimeout <= 0 || c.WriteTimeout <= 0, "timeouts must be positive")
	check(c.HeartbeatInterval <= 0, "HeartbeatInterval must be positive")
	check(c.IdleTimeout < 2*c.HeartbeatInterval, "IdleTimeout %v must be at least twice HeartbeatInterval %v", c.IdleTimeout, c.HeartbeatInterval)
	check(c.SessionTimeout < 0, "SessionTimeout must not be negative")
	b := c.Backoff
	check(b.Initial <= 0 || b.Max < b.Initial, "Backoff needs 0 < Initial ≤ Max")
	check(b.Multiplier < 1, "Backoff.Multiplier must be ≥ 1")
	check(b.Jitter < 0 || b.Jitter > 1, "Backoff.Jitter must be in [0, 1]")
	return errors.Join(errs...)
}

// wait returns the backoff before attempt n (n ≥ 1), given u uniform in [0, 1).
func (b Backoff) wait(n int, u float64) time.Duration {
	d := float64(b.Initial)
	for i := 1; i < n && d < float64(b.Max); i++ {
		d *= b.Multiplier
	}
	d = min(d, float64(b.Max))
	return time.Duration(d * (1 - b.Jitter*u))
}
