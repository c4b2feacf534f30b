package workload

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"
)

// Kind names a workload.
type Kind string

// The workloads, in the order reports list them.
const (
	Uncontended Kind = "uncontended"
	Hot         Kind = "hot"
	Readers     Kind = "readers"
	Coupon      Kind = "coupon"
)

// Kinds returns every workload in report order.
func Kinds() []Kind { return []Kind{Uncontended, Hot, Readers, Coupon} }

// Sentinel errors.
var (
	// ErrUnknownKind is returned for a workload name that does not exist.
	ErrUnknownKind = errors.New("workload: unknown workload")
	// ErrBadConfig wraps every Validate failure.
	ErrBadConfig = errors.New("workload: bad config")
	// ErrDrain means clients were still busy after the drain timeout and
	// had to be closed under them.
	ErrDrain = errors.New("workload: clients did not drain in time")
)

// ParseKinds parses a comma-separated list ("all" or empty for every kind).
func ParseKinds(s string) ([]Kind, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "all" {
		return Kinds(), nil
	}
	var out []Kind
	seen := map[Kind]bool{}
	for _, f := range strings.Split(s, ",") {
		k := Kind(strings.TrimSpace(f))
		if !k.valid() {
			return nil, fmt.Errorf("%w %q (want %s)", ErrUnknownKind, k, kindList())
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out, nil
}

func (k Kind) valid() bool {
	for _, v := range Kinds() {
		if k == v {
			return true
		}
	}
	return false
}

func kindList() string {
	var names []string
	for _, k := range Kinds() {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// Progress is a snapshot handed to Config.Progress while a run goes on.
type Progress struct {
	System   string
	Workload Kind
	Phase    string // "connect", "warmup", "measure", "drain"
	Elapsed  time.Duration
	Duration time.Duration
	Cycles   uint64 // completed lock+unlock cycles since the run started
	Errors   uint64
}

// Config parameterises a run. Every default has its reason beside it.
type Config struct {
	// Clients is the number of concurrent clients (64: the brief's figure,
	// and several per core so queueing shows).
	Clients int
	// Duration bounds the whole run; the first Warmup is not measured.
	Duration time.Duration
	// Warmup (1 s) lets connections, sessions and caches settle.
	Warmup time.Duration
	// Resources is the uncontended key space (100,000: collisions between
	// 64 clients are rare).
	Resources int
	// SharedResources (16) and SharedFraction (0.95) shape readers.
	SharedResources int
	SharedFraction  float64
	// Coupons (1,000) and Rate (50,000 requests/s) are the seed's scenario.
	Coupons int
	Rate    float64
	// CouponWait (50 ms) is how long a coupon request waits for the lock:
	// the seed retries 10 times 5 ms apart before answering "try later".
	CouponWait time.Duration
	// TTL (8 s, redsync's default expiry) is the grant lifetime of
	// lease-based systems in the closed-loop workloads.
	TTL time.Duration
	// CouponTTL (100 ms) is the grant lifetime in the coupon workload: the
	// seed keeps it short so that a crashed holder frees the event quickly.
	CouponTTL time.Duration
	// HoldPause, with probability HoldPauseProb per coupon request, stalls a
	// holder between its read and its write (fault injection; off).
	HoldPause     time.Duration
	HoldPauseProb float64
	// Seed makes resource and mode choices reproducible.
	Seed uint64
	// MaxOpsPerClient bounds every loop by count as well as by time.
	MaxOpsPerClient int
	// DrainTimeout bounds the wait for clients after the deadline.
	DrainTimeout time.Duration
	// UnlockTimeout bounds one Unlock, which runs even after the deadline.
	UnlockTimeout time.Duration
	// ErrorBackoff is the pause after a failed Lock, so a broken system does
	// not turn the loop into a spin.
	ErrorBackoff time.Duration
	// ProgressEvery is the interval between Progress calls; Progress may be
	// nil.
	ProgressEvery time.Duration
	Progress      func(Progress)
	// Logger receives diagnostics.
	Logger *slog.Logger
}

// DefaultConfig returns the brief's defaults.
func DefaultConfig() Config {
	return Config{
		Clients:         64,
		Duration:        10 * time.Second,
		Warmup:          time.Second,
		Resources:       100_000,
		SharedResources: 16,
		SharedFraction:  0.95,
		Coupons:         1000,
		Rate:            50_000,
		CouponWait:      50 * time.Millisecond,
		TTL:             8 * time.Second,
		CouponTTL:       100 * time.Millisecond,
		Seed:            1,
		MaxOpsPerClient: 10_000_000,
		DrainTimeout:    15 * time.Second,
		UnlockTimeout:   5 * time.Second,
		ErrorBackoff:    10 * time.Millisecond,
		ProgressEvery:   500 * time.Millisecond,
		Logger:          slog.New(slog.DiscardHandler),
	}
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrBadConfig}, args...)...)
	}
	switch {
	case c.Clients <= 0:
		return bad("clients %d must be positive", c.Clients)
	case c.Duration <= 0:
		return bad("duration %v must be positive", c.Duration)
	case c.Warmup < 0 || c.Warmup >= c.Duration:
		return bad("warmup %v must be in [0, duration %v)", c.Warmup, c.Duration)
	case c.Resources <= 0 || c.SharedResources <= 0:
		return bad("resources %d and shared resources %d must be positive", c.Resources, c.SharedResources)
	case c.SharedFraction < 0 || c.SharedFraction > 1 || math.IsNaN(c.SharedFraction):
		return bad("shared fraction %v must be in [0,1]", c.SharedFraction)
	case c.Coupons < 0:
		return bad("coupons %d must not be negative", c.Coupons)
	case !(c.Rate > 0) || math.IsInf(c.Rate, 0):
		return bad("rate %v must be positive", c.Rate)
	case c.CouponWait <= 0 || c.TTL <= 0 || c.CouponTTL <= 0:
		return bad("coupon wait %v, ttl %v and coupon ttl %v must be positive", c.CouponWait, c.TTL, c.CouponTTL)
	case c.HoldPause < 0 || c.HoldPauseProb < 0 || c.HoldPauseProb > 1 || math.IsNaN(c.HoldPauseProb):
		return bad("hold pause %v / probability %v out of range", c.HoldPause, c.HoldPauseProb)
	case c.MaxOpsPerClient <= 0:
		return bad("max ops per client %d must be positive", c.MaxOpsPerClient)
	case c.DrainTimeout <= 0 || c.UnlockTimeout <= 0 || c.ErrorBackoff < 0 || c.ProgressEvery <= 0:
		return bad("drain %v, unlock %v, backoff %v and progress %v timeouts must be positive",
			c.DrainTimeout, c.UnlockTimeout, c.ErrorBackoff, c.ProgressEvery)
	case c.Logger == nil:
		return bad("nil logger")
	}
	return nil
}

// ttl returns the grant lifetime for kind.
func (c Config) ttl(kind Kind) time.Duration {
	if kind == Coupon {
		return c.CouponTTL
	}
	return c.TTL
}
