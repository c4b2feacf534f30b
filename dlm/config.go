package dlm

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/master"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/membership"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Config configures a node. Start from DefaultConfig and set at least Name,
// Members and the addresses.
type Config struct {
	// Name is this node's name, unique in the cluster (memberlist's node
	// name). It must be one of Members.
	Name string
	// ClusterID names the cluster; nodes of another cluster are refused, on
	// gossip and on lock traffic.
	ClusterID string
	// Members is the configured membership: every node that may be part of
	// the cluster, by name. Quorum is a majority of it: Start returns once
	// this node is in a view agreed by a quorum (the first view waits about
	// a second for the others), and a node serves only while a quorum
	// acknowledges it.
	Members []string
	// DataDir is a directory (made if missing) where the node keeps what
	// must survive a restart: the cluster configuration after a membership
	// change (AddMember, RemoveMember, ReplaceMember), in membership.json,
	// which then replaces Members. Empty: nothing is kept, and every start
	// uses Members, which the operator must then update after a change.
	DataDir string
	// Seeds are gossip addresses ("host:port") of other nodes to join.
	// Empty for the first node of a cluster.
	Seeds []string

	// LinkAddr is where lock traffic is accepted ("host:port"; port 0 picks
	// one). Ignored when Streams is set.
	LinkAddr string
	// GossipAddr is where memberlist binds ("host:port"; port 0 picks one).
	// Ignored when GossipTransport is set.
	GossipAddr string
	// LinkAdvertiseAddr and GossipAdvertiseAddr, when set, are the
	// addresses peers are told to reach this node at, instead of the bound
	// ones: behind NAT or in a container the two differ. Empty means the
	// bound address (memberlist picks a private address of the host when
	// GossipAddr binds every interface; a link bound to every interface
	// needs LinkAdvertiseAddr).
	LinkAdvertiseAddr   string
	GossipAdvertiseAddr string
	// Tags are small key/value pairs this node gossips about itself; the
	// cluster does not interpret them, Status lists every member's. The
	// dlmnode agent puts its admin URL here. At most 8 tags of 160 bytes
	// in all (keys 1..32 bytes, values up to 128).
	Tags map[string]string
	// TLS, when set, turns on mutual TLS for lock traffic: this node's
	// certificate, which must carry its identity (transport.Identity:
	// dlm://<ClusterID>/node/<Name>), and the cluster's CAs. A peer is
	// refused unless its certificate is from those CAs and names the node
	// it says it is. Without it, and off loopback, Start logs a warning
	// (see Exposures). Rotate it to renew certificates while the node runs.
	TLS *transport.TLSConfig
	// GossipKey, when set (16, 24 or 32 bytes), encrypts and authenticates
	// gossip with AES-GCM: only holders of the key take part. Without it,
	// and off loopback, Start logs a warning (see Exposures).
	GossipKey []byte

	// Streams replaces the TCP listener for lock traffic (tests use the
	// in-process network, transport/memnet).
	Streams transport.StreamLayer
	// GossipTransport replaces memberlist's UDP/TCP transport (memnet too).
	GossipTransport memberlist.NodeAwareTransport

	// DefaultLockspace configures lockspaces not named in Lockspaces.
	DefaultLockspace LockspaceConfig
	// Lockspaces configures named lockspaces. Every node must agree on them:
	// the master of a resource enforces its own lockspace's limits.
	Lockspaces map[string]LockspaceConfig

	// MaxLocks caps the locks this node holds or waits for, in all
	// lockspaces, so a runaway client gets ErrLimit instead of exhausting
	// memory. Zero means no limit.
	MaxLocks int
	// Shards is the number of independent lock tables (each with its own
	// mutex) per lockspace, a power of two up to 256. More shards, less
	// contention between goroutines locking different resources.
	Shards int
	// TickInterval is how often queued requests are checked for timeouts and
	// TTL locks for expiry. It bounds how late a timeout fires.
	TickInterval time.Duration
	// ClockDrift is the largest rate error assumed between two nodes'
	// clocks (0.01 = 1%). A TTL holder considers its lock lost this much
	// earlier, so it stops before any master could release the lock.
	ClockDrift float64

	// DeadlockWait is how long a request must have waited before deadlock
	// detection across resources and nodes looks at it (VMS's
	// DEADLOCK_WAIT): every node reports the wait-for edges of requests
	// that have waited that long to the detector, which fails one request
	// of each cycle it confirms (ErrDeadlock). A cycle is broken about
	// DeadlockWait plus one or two report intervals (DeadlockWait/4, at
	// least TickInterval) after it formed. Shorter finds deadlocks sooner
	// and costs more reports while locks are contended. Zero turns the
	// detection off; conversion deadlocks on one resource are still found
	// at once. See the package documentation.
	DeadlockWait time.Duration

	// Lease is the quorum lease: a node serves only while a quorum of the
	// configured members acknowledged one of its heartbeats within the last
	// Lease. It also sets the lock-delay: a removed node's locks go to
	// others about Lease·(1+ρ)/(1−ρ) + 250 ms after it was last heard.
	Lease time.Duration
	// HeartbeatInterval is how often the lease is renewed.
	HeartbeatInterval time.Duration

	// Membership tunes failure detection; see transport/membership.
	ProbeInterval time.Duration
	// ProbeTimeout: see ProbeInterval.
	ProbeTimeout time.Duration

	// Logger receives the node's logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the node's metrics; nil registers none. Wrap it
	// with a node label to run several nodes in one process.
	Registerer prometheus.Registerer
}

// LockspaceConfig configures one lockspace (an independent namespace of
// resources).
type LockspaceConfig struct {
	// MaxLVB is the largest lock value block, in bytes (VMS: 16 or 64;
	// Linux: lvblen). At most 4096.
	MaxLVB int
	// MaxNameLen caps resource names, in bytes. At most 4096.
	MaxNameLen int
	// MaxWaitersPerResource caps the requests queued on one resource; more
	// get ErrLimit. Zero means no limit.
	MaxWaitersPerResource int
	// MaxLocksPerNode caps the locks one node may have mastered here in this
	// lockspace. Zero means no limit.
	MaxLocksPerNode int
}

// DefaultConfig returns a configuration for a node on loopback with
// ephemeral ports. Name and Members must still be set.
func DefaultConfig() Config {
	return Config{
		ClusterID:         "dlm",
		LinkAddr:          "127.0.0.1:0",
		GossipAddr:        "127.0.0.1:0",
		DefaultLockspace:  DefaultLockspaceConfig(),
		MaxLocks:          1 << 20,
		Shards:            16,
		TickInterval:      5 * time.Millisecond,
		DeadlockWait:      2 * time.Second,
		ClockDrift:        0.01,
		Lease:             1500 * time.Millisecond,
		HeartbeatInterval: 250 * time.Millisecond,
		ProbeInterval:     200 * time.Millisecond,
		ProbeTimeout:      100 * time.Millisecond,
	}
}

// DefaultLockspaceConfig returns the limits of a lockspace unless configured
// otherwise.
func DefaultLockspaceConfig() LockspaceConfig {
	d := master.DefaultConfig()
	return LockspaceConfig{
		MaxLVB:                d.MaxLVB,
		MaxNameLen:            d.MaxNameLen,
		MaxWaitersPerResource: d.MaxWaitersPerResource,
		MaxLocksPerNode:       d.MaxLocksPerNode,
	}
}

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("dlm: invalid config")

// Validate reports what is wrong with the configuration, if anything.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.Name == "" || len(c.Name) > wire.MaxNodeName {
		bad("Name must be 1..%d bytes", wire.MaxNodeName)
	}
	if c.ClusterID == "" || len(c.ClusterID) > wire.MaxClusterID {
		bad("ClusterID must be 1..%d bytes", wire.MaxClusterID)
	}
	c.validateMembers(bad)
	if c.Streams == nil && c.LinkAddr == "" {
		bad("LinkAddr or Streams is required")
	}
	if c.GossipTransport == nil && c.GossipAddr == "" {
		bad("GossipAddr or GossipTransport is required")
	}
	for field, addr := range map[string]string{"LinkAdvertiseAddr": c.LinkAdvertiseAddr, "GossipAdvertiseAddr": c.GossipAdvertiseAddr} {
		if addr == "" {
			continue
		}
		if host, port, err := splitHostPort(addr); err != nil || host == "" || port <= 0 || port > 65535 {
			bad("%s %q must be host:port with a host and a port", field, addr)
		} else if field == "GossipAdvertiseAddr" && net.ParseIP(host) == nil {
			bad("GossipAdvertiseAddr %q must have an IP address, not a host name (memberlist gossips IPs)", addr)
		}
	}
	if err := membership.ValidateTags(c.Tags); err != nil {
		bad("Tags: %v", err)
	} else {
		c.validateTags(bad)
	}
	if c.TLS != nil {
		want := transport.Identity{Cluster: c.ClusterID, Role: transport.RoleNode, Name: c.Name}
		if id, err := c.TLS.Identity(); err != nil {
			bad("TLS: %v", err)
		} else if id != want {
			bad("TLS: the certificate is %s; this node is %s", id, want)
		}
	}
	if n := len(c.GossipKey); n != 0 && n != 16 && n != 24 && n != 32 {
		bad("GossipKey must be 16, 24 or 32 bytes, not %d", n)
	}
	if err := c.DefaultLockspace.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: DefaultLockspace: %w", ErrInvalidConfig, err))
	}
	for name, ls := range c.Lockspaces {
		if err := checkLockspaceName(name); err != nil {
			bad("lockspace %q: %v", name, err)
		}
		if err := ls.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%w: lockspace %q: %w", ErrInvalidConfig, name, err))
		}
	}
	if c.MaxLocks < 0 {
		bad("MaxLocks must not be negative")
	}
	if c.Shards < 1 || c.Shards > 256 || c.Shards&(c.Shards-1) != 0 {
		bad("Shards must be a power of two in 1..256, not %d", c.Shards)
	}
	if c.TickInterval <= 0 {
		bad("TickInterval must be positive")
	}
	if c.DeadlockWait < 0 {
		bad("DeadlockWait must not be negative")
	}
	if c.ClockDrift < 0 || c.ClockDrift >= 0.5 {
		bad("ClockDrift must be in [0, 0.5)")
	}
	if c.Lease <= 0 || c.HeartbeatInterval <= 0 || 2*c.HeartbeatInterval > c.Lease {
		bad("need 0 < 2·HeartbeatInterval ≤ Lease")
	}
	if c.ProbeInterval <= 0 || c.ProbeTimeout <= 0 || c.ProbeTimeout > c.ProbeInterval {
		bad("need 0 < ProbeTimeout <= ProbeInterval")
	}
	return errors.Join(errs...)
}

func (c *Config) validateMembers(bad func(string, ...any)) {
	if len(c.Members) == 0 {
		bad("Members must list the cluster's nodes")
		return
	}
	seen := map[string]bool{}
	ids := map[uint32]string{}
	for _, m := range c.Members {
		if m == "" || len(m) > wire.MaxNodeName {
			bad("member name %q must be 1..%d bytes", m, wire.MaxNodeName)
		}
		if seen[m] {
			bad("member %q listed twice", m)
		}
		seen[m] = true
		id := uint32(nodeID(m))
		if other, dup := ids[id]; dup {
			bad("members %q and %q hash to the same node id; rename one", other, m)
		}
		ids[id] = m
	}
	if !seen[c.Name] {
		bad("Name %q is not one of Members", c.Name)
	}
}

// Validate reports what is wrong with the lockspace configuration.
func (c LockspaceConfig) Validate() error { return c.tableConfig().Validate() }

func (c LockspaceConfig) tableConfig() master.Config {
	return master.Config{
		MaxNameLen:            c.MaxNameLen,
		MaxLVB:                c.MaxLVB,
		MaxLocksPerNode:       c.MaxLocksPerNode,
		MaxWaitersPerResource: c.MaxWaitersPerResource,
	}
}

func (c *Config) lockspace(name string) LockspaceConfig {
	if ls, ok := c.Lockspaces[name]; ok {
		return ls
	}
	return c.DefaultLockspace
}

func checkLockspaceName(name string) error {
	if name == "" || len(name) > wire.MaxLockspace {
		return fmt.Errorf("%w: lockspace name must be 1..%d bytes", ErrInvalidName, wire.MaxLockspace)
	}
	return nil
}
