package recovery

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a Manager.
type Config struct {
	// Name and BootID identify this node; BootID changes at every process
	// start.
	Name   string
	BootID uint64
	// Members is the configured cluster: every node that may be a member.
	// A view needs a quorum of it, floor(len/2)+1. It is the configuration
	// of version 0; a configuration stored in StateDir replaces it.
	Members []string
	// StateDir, if set, is a directory where the node keeps the cluster
	// configuration it last agreed to (StateFile), so that a restart after
	// a membership change uses the new member set. Empty: nothing is
	// stored, and every start begins from Members.
	StateDir string
	// OnConfiguration, if set, is called with every configuration this node
	// adopts (after storing it), without the Manager's mutex. It must not
	// block.
	OnConfiguration func(Configuration)

	// Lease is L: a node serves (masters, holds locks) only while a quorum
	// (counting itself) has acknowledged a heartbeat it sent within the
	// last L, measured on its own clock from when it sent the heartbeat.
	Lease time.Duration
	// HeartbeatInterval is how often heartbeats go to every peer; a few
	// per Lease so that one lost heartbeat does not cost the lease.
	HeartbeatInterval time.Duration
	// ClockDrift is ρ, the largest rate error between two nodes' clocks.
	ClockDrift float64
	// MaxDelay is δ+s: the longest a message can take plus scheduling
	// slack. With Lease and ClockDrift it sets the lock-delay: a removed
	// node's locks are re-granted only L(1+ρ)/(1−ρ) + δ + s after the last
	// heartbeat acknowledgement any survivor gave it.
	MaxDelay time.Duration
	// Settle is how long the first view waits for every configured member
	// once a quorum is up, so that a cluster starting together forms one
	// view instead of a quorum view followed by joins.
	Settle time.Duration
	// ProposeTimeout bounds one proposal round; StatusInterval is how often
	// a member repeats its recovery status until the next phase arrives.
	ProposeTimeout time.Duration
	StatusInterval time.Duration
	// CoordinatorInterval is how often a node checks whether it should
	// propose a new view.
	CoordinatorInterval time.Duration

	// OnRecovered, if set, is called with the durations of every recovery
	// completed here, on the recovery's goroutine, after locking resumed.
	// It must not block.
	OnRecovered func(Stats)

	// Logger receives the manager's logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the manager's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// DefaultConfig returns the timing the package documentation derives:
// a 1.5 s lease renewed every 250 ms, 1% drift, 250 ms of delay and slack,
// so a crashed node's locks are re-granted about 1.8 s after it was last
// acknowledged.
func DefaultConfig() Config {
	return Config{
		Lease:               1500 * time.Millisecond,
		HeartbeatInterval:   250 * time.Millisecond,
		ClockDrift:          0.01,
		MaxDelay:            250 * time.Millisecond,
		Settle:              time.Second,
		ProposeTimeout:      time.Second,
		StatusInterval:      100 * time.Millisecond,
		CoordinatorInterval: 50 * time.Millisecond,
	}
}

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("recovery: invalid config")

// Validate reports what is wrong with c.
func (c *Config) Validate() error {
	var errs []error
	bad := func(f string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+f, append([]any{ErrInvalidConfig}, a...)...))
	}
	if c.Name == "" || !slices.Contains(c.Members, c.Name) {
		bad("Name %q must be one of Members", c.Name)
	}
	if c.BootID == 0 {
		bad("BootID must not be zero")
	}
	if c.Lease <= 0 || c.HeartbeatInterval <= 0 || c.HeartbeatInterval*2 > c.Lease {
		bad("need 0 < 2·HeartbeatInterval ≤ Lease")
	}
	if c.ClockDrift < 0 || c.ClockDrift >= 0.5 {
		bad("ClockDrift must be in [0, 0.5)")
	}
	if c.MaxDelay < 0 || c.Settle < 0 {
		bad("MaxDelay and Settle must not be negative")
	}
	if c.ProposeTimeout <= 0 || c.StatusInterval <= 0 || c.CoordinatorInterval <= 0 {
		bad("ProposeTimeout, StatusInterval and CoordinatorInterval must be positive")
	}
	return errors.Join(errs...)
}

// LockDelay is how long after the last acknowledgement it gave a node a
// survivor waits before that node's locks may be granted to others:
// L(1+ρ)/(1−ρ) + δ + s (membership.md §5.3). The holder's lease ends at
// most L after it sent the heartbeat that ack answered, on a clock that
// may run slow by ρ; the survivor's clock may run fast by ρ.
func (c Config) LockDelay() time.Duration {
	return time.Duration(float64(c.Lease)*(1+c.ClockDrift)/(1-c.ClockDrift)) + c.MaxDelay
}
