package clientport

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Config configures a client port. Start from DefaultConfig and set Node.
type Config struct {
	// Node is the agent's node: clients' locks are its locks.
	Node *dlm.Node
	// Token, when set, must be in every ClientHello (compared in constant
	// time). Use it, or TLS, or both, on any port reachable beyond loopback.
	Token string
	// TLS, when set, turns on mutual TLS: the agent presents its node
	// certificate, and admits only clients that present a client
	// certificate (transport.RoleClient) of its cluster from the cluster's
	// CAs. Node certificates are refused here as client certificates are
	// on the links. Rotating it (TLSConfig.Rotate) applies to the
	// connections made after.
	TLS *transport.TLSConfig

	// MaxConnections caps the agent's client connections: enough for
	// thousands of clients, few enough that a flood of connections cannot
	// exhaust the agent's memory or file descriptors.
	MaxConnections int
	// MaxLocks caps the locks a session holds or waits for: a runaway
	// client gets CodeLimit instead of filling the agent.
	MaxLocks int
	// MaxPending caps a session's unanswered requests (waiting locks and
	// conversions, keep-alives in flight). A client needs one per waiting
	// lock; 1024 covers pipelining without letting one client park
	// unbounded work on the agent.
	MaxPending int
	// MaxFrame is the largest frame accepted from a client. A request is
	// under 400 bytes and a value block under 4 KiB, so 64 KiB leaves room
	// and bounds what a bad frame can cost.
	MaxFrame int
	// ReadBuffer is each connection's read buffer. Requests are small (a
	// lock request is about 50 bytes, so one read still takes many); a
	// frame larger than the buffer is read into a scratch buffer that grows
	// as its bytes arrive. Small, because every idle connection keeps one.
	ReadBuffer int
	// MaxOutbox caps the bytes waiting for one client (replies and pushes
	// it has not read, or queued while it reconnects); past it the client
	// is too slow or gone, and its connection (or detached session) ends.
	// It caps, too, the notes a protocol 2 session keeps of frames its
	// client has not acknowledged; lost-lock pushes are held back while
	// those take half of it, so that losing many locks at once ends no
	// session whose client acknowledges as it reads.
	MaxOutbox int
	// HelloTimeout is how long a new connection has to send its ClientHello
	// (and complete TLS): what a slowloris connection gets.
	HelloTimeout time.Duration
	// DefaultTTL is a session's TTL when its ClientHello asks for none:
	// how long it outlives a client that stopped keeping it alive, or a
	// dropped connection. 10 s rides out a short network blip.
	DefaultTTL time.Duration
	// ParkAfter is how long a plain (not TLS) connection stays silent
	// between frames before its reading goroutine hands it to the agent's
	// poller and exits, on Linux: an idle connection then costs the
	// agent its books, not a goroutine's stack and a read buffer. It parks
	// after between ParkAfter and twice it, or at once after its Welcome
	// if nothing more came. A second is long against a request's round
	// trip, so busy connections do not park, and short against the
	// keep-alives (every TTL/3), so idle ones do. 0 never parks.
	ParkAfter time.Duration
	// MinTTL and MaxTTL bound the TTL a client may ask for: below a second
	// keep-alives would be all a client does; past five minutes a dead
	// client's locks wait too long.
	MinTTL, MaxTTL time.Duration

	// Logger receives the port's logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the port's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// DefaultConfig returns the defaults described on each field.
func DefaultConfig() Config {
	return Config{
		MaxConnections: 10000,
		MaxLocks:       100000,
		MaxPending:     1024,
		MaxFrame:       64 << 10,
		ReadBuffer:     512,
		MaxOutbox:      4 << 20,
		HelloTimeout:   5 * time.Second,
		ParkAfter:      time.Second,
		DefaultTTL:     10 * time.Second,
		MinTTL:         time.Second,
		MaxTTL:         5 * time.Minute,
	}
}

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("clientport: invalid config")

// Validate reports what is wrong with the configuration, if anything.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.Node == nil {
		bad("Node is required")
	}
	if len(c.Token) > wire.MaxToken {
		bad("Token must be at most %d bytes", wire.MaxToken)
	}
	for name, v := range map[string]int{"MaxConnections": c.MaxConnections, "MaxLocks": c.MaxLocks, "MaxPending": c.MaxPending} {
		if v < 1 {
			bad("%s must be positive", name)
		}
	}
	if c.MaxPending > wire.MaxResumeWaiting {
		bad("MaxPending must be at most %d (wire.MaxResumeWaiting): a resuming client names every request it waits for", wire.MaxResumeWaiting)
	}
	if c.MaxFrame < 1024 || c.MaxFrame > 1<<20 {
		bad("MaxFrame must be in [1 KiB, 1 MiB], not %d", c.MaxFrame)
	}
	if c.ReadBuffer < 256 {
		bad("ReadBuffer must be at least 256 bytes")
	}
	if c.MaxOutbox < 2*c.MaxFrame {
		bad("MaxOutbox must hold two frames (%d)", 2*c.MaxFrame)
	}
	if c.HelloTimeout <= 0 {
		bad("HelloTimeout must be positive")
	}
	if c.ParkAfter < 0 {
		bad("ParkAfter must not be negative (0 never parks)")
	}
	if c.MinTTL <= 0 || c.MinTTL > c.MaxTTL || c.DefaultTTL < c.MinTTL || c.DefaultTTL > c.MaxTTL {
		bad("need 0 < MinTTL ≤ DefaultTTL ≤ MaxTTL")
	}
	if c.TLS != nil {
		if _, err := c.TLS.ServerConfig(); err != nil {
			bad("TLS: %v", err)
		} else if id, _ := c.TLS.Identity(); id.Role != transport.RoleNode {
			bad("TLS: the agent's certificate is %s; clients accept only a node's", id)
		}
	}
	return errors.Join(errs...)
}

// limits are the wire limits of a client connection: the frame the
// config allows, the names and value blocks any lockspace may use.
func (c *Config) limits() wire.Limits {
	l := wire.DefaultLimits()
	l.MaxFrame = c.MaxFrame
	return l
}
