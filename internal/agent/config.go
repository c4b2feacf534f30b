package agent

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v4"
	"github.com/peterbourgon/ff/v4/fftoml"

	"github.com/seed-a6839e30/dlm/clientport"
	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Config is what an agent runs with: its flags, the DLM_* environment
// variables and the optional config file all set it (in that order of
// precedence). Start from DefaultConfig.
type Config struct {
	// Name is this node's name; it must be one of Members.
	Name string
	// ClusterID names the cluster: nodes of another refuse each other.
	// Default "dlm".
	ClusterID string
	// Members are the names of every node of the cluster; quorum is a
	// majority of them.
	Members []string
	// DataDir is where the node keeps the cluster configuration after a
	// membership change (dlm.Config.DataDir): a restart then uses the
	// stored member set instead of Members. Empty: nothing is stored.
	DataDir string
	// Seeds are gossip addresses of other nodes to join through.
	Seeds []string

	// GossipAddr and LinkAddr are where memberlist and the lock links
	// bind; their Advertise counterparts, when set, are what peers are told
	// (NAT, containers). Defaults 127.0.0.1:7946 and 127.0.0.1:7947: a
	// node exposes nothing until the operator names an interface.
	GossipAddr      string
	GossipAdvertise string
	LinkAddr        string
	LinkAdvertise   string

	// AdminAddr is where the admin HTTP server binds (default
	// 127.0.0.1:7948); AdminAdvertise is the host:port other agents reach
	// it at (default: the bound address, or the host of GossipAdvertise
	// with the admin port when it binds every interface).
	AdminAddr      string
	AdminAdvertise string
	// AdminTokenFile holds a bearer token that every admin endpoint but
	// /healthz and /readyz requires. Without one, the admin server binds
	// only to loopback unless AdminInsecure says otherwise.
	AdminTokenFile string
	AdminInsecure  bool

	// ClientAddr is where the client port binds: programs that run no node
	// lock through it (package client, dlmnode lock; docs/protocol.md).
	// Default 127.0.0.1:7949; empty turns it off.
	ClientAddr string
	// ClientTokenFile holds a token every client must present. Without it
	// (or ClientTLS), the client port binds only to loopback unless
	// ClientInsecure says otherwise.
	ClientTokenFile string
	// ClientTLS turns on mutual TLS on the client port with the cluster's
	// certificates (TLSCertFile, TLSKeyFile, TLSCAFile): clients present a
	// client certificate of the cluster that its CA signed; node
	// certificates are refused there, as client certificates are on the
	// links, so the two roles never overlap.
	ClientTLS      bool
	ClientInsecure bool
	// ClientMaxConnections, ClientMaxLocks, ClientMaxPending and
	// ClientSessionTTL: see clientport.Config (MaxConnections, MaxLocks per
	// session, MaxPending per session, DefaultTTL).
	ClientMaxConnections int
	ClientMaxLocks       int
	ClientMaxPending     int
	ClientSessionTTL     time.Duration

	// GossipKeyFile holds the gossip encryption key: 16, 24 or 32 bytes,
	// raw or base64.
	GossipKeyFile string
	// TLSCertFile, TLSKeyFile and TLSCAFile (PEM) turn on mutual TLS on
	// the lock links: all three or none. The certificate must carry this
	// node's identity (dlm://<ClusterID>/node/<Name>; dlmnode certs makes
	// such certificates). SIGHUP reloads them.
	TLSCertFile string
	TLSKeyFile  string
	TLSCAFile   string
	// TLSReloadInterval is how often the TLS files are checked for a
	// change (size or modification time), which reloads them as SIGHUP
	// does; 0 turns the check off. Default 1m: a renewal by a tool that
	// only replaces the files (cert-manager, Vault agent) is picked up
	// within a minute, at the cost of three stats.
	TLSReloadInterval time.Duration

	// Insecure allows the links and gossip to bind beyond loopback without
	// TLS and a gossip key. Off, such a bind is refused: anyone who could
	// reach the port could speak as a member.
	Insecure bool

	// Lease, Heartbeat and DeadlockWait: see dlm.Config (Lease,
	// HeartbeatInterval, DeadlockWait); the defaults are dlm's.
	Lease        time.Duration
	Heartbeat    time.Duration
	DeadlockWait time.Duration

	// LogLevel is debug, info, warn or error; LogFormat text or json.
	LogLevel  string
	LogFormat string

	// ConfigFile is the TOML file the other settings may also come from.
	ConfigFile string

	// UnsafeNoLockDelay switches the node's lock-delay off (seam.WithoutLockDelay). For the chaos
	// harness's control run only.
	UnsafeNoLockDelay bool
}

// Default ports: gossip, links, admin and clients, consecutive so that a
// firewall rule covers them with one range.
const (
	DefaultGossipPort = 7946
	DefaultLinkPort   = 7947
	DefaultAdminPort  = 7948
	DefaultClientPort = 7949
)

// DefaultConfig returns the defaults documented on Config's fields.
func DefaultConfig() Config {
	d := dlm.DefaultConfig()
	cp := clientport.DefaultConfig()
	return Config{
		ClusterID:            d.ClusterID,
		GossipAddr:           net.JoinHostPort("127.0.0.1", strconv.Itoa(DefaultGossipPort)),
		LinkAddr:             net.JoinHostPort("127.0.0.1", strconv.Itoa(DefaultLinkPort)),
		AdminAddr:            net.JoinHostPort("127.0.0.1", strconv.Itoa(DefaultAdminPort)),
		ClientAddr:           net.JoinHostPort("127.0.0.1", strconv.Itoa(DefaultClientPort)),
		ClientMaxConnections: cp.MaxConnections,
		ClientMaxLocks:       cp.MaxLocks,
		ClientMaxPending:     cp.MaxPending,
		ClientSessionTTL:     cp.DefaultTTL,
		Lease:                d.Lease,
		Heartbeat:            d.HeartbeatInterval,
		DeadlockWait:         d.DeadlockWait,
		LogLevel:             "info",
		LogFormat:            "text",

		TLSReloadInterval: time.Minute,
	}
}

// ErrUsage is wrapped by every error about flags, environment variables,
// the config file or what they name (files, addresses): the agent exits
// with status 2 for it.
var ErrUsage = errors.New("usage")

// usageError is a one-line complaint about one setting, naming its flag.
func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

const usageHeader = `usage: dlmnode agent [flags]

Runs one node of a dlm cluster: it joins the members through the seeds,
masters its share of the resources, and serves the admin HTTP endpoints
(/metrics, /healthz, /readyz, /debug/pprof/, /v1/status, /v1/locks,
/v1/members and a page at /), and a client port for programs that run no node (package
client, dlmnode lock; docs/protocol.md). SIGINT or SIGTERM ends the
client sessions, releases this node's locks and leaves the cluster; a
second signal exits at once. SIGHUP reloads the TLS certificate, key and
CAs: new connections use them, established ones keep theirs.

Off loopback, the links and the client port need TLS (--tls-*-file) and
gossip a key (--gossip-key-file), or --insecure; dlmnode certs makes all
of them.

Every flag can also be set by an environment variable, DLM_ and the flag's
name in capitals with dashes as underscores (DLM_NAME, DLM_MEMBERS,
DLM_GOSSIP_ADDR, ...), or in the TOML file given by --config (keys are
flag names: name = "node1", members = ["node1", "node2", "node3"]). A flag
wins over the environment, the environment over the file. Lists take
commas: --members node1,node2,node3.

flags:
`

// flagSet declares the agent's flags on c.
func (c *Config) flagSet(out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.Name, "name", c.Name, "this node's name, one of --members (required)")
	fs.StringVar(&c.ClusterID, "cluster-id", c.ClusterID, "the cluster's name; nodes of another cluster are refused")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory where the node keeps the cluster's member set after a membership change; a restart uses it instead of --members")
	fs.Var((*listValue)(&c.Members), "members", "every node of the cluster, by name, comma-separated; quorum is a majority (required)")
	fs.Var((*listValue)(&c.Seeds), "seeds", "gossip addresses (host:port) of other nodes to join through, comma-separated")
	fs.StringVar(&c.GossipAddr, "gossip-addr", c.GossipAddr, "where gossip (memberlist, TCP and UDP) binds")
	fs.StringVar(&c.GossipAdvertise, "gossip-advertise", c.GossipAdvertise, "the gossip address (IP:port) peers are told, when it differs from --gossip-addr (NAT, containers)")
	fs.StringVar(&c.LinkAddr, "link-addr", c.LinkAddr, "where lock traffic (TCP) binds")
	fs.StringVar(&c.LinkAdvertise, "link-advertise", c.LinkAdvertise, "the lock traffic address (host:port) peers are told, when it differs from --link-addr")
	fs.StringVar(&c.AdminAddr, "admin-addr", c.AdminAddr, "where the admin HTTP server binds")
	fs.StringVar(&c.AdminAdvertise, "admin-advertise", c.AdminAdvertise, "the admin address (host:port) other agents are told, for ?cluster=true")
	fs.StringVar(&c.AdminTokenFile, "admin-token-file", c.AdminTokenFile, "file holding the bearer token every admin endpoint but /healthz and /readyz requires")
	fs.BoolVar(&c.AdminInsecure, "admin-insecure", c.AdminInsecure, "allow the admin server on a non-loopback address without a token")
	fs.StringVar(&c.ClientAddr, "client-addr", c.ClientAddr, `where the client port binds (package client, dlmnode lock); "" turns it off`)
	fs.StringVar(&c.ClientTokenFile, "client-token-file", c.ClientTokenFile, "file holding the token every client must present")
	fs.BoolVar(&c.ClientTLS, "client-tls", c.ClientTLS, "mutual TLS on the client port with the cluster's certificates (--tls-*): clients present a client certificate of the cluster's CA (dlmnode certs client NAME); node certificates are refused")
	fs.BoolVar(&c.ClientInsecure, "client-insecure", c.ClientInsecure, "allow the client port on a non-loopback address without a token or TLS")
	fs.IntVar(&c.ClientMaxConnections, "client-max-connections", c.ClientMaxConnections, "client connections this agent serves at most")
	fs.IntVar(&c.ClientMaxLocks, "client-max-locks", c.ClientMaxLocks, "locks a client session may hold or wait for")
	fs.IntVar(&c.ClientMaxPending, "client-max-pending", c.ClientMaxPending, "requests a client session may have waiting at once")
	fs.Var((*durationValue)(&c.ClientSessionTTL), "client-session-ttl", "how long a client's session (and its locks) outlives a client that stopped keeping it alive, unless the client asks for another TTL")
	fs.StringVar(&c.GossipKeyFile, "gossip-key-file", c.GossipKeyFile, "file holding the gossip encryption key: 16, 24 or 32 bytes, raw or base64")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", c.TLSCertFile, "PEM certificate of this node, for mutual TLS on the lock links")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", c.TLSKeyFile, "PEM private key of --tls-cert-file")
	fs.StringVar(&c.TLSCAFile, "tls-ca-file", c.TLSCAFile, "PEM certificates of the CAs that sign every node's certificate")
	fs.Var((*durationValue)(&c.TLSReloadInterval), "tls-reload-interval", "how often the TLS files are checked for a change, which reloads them as SIGHUP does (0: only on SIGHUP)")
	fs.BoolVar(&c.Insecure, "insecure", c.Insecure, "allow --link-addr and --gossip-addr beyond loopback without TLS and a gossip key: anyone who reaches them can speak as a member")
	fs.Var((*durationValue)(&c.Lease), "lease", "quorum lease: a node cut off from a majority stops serving this long after it last heard from one")
	fs.Var((*durationValue)(&c.Heartbeat), "heartbeat", "how often the lease is renewed (at most half of --lease)")
	fs.Var((*durationValue)(&c.DeadlockWait), "deadlock-wait", "how long a request waits before deadlock detection across nodes looks at it (0: off)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "text or json")
	fs.StringVar(&c.ConfigFile, "config", c.ConfigFile, "TOML file of settings (keys are flag names)")
	fs.BoolVar(&c.UnsafeNoLockDelay, "unsafe-no-lock-delay", false, "UNSAFE, for control experiments only (chaos/run -control): re-grant a removed node's locks without waiting for its lease to run out")
	fs.Usage = func() {
		fmt.Fprint(out, usageHeader)
		fs.PrintDefaults()
	}
	return fs
}

// Parse reads the agent's configuration from args, the environment and
// the config file, and validates it. Help goes to out; a problem is
// returned as one line wrapping ErrUsage, or flag.ErrHelp.
func Parse(args []string, out io.Writer) (Config, error) {
	c := DefaultConfig()
	fs := c.flagSet(out)
	ffs := ff.NewFlagSetFrom(fs.Name(), fs)
	err := ff.Parse(ffs, args,
		ff.WithEnvVarPrefix("DLM"),
		ff.WithConfigFileFlag("config"),
		ff.WithConfigFileParser(fftoml.Parse),
	)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return c, err
	case err != nil:
		return c, usageError("%s", parseErrorLine(err, c.ConfigFile))
	case len(ffs.GetArgs()) > 0:
		return c, usageError("unexpected argument %q (flags only)", ffs.GetArgs()[0])
	}
	return c, c.Validate()
}

// parseErrorLine rewords ff's errors to name the setting as the operator
// wrote it: a flag, an environment variable or a key of the config file.
func parseErrorLine(err error, file string) string {
	s := err.Error()
	switch {
	case strings.HasPrefix(s, "parse args: "):
		s = strings.TrimPrefix(s, "parse args: ")
		if errors.Is(err, ff.ErrUnknownFlag) {
			return s + " (dlmnode agent -h lists the flags)"
		}
		return s
	case strings.HasPrefix(s, "parse environment: "):
		return "environment: " + strings.TrimPrefix(s, "parse environment: ")
	case strings.HasPrefix(s, "parse config file: "):
		s = strings.TrimPrefix(s, "parse config file: ")
		if errors.Is(err, ff.ErrUnknownFlag) {
			return fmt.Sprintf("--config %s: unknown setting %s", file, strings.TrimSuffix(s, ": unknown flag"))
		}
		return fmt.Sprintf("--config %s: %s", file, s)
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission):
		return fmt.Sprintf("--config: %v", err)
	}
	return s
}

// Validate checks the configuration and the files it names, and returns
// the first problem as one line naming its flag (wrapping ErrUsage).
func (c *Config) Validate() error {
	_, err := c.build()
	return err
}

// settings is a validated configuration, with the files it names read.
type settings struct {
	node           dlm.Config
	creds          *credentials       // nil without TLS; node.TLS is its configuration
	client         *clientport.Config // nil: no client port
	adminAddr      string
	adminAdvertise string // host:port, "" if none could be derived
	token          string
	level          slog.Level
	json           bool
	// unsafeNoLockDelay starts the node with the lock-delay off
	// (seam.WithoutLockDelay), for the chaos harness's control run.
	unsafeNoLockDelay bool
}

func (c *Config) build() (settings, error) {
	var s settings
	switch {
	case c.Name == "":
		return s, usageError("--name is required (this node's name, one of --members)")
	case len(c.Members) == 0:
		return s, usageError("--members is required (every node of the cluster, by name)")
	case !slices.Contains(c.Members, c.Name):
		return s, usageError("--members %s does not include this node's --name %q", strings.Join(c.Members, ","), c.Name)
	}
	for i, m := range c.Members {
		if slices.Contains(c.Members[:i], m) {
			return s, usageError("--members lists %q twice", m)
		}
	}
	for _, seed := range c.Seeds {
		if err := checkAddr(seed, false); err != nil {
			return s, usageError("--seeds: %q: %v", seed, err)
		}
	}
	for _, a := range []struct {
		flag, addr string
		advertise  bool
	}{
		{"--gossip-addr", c.GossipAddr, false}, {"--link-addr", c.LinkAddr, false}, {"--admin-addr", c.AdminAddr, false},
		{"--gossip-advertise", c.GossipAdvertise, true}, {"--link-advertise", c.LinkAdvertise, true}, {"--admin-advertise", c.AdminAdvertise, true},
	} {
		if a.addr == "" && a.advertise {
			continue
		}
		if err := checkAddr(a.addr, a.advertise); err != nil {
			return s, usageError("%s %q: %v", a.flag, a.addr, err)
		}
	}
	if c.GossipAdvertise != "" {
		if host, _, _ := net.SplitHostPort(c.GossipAdvertise); net.ParseIP(host) == nil {
			return s, usageError("--gossip-advertise %q: needs an IP address, not a host name (memberlist gossips IPs)", c.GossipAdvertise)
		}
	}
	linkHost, _, _ := net.SplitHostPort(c.LinkAddr)
	if unspecified(linkHost) && c.LinkAdvertise == "" && c.GossipAdvertise == "" {
		return s, usageError("--link-addr %q binds every interface: set --link-advertise (or --gossip-advertise) to the address peers reach this node at", c.LinkAddr)
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug":
		s.level = slog.LevelDebug
	case "info":
		s.level = slog.LevelInfo
	case "warn", "warning":
		s.level = slog.LevelWarn
	case "error":
		s.level = slog.LevelError
	default:
		return s, usageError("--log-level %q: want debug, info, warn or error", c.LogLevel)
	}
	switch strings.ToLower(c.LogFormat) {
	case "text":
	case "json":
		s.json = true
	default:
		return s, usageError("--log-format %q: want text or json", c.LogFormat)
	}
	switch {
	case c.Lease <= 0:
		return s, usageError("--lease %v: must be positive", c.Lease)
	case c.Heartbeat <= 0 || 2*c.Heartbeat > c.Lease:
		return s, usageError("--heartbeat %v: must be positive and at most half of --lease (%v)", c.Heartbeat, c.Lease)
	case c.DeadlockWait < 0:
		return s, usageError("--deadlock-wait %v: must not be negative", c.DeadlockWait)
	}
	var err error
	if s.token, err = readToken(c.AdminTokenFile); err != nil {
		return s, err
	}
	adminHost, adminPort, _ := net.SplitHostPort(c.AdminAddr)
	if !dlm.LoopbackAddr(c.AdminAddr) && s.token == "" && !c.AdminInsecure {
		return s, usageError("--admin-addr %q is not a loopback address: set --admin-token-file, or --admin-insecure to serve the admin endpoints to anyone who can reach them", c.AdminAddr)
	}
	s.adminAddr = c.AdminAddr
	s.adminAdvertise = c.AdminAdvertise
	if s.adminAdvertise == "" {
		switch {
		case !unspecified(adminHost):
			s.adminAdvertise = c.AdminAddr
		case c.GossipAdvertise != "":
			h, _, _ := net.SplitHostPort(c.GossipAdvertise)
			s.adminAdvertise = net.JoinHostPort(h, adminPort)
		}
	}

	n := dlm.DefaultConfig()
	n.Name, n.ClusterID, n.Members, n.Seeds = c.Name, c.ClusterID, slices.Clone(c.Members), slices.Clone(c.Seeds)
	n.DataDir = c.DataDir
	n.GossipAddr, n.GossipAdvertiseAddr = c.GossipAddr, c.GossipAdvertise
	n.LinkAddr, n.LinkAdvertiseAddr = c.LinkAddr, c.LinkAdvertise
	if n.LinkAdvertiseAddr == "" && unspecified(linkHost) {
		h, _, _ := net.SplitHostPort(c.GossipAdvertise)
		_, p, _ := net.SplitHostPort(c.LinkAddr)
		n.LinkAdvertiseAddr = net.JoinHostPort(h, p)
	}
	n.Lease, n.HeartbeatInterval, n.DeadlockWait = c.Lease, c.Heartbeat, c.DeadlockWait
	s.unsafeNoLockDelay = c.UnsafeNoLockDelay
	if n.GossipKey, err = readGossipKey(c.GossipKeyFile); err != nil {
		return s, err
	}
	if s.creds, err = loadCredentials(c.TLSCertFile, c.TLSKeyFile, c.TLSCAFile, transport.Identity{Cluster: c.ClusterID, Role: transport.RoleNode, Name: c.Name}); err != nil {
		return s, err
	}
	if s.creds != nil {
		n.TLS = s.creds.tls
	}
	if c.TLSReloadInterval < 0 {
		return s, usageError("--tls-reload-interval %v: must not be negative", c.TLSReloadInterval)
	}
	if !c.Insecure {
		if err := refuseExposures(&n); err != nil {
			return s, err
		}
	}
	if s.adminAdvertise != "" {
		n.Tags = map[string]string{AdminTag: "http://" + s.adminAdvertise}
	}
	if err := n.Validate(); err != nil {
		// The checks above cover what the flags can set; this is a
		// backstop, reported on one line all the same.
		line, _, _ := strings.Cut(err.Error(), "\n")
		return s, usageError("%s", line)
	}
	s.node = n
	if s.client, err = c.clientPort(n.TLS); err != nil {
		return s, err
	}
	return s, nil
}

// clientPort checks the client port's settings and returns its
// configuration (without the node), or nil if it is off.
func (c *Config) clientPort(tlsCfg *transport.TLSConfig) (*clientport.Config, error) {
	if c.ClientAddr == "" {
		return nil, nil
	}
	if err := checkAddr(c.ClientAddr, false); err != nil {
		return nil, usageError("--client-addr %q: %v", c.ClientAddr, err)
	}
	cp := clientport.DefaultConfig()
	cp.MaxConnections, cp.MaxLocks, cp.MaxPending = c.ClientMaxConnections, c.ClientMaxLocks, c.ClientMaxPending
	switch {
	case cp.MaxConnections < 1:
		return nil, usageError("--client-max-connections %d: must be positive", cp.MaxConnections)
	case cp.MaxLocks < 1:
		return nil, usageError("--client-max-locks %d: must be positive", cp.MaxLocks)
	case cp.MaxPending < 1:
		return nil, usageError("--client-max-pending %d: must be positive", cp.MaxPending)
	case c.ClientSessionTTL < cp.MinTTL || c.ClientSessionTTL > cp.MaxTTL:
		return nil, usageError("--client-session-ttl %v: must be in %v..%v", c.ClientSessionTTL, cp.MinTTL, cp.MaxTTL)
	}
	cp.DefaultTTL = c.ClientSessionTTL
	if c.ClientTokenFile != "" {
		tok, err := readTokenFlag("--client-token-file", c.ClientTokenFile)
		if err != nil {
			return nil, err
		}
		if len(tok) > wire.MaxToken {
			return nil, usageError("--client-token-file %s: the token is longer than %d bytes", c.ClientTokenFile, wire.MaxToken)
		}
		cp.Token = tok
	}
	if c.ClientTLS {
		if tlsCfg == nil {
			return nil, usageError("--client-tls needs the cluster's certificates: --tls-cert-file, --tls-key-file and --tls-ca-file")
		}
		cp.TLS = tlsCfg
	}
	if !dlm.LoopbackAddr(c.ClientAddr) && cp.Token == "" && cp.TLS == nil && !c.ClientInsecure {
		return nil, usageError("--client-addr %q is not a loopback address: set --client-token-file or --client-tls, or --client-insecure to let anyone who can reach it take locks", c.ClientAddr)
	}
	return &cp, nil
}

// AdminTag is the gossip tag that carries an agent's admin URL, so that
// any agent can gather every member's answer (?cluster=true).
const AdminTag = "admin"

// checkAddr checks a host:port; an advertised one needs a host and a port.
func checkAddr(addr string, advertised bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("port %q is not a number in 0..65535", port)
	}
	if advertised && (host == "" || unspecified(host) || p == 0) {
		return errors.New("an advertised address needs a reachable host and a port")
	}
	return nil
}

func unspecified(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

func readToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	return readTokenFlag("--admin-token-file", path)
}

// readTokenFlag reads the one-word token in path, for flag.
func readTokenFlag(flag, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", usageError("%s: %v", flag, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", usageError("%s %s: the file is empty", flag, path)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return "", usageError("%s %s: the token must be one word", flag, path)
	}
	return tok, nil
}

func readGossipKey(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError("--gossip-key-file: %v", err)
	}
	ok := func(k []byte) bool { return len(k) == 16 || len(k) == 24 || len(k) == 32 }
	if ok(b) {
		return b, nil
	}
	text := strings.TrimSpace(string(b))
	if k, err := base64.StdEncoding.DecodeString(text); err == nil && ok(k) {
		return k, nil
	}
	if ok([]byte(text)) {
		return []byte(text), nil
	}
	return nil, usageError("--gossip-key-file %s: want a key of 16, 24 or 32 bytes, raw or base64 (head -c 32 /dev/urandom | base64)", path)
}

// listValue is a flag holding a list: each use appends, commas separate
// items (so one environment variable or TOML string can hold several).
type listValue []string

func (l *listValue) String() string { return strings.Join(*l, ",") }

func (l *listValue) Set(s string) error {
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			*l = append(*l, item)
		}
	}
	return nil
}

// durationValue is a duration flag whose errors say what was wrong.
type durationValue time.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 1.5s or 250ms")
	}
	*d = durationValue(v)
	return nil
}
