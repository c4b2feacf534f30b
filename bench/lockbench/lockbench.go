package lockbench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"time"
)

// Sentinel errors. Systems wrap them so callers can test with errors.Is.
var (
	// ErrUnavailable means the system cannot run here, typically because a
	// server binary is not installed. The wrapping error says what is missing.
	ErrUnavailable = errors.New("lockbench: system unavailable")
	// ErrNotStarted is returned by NewClient before Start succeeded.
	ErrNotStarted = errors.New("lockbench: system not started")
	// ErrClosed is returned by operations on a closed System or Client.
	ErrClosed = errors.New("lockbench: closed")
)

// Unavailable returns an error that wraps ErrUnavailable and whose message is
// reason alone, so that "skipped NAME: " + err.Error() reads well.
func Unavailable(reason string) error { return unavailable(reason) }

type unavailable string

func (u unavailable) Error() string        { return string(u) }
func (u unavailable) Is(target error) bool { return target == ErrUnavailable }

// Mode is the strength of a requested lock. The comparison uses the two modes
// every peer understands; dlm maps them to EX and PR.
type Mode uint8

const (
	// Exclusive admits one holder.
	Exclusive Mode = iota
	// Shared admits any number of Shared holders and no Exclusive one.
	Shared
)

func (m Mode) String() string {
	switch m {
	case Exclusive:
		return "exclusive"
	case Shared:
		return "shared"
	default:
		return fmt.Sprintf("Mode(%d)", uint8(m))
	}
}

// Fence is the token a grant carries, as far as the system provides one.
type Fence struct {
	// Token identifies the grant. Zero when the system issues none.
	Token uint64
	// Monotonic is true if Token strictly increases across successive
	// exclusive grants of the same resource, i.e. it is a fencing token a
	// storage can check with "token >= highest seen". A random lock value
	// (Redis, Redlock) is not one.
	Monotonic bool
}

// FencingKind says what kind of token a system's exclusive grants carry.
type FencingKind string

// Fencing kinds.
const (
	FencingNone      FencingKind = "none"      // no token at all
	FencingOpaque    FencingKind = "opaque"    // a unique value, not ordered
	FencingMonotonic FencingKind = "monotonic" // a real fencing token
)

// Info describes a system. It is what the harness prints next to the
// figures, so each field states a limitation plainly.
type Info struct {
	// Name is the short name used on the command line ("redis").
	Name string `json:"name"`
	// Summary says in one line what a lock is in this system.
	Summary string `json:"summary"`
	// Servers is the number of server processes (or nodes) the system runs.
	Servers int `json:"servers"`
	// Shared is false if Shared requests are served with exclusive locks
	// because the system or its client library has no shared mode.
	Shared bool `json:"shared"`
	// Fencing is the kind of token exclusive grants carry.
	Fencing FencingKind `json:"fencing"`
	// Cancelable is false if a waiting Lock ignores its context (the client
	// library offers no way to abandon a wait).
	Cancelable bool `json:"cancelable"`
	// Version is the server version, filled in by Start when known.
	Version string `json:"version,omitempty"`
	// Notes are further facts a reader of the figures needs.
	Notes []string `json:"notes,omitempty"`
}

// ClientConfig is what NewClient needs besides the system's own settings.
type ClientConfig struct {
	// ID numbers the client from 0; systems may use it to spread clients
	// over nodes.
	ID int
	// TTL is the lifetime of a grant in lease-based systems (Redis,
	// Redlock): a holder that has not unlocked by then loses the lock.
	// Session-based systems (etcd, ZooKeeper) keep their sessions alive and
	// ignore it.
	TTL time.Duration
	// MixedModes is true when the run takes shared and exclusive locks on
	// the same resources. A system whose cheapest exclusive lock does not
	// exclude its shared locks (etcd: concurrency.Mutex versus the RWMutex
	// recipe) must then take exclusive locks the way that does.
	MixedModes bool
}

// System is one lock service under test.
type System interface {
	// Info describes the system. It may be called before Start; Version is
	// filled in once Start succeeded.
	Info() Info
	// Start launches the servers and returns once they serve requests, ctx
	// ends, or they fail. On failure it stops whatever it started. It returns
	// an error wrapping ErrUnavailable if a needed binary is missing.
	Start(ctx context.Context) error
	// NewClient connects a new client. It is safe for concurrent use.
	NewClient(ctx context.Context, cfg ClientConfig) (Client, error)
	// Close stops every server and removes temporary files. It is safe to
	// call after a failed Start and more than once.
	Close() error
}

// Client is one application process's handle on the lock service. It is used
// by one goroutine at a time.
type Client interface {
	// Lock blocks until resource is granted in mode, ctx ends (unless the
	// system's Info says it cannot be cancelled), or the system fails.
	// Resource names match [A-Za-z0-9_.:-]+.
	Lock(ctx context.Context, resource string, mode Mode) (Held, error)
	// Close releases the client's connections and session.
	Close() error
}

// Held is a granted lock.
type Held interface {
	// Fence returns the grant's token.
	Fence() Fence
	// Unlock releases the lock. It is called once.
	Unlock(ctx context.Context) error
}

// CPUReporter is implemented by systems whose servers are child processes,
// so the harness can tell server CPU apart from its own.
type CPUReporter interface {
	// ServerCPU returns the CPU time (user+system) all servers used so far.
	ServerCPU() time.Duration
}

// Preparer is implemented by systems that need per-resource set-up which
// their users would have done long before (ZooKeeper's lock recipe needs a
// parent znode per resource). The harness calls Prepare with a workload's
// resource names before starting the clock.
type Preparer interface {
	Prepare(ctx context.Context, resources []string) error
}

// Env is what a system's constructor receives from the harness.
type Env struct {
	// Logger receives the system's diagnostics. Never nil after Defaults.
	Logger *slog.Logger
	// TempDir is the parent of the system's temporary directories; empty
	// means the OS default.
	TempDir string
	// LookPath finds a binary; tests replace it to pretend one is missing.
	LookPath func(file string) (string, error)
	// ReadyTimeout bounds how long Start waits for servers to serve.
	ReadyTimeout time.Duration
}

// DefaultEnv returns an Env with a discarding logger, exec.LookPath and a
// 60 s readiness bound (a JVM on a busy 2-core machine can take tens of
// seconds to start).
func DefaultEnv() Env {
	return Env{
		Logger:       slog.New(slog.DiscardHandler),
		LookPath:     exec.LookPath,
		ReadyTimeout: 60 * time.Second,
	}
}

// Validate reports whether env is usable.
func (e Env) Validate() error {
	switch {
	case e.Logger == nil:
		return errors.New("lockbench: Env.Logger is nil")
	case e.LookPath == nil:
		return errors.New("lockbench: Env.LookPath is nil")
	case e.ReadyTimeout <= 0:
		return fmt.Errorf("lockbench: Env.ReadyTimeout %v is not positive", e.ReadyTimeout)
	}
	return nil
}
