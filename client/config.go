package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Config configures a client. Start from DefaultConfig and set Addrs.
type Config struct {
	// Addrs are agents' client ports ("host:port"). The client connects to
	// the first that answers, and moves to the next when its agent is lost.
	Addrs []string
	// Name identifies the client in the agent's logs.
	Name string
	// Token is the agents' shared token, if they require one.
	Token string
	// TLS, when set, connects with TLS; for the cluster's mutual TLS, make
	// it with LoadTLS from a client certificate (agents refuse node
	// certificates on the client port).
	TLS *tls.Config
	// SessionTTL is how long the session outlives a client that stopped
	// keeping it alive (and how long a dropped connection may take to come
	// back, at most): a dead client's locks wait that long for others. 0
	// takes the agent's default.
	SessionTTL time.Duration
	// DialTimeout bounds each connection attempt.
	DialTimeout time.Duration
	// ClockDrift is the largest rate error assumed between the client's
	// clock and the agent's (0.01 = 1%): the client stops trusting its
	// locks that much earlier than the agent's answers allow.
	ClockDrift float64
	// LostGrace is how long after the client stops trusting a lock (its
	// Lost closes) it gives the lock back to the agent, which may still
	// hold it. Until then nobody else is granted it, so a program that
	// watches Lost has that long to stop using the lock before another
	// holder starts; after it, others need not wait for the agent to end
	// the session. Default 100 ms: more than a goroutine's scheduling delay
	// on a loaded machine, little next to a session TTL. 0 gives locks
	// back at once.
	LostGrace time.Duration
	// Logger receives the client's logs; nil discards them.
	Logger *slog.Logger
}

// DefaultConfig returns a configuration with the defaults described on
// each field.
func DefaultConfig() Config {
	return Config{DialTimeout: 5 * time.Second, ClockDrift: 0.01, LostGrace: 100 * time.Millisecond}
}

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("client: invalid config")

// Validate reports what is wrong with the configuration.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if len(c.Addrs) == 0 {
		bad("at least one agent address is needed")
	}
	if len(c.Name) > wire.MaxNodeName {
		bad("Name must be at most %d bytes", wire.MaxNodeName)
	}
	if len(c.Token) > wire.MaxToken {
		bad("Token must be at most %d bytes", wire.MaxToken)
	}
	if c.SessionTTL < 0 {
		bad("SessionTTL must not be negative")
	}
	if c.DialTimeout <= 0 {
		bad("DialTimeout must be positive")
	}
	if c.ClockDrift < 0 || c.ClockDrift >= 0.5 {
		bad("ClockDrift must be in [0, 0.5)")
	}
	if c.LostGrace < 0 {
		bad("LostGrace must not be negative")
	}
	return errors.Join(errs...)
}
