package membership

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Config configures a Membership. Start from DefaultConfig; see the package
// documentation for how the timing defaults were derived.
type Config struct {
	// Name is this node's unique name in the cluster.
	Name string
	// ClusterID names the cluster; nodes of another cluster are refused.
	ClusterID string
	// BootID identifies this process start; 0 means pick a random one.
	BootID uint64
	// ProtocolVersion is the links' protocol version, gossiped in the meta.
	// Default wire.LinkVersion.
	ProtocolVersion uint8
	// LinkAddr is the "host:port" where this node's links accept
	// connections; peers learn it from the meta.
	LinkAddr string
	// Tags are gossiped in the meta for peers to read (Member.Tags); see
	// Meta.Tags for their limits.
	Tags map[string]string

	// Transport carries gossip. nil means memberlist's own UDP+TCP transport
	// on BindAddr:BindPort; tests pass a memnet transport.
	Transport memberlist.NodeAwareTransport
	// BindAddr and BindPort are used when Transport is nil. Port 0 picks one.
	BindAddr string
	BindPort int
	// AdvertiseAddr and AdvertisePort, when set, are the address gossiped to
	// peers instead of the bound one.
	AdvertiseAddr string
	AdvertisePort int

	// Seeds are the addresses to join at start and to re-join periodically,
	// "host:port" or "name/host:port". List every node, or at least one on
	// each side of any partition you want to heal.
	Seeds []string
	// RejoinInterval is how often seeds that are not alive members are
	// joined again, so that a partition longer than GossipToTheDeadTime heals
	// (trap T6). Default GossipToTheDeadTime/2; negative disables.
	RejoinInterval time.Duration

	// SecretKey, when set (16, 24 or 32 bytes), encrypts all gossip with
	// AES-GCM. Set it in production.
	SecretKey []byte
	// Label is bound into every gossip packet (and the encryption's
	// additional data); nodes with another label ignore each other. Give
	// each cluster, and each test cluster, its own.
	Label string

	// ProbeInterval is the failure detector's probe period. Default 200 ms.
	ProbeInterval time.Duration
	// ProbeTimeout is how long to wait for a direct probe's ack before
	// trying indirect probes; about the 99th percentile RTT, with margin.
	// Default 100 ms.
	ProbeTimeout time.Duration
	// IndirectChecks is how many peers are asked to probe a node that missed
	// a direct probe. Default 3.
	IndirectChecks int
	// SuspicionMult scales the minimum suspicion timeout (see package doc).
	// Default 3.
	SuspicionMult int
	// SuspicionMaxTimeoutMult scales the maximum suspicion timeout from the
	// minimum. Default 2.
	SuspicionMaxTimeoutMult int
	// GossipInterval and GossipNodes: every interval, gossip to that many
	// random nodes. Defaults 100 ms and 3.
	GossipInterval time.Duration
	GossipNodes    int
	// RetransmitMult: each broadcast is retransmitted RetransmitMult ×
	// log(n+1) times. Default 4.
	RetransmitMult int
	// GossipToTheDeadTime is how long dead nodes keep receiving gossip
	// before they are forgotten. Default 10 s.
	GossipToTheDeadTime time.Duration
	// PushPullInterval is the full state sync period. Default 10 s.
	PushPullInterval time.Duration
	// TCPTimeout bounds push/pull and TCP probe connections. Default 1 s.
	TCPTimeout time.Duration
	// LeaveTimeout bounds the leave broadcast on Close. Default 1 s.
	LeaveTimeout time.Duration

	// OnEvent receives membership events, one at a time and in order, on a
	// library goroutine. It may block: events queue (unbounded) behind it,
	// memberlist never waits for it. Required.
	OnEvent func(Event)
	// Logger receives memberlist's log lines and membership's own; nil
	// discards them.
	Logger *slog.Logger
	// Registerer receives the metrics; nil means none are registered.
	Registerer prometheus.Registerer
}

// DefaultConfig returns the defaults documented on each field.
func DefaultConfig() Config {
	return Config{
		ProtocolVersion:         wire.LinkVersion,
		BindAddr:                "127.0.0.1",
		ProbeInterval:           200 * time.Millisecond,
		ProbeTimeout:            100 * time.Millisecond,
		IndirectChecks:          3,
		SuspicionMult:           3,
		SuspicionMaxTimeoutMult: 2,
		GossipInterval:          100 * time.Millisecond,
		GossipNodes:             3,
		RetransmitMult:          4,
		GossipToTheDeadTime:     10 * time.Second,
		PushPullInterval:        10 * time.Second,
		TCPTimeout:              time.Second,
		LeaveTimeout:            time.Second,
	}
}

// Validate reports the problems of c, or nil.
func (c *Config) Validate() error {
	var errs []error
	check := func(bad bool, format string, args ...any) {
		if bad {
			errs = append(errs, fmt.Errorf("membership: "+format, args...))
		}
	}
	check(c.Name == "", "Name is required")
	check(c.OnEvent == nil, "OnEvent is required")
	meta := Meta{Version: c.ProtocolVersion, BootID: 1, ClusterID: c.ClusterID, LinkAddr: c.LinkAddr, Tags: c.Tags}
	if err := meta.Validate(); err != nil {
		errs = append(errs, err)
	}
	check(len(c.SecretKey) != 0 && len(c.SecretKey) != 16 && len(c.SecretKey) != 24 && len(c.SecretKey) != 32,
		"SecretKey must be 16, 24 or 32 bytes, is %d", len(c.SecretKey))
	check(len(c.Label) > memberlist.LabelMaxSize, "Label longer than %d bytes", memberlist.LabelMaxSize)
	check(c.ProbeInterval <= 0 || c.ProbeTimeout <= 0 || c.ProbeTimeout >= c.ProbeInterval,
		"need 0 < ProbeTimeout < ProbeInterval")
	check(c.SuspicionMult < 1 || c.SuspicionMaxTimeoutMult < 1, "suspicion multipliers must be ≥ 1")
	check(c.IndirectChecks < 0 || c.GossipNodes < 1 || c.RetransmitMult < 1, "IndirectChecks ≥ 0, GossipNodes and RetransmitMult ≥ 1")
	check(c.GossipInterval <= 0 || c.GossipToTheDeadTime <= 0 || c.PushPullInterval <= 0 || c.TCPTimeout <= 0 || c.LeaveTimeout <= 0,
		"gossip, push/pull and TCP intervals must be positive")
	return errors.Join(errs...)
}

// rejoinInterval resolves the RejoinInterval default.
func (c *Config) rejoinInterval() time.Duration {
	if c.RejoinInterval == 0 {
		return c.GossipToTheDeadTime / 2
	}
	return c.RejoinInterval
}

// memberlistConfig maps c onto memberlist's configuration.
func (c *Config) memberlistConfig(d *delegate) *memberlist.Config {
	mc := memberlist.DefaultLANConfig()
	mc.Name = c.Name
	mc.BindAddr, mc.BindPort = c.BindAddr, c.BindPort
	mc.AdvertiseAddr, mc.AdvertisePort = c.AdvertiseAddr, c.AdvertisePort
	if c.Transport != nil {
		mc.Transport = c.Transport
	}
	mc.ProbeInterval, mc.ProbeTimeout = c.ProbeInterval, c.ProbeTimeout
	mc.IndirectChecks = c.IndirectChecks
	mc.SuspicionMult, mc.SuspicionMaxTimeoutMult = c.SuspicionMult, c.SuspicionMaxTimeoutMult
	mc.GossipInterval, mc.GossipNodes = c.GossipInterval, c.GossipNodes
	mc.RetransmitMult = c.RetransmitMult
	mc.GossipToTheDeadTime, mc.PushPullInterval = c.GossipToTheDeadTime, c.PushPullInterval
	mc.TCPTimeout = c.TCPTimeout
	// A dead node's name may be taken by a new address after this long
	// (host replacement, memberlist#157); 0 would mean never.
	mc.DeadNodeReclaimTime = c.GossipToTheDeadTime
	mc.SecretKey, mc.Label = c.SecretKey, c.Label
	mc.Delegate, mc.Events, mc.Alive, mc.Merge = d, d, d, d
	mc.Logger = newLogBridge(d.log)
	mc.LogOutput = nil
	return mc
}
