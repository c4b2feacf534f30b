package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/dlm"
)

// Service is one way into the lock service: an agent (Agent >= 0, through
// the client protocol) or an embedded member (Agent -1).
type Service struct {
	Node  string // the node's name, as the history records it
	Agent int
	LS    Lockspace
}

// Config sizes the workloads.
type Config struct {
	// Clients is the number of workload clients, spread over the
	// services: by turns a register writer, a mode mixer, a register
	// writer, a mode mixer, a counter incrementer. Two election
	// candidates, an election reader and one probe per service come on
	// top.
	Clients int
	// Seed draws every client's choices.
	Seed uint64
	// Registers, Mixes are how many resources of each kind the clients
	// share (hot: a few, contended).
	Registers, Mixes int
	// OpTimeout bounds every lock operation.
	OpTimeout time.Duration
	// ProbeEvery is the probes' period; ProbeWithin their deadline.
	ProbeEvery, ProbeWithin time.Duration
	// MasterOf, if set, names the agent mastering a resource (-1 if it
	// is not an agent or unknown), for the kill-master nemesis.
	MasterOf func(resource string) int
}

// DefaultConfig is ten clients on two registers and three mixed resources.
func DefaultConfig() Config {
	return Config{Clients: 10, Registers: 2, Mixes: 3, OpTimeout: 5 * time.Second,
		ProbeEvery: 100 * time.Millisecond, ProbeWithin: time.Second}
}

// Resource names; probes have their own prefix so availability can find
// them.
const (
	RegisterPrefix = "reg/"
	MixPrefix      = "mix/"
	CounterRes     = "counter/0"
	ElectionName   = "e0"
	ElectionRes    = "election/" + ElectionName
	ProbePrefix    = "probe/"
	LeaderKey      = "leader/" + ElectionName // the fenced key the leader writes
)

// Runner runs the workloads and knows who holds what.
type Runner struct {
	cfg          Config
	h            *check.History
	store        *Store
	services     []Service
	nextID       int
	keeper       Lock // see keep
	keeperClient *client

	mu        sync.Mutex
	holds     map[int]*hold // register clients' current EX holds, by client id
	incs      []check.Increment
	final     *check.CounterRead
	obs       []check.Observation
	frozen    []FrozenWrite
	values    int64
	perClient map[string]int // clients per kind, for the report
}

// hold is a register client's EX lock, while it holds it.
type hold struct {
	agent    int
	resource string
	freeze   chan time.Duration
}

// FrozenWrite is the write a paused holder made when it woke, under the
// token it held before the pause: the register must refuse it once another
// holder has written.
type FrozenWrite struct {
	Client   int           `json:"client"`
	Node     string        `json:"node"`
	Resource string        `json:"resource"`
	Token    uint64        `json:"token"`
	Woke     time.Duration `json:"woke_ns"`
	Accepted bool          `json:"accepted"`
	// Newer says a higher token had been accepted for the key before the
	// write: its acceptance would be a violation.
	Newer bool `json:"newer"`
}

// New returns a runner over services, recording into h.
func New(h *check.History, services []Service, cfg Config) *Runner {
	return &Runner{cfg: cfg, h: h, store: NewStore(), services: services,
		holds: make(map[int]*hold), perClient: make(map[string]int)}
}

// Run runs every client until ctx ends and all of them have stopped.
func (r *Runner) Run(ctx context.Context) {
	var wg sync.WaitGroup
	rng := rand.New(rand.NewPCG(r.cfg.Seed, 0x776f726b)) // "work"
	start := func(kind string, svc Service, f func(ctx context.Context, c *client)) {
		c := &client{r: r, id: r.nextID, svc: svc, rng: rand.New(rand.NewPCG(rng.Uint64(), uint64(r.nextID)))}
		r.nextID++
		r.perClient[kind]++
		wg.Go(func() { f(ctx, c) })
	}
	r.keep(ctx)
	n := len(r.services)
	for i := range r.cfg.Clients {
		svc := r.services[i%n]
		switch i % 5 {
		case 0, 2:
			start("register", svc, r.register)
		case 1, 3:
			start("mix", svc, r.mix)
		case 4:
			start("counter", svc, r.counter)
		}
	}
	start("candidate", r.services[0], r.candidate)
	start("candidate", r.services[n-1], r.candidate)
	start("reader", r.services[n/2], r.reader)
	for _, svc := range r.services {
		start("probe", svc, r.probe)
	}
	wg.Wait()
}

// client is one workload client: a lock handle owner with its own id.
type client struct {
	r   *Runner
	id  int
	svc Service
	rng *rand.Rand
}

func (c *client) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.r.cfg.OpTimeout)
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// outcome classifies a failed lock call: Unknown when it may have taken
// effect (a deadline, a broken connection), Fail when the lock service
// said no.
func outcome(err error) check.Outcome {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.As(err, &ne):
		return check.Unknown
	}
	return check.Fail
}

// resolve ends an acquire or convert that failed.
func resolve(op *check.Op, err error) {
	if outcome(err) == check.Unknown {
		op.Unknown()
	} else {
		op.Failed(err)
	}
}

// releaseGone reports whether an unlock error only says the lock was gone
// already: the release then happened, one way or the other.
func releaseGone(err error) bool {
	return err == nil || errors.Is(err, dlm.ErrLockLost) || errors.Is(err, dlm.ErrClosed) ||
		errors.Is(err, dlm.ErrNoQuorum) || errors.Is(err, dlm.ErrNotHeld)
}

// unlock releases lk and records it.
func (c *client) unlock(res string, lk Lock) {
	rop := c.r.h.Release(c.id, c.svc.Node, res)
	if err := lk.Unlock(); releaseGone(err) {
		rop.Released()
	} else if outcome(err) == check.Unknown {
		rop.Unknown()
	} else {
		rop.Failed(err)
	}
}

// write writes the next value to key under token and records the store's
// answer.
func (c *client) write(key string, token uint64) bool {
	c.r.mu.Lock()
	c.r.values++
	v := c.r.values
	c.r.mu.Unlock()
	w := c.r.h.Write(c.id, c.svc.Node, key, token, v)
	ok := c.r.store.Write(key, token, v)
	if ok {
		w.Accepted()
	} else {
		w.Rejected()
	}
	return ok
}

// Holder picks a register client that holds its lock now, on an agent.
func (r *Runner) Holder(rng *rand.Rand) (int, string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var hs []*hold
	for _, id := range sortedKeys(r.holds) {
		if h := r.holds[id]; h.agent >= 0 {
			hs = append(hs, h)
		}
	}
	if len(hs) == 0 {
		return -1, "", false
	}
	h := hs[rng.IntN(len(hs))]
	return h.agent, h.resource, true
}

// Master picks a hot resource whose master is an agent.
func (r *Runner) Master(rng *rand.Rand) (int, string, bool) {
	if r.cfg.MasterOf == nil {
		return -1, "", false
	}
	var hot []string
	for i := range r.cfg.Registers {
		hot = append(hot, fmt.Sprintf("%s%d", RegisterPrefix, i))
	}
	for i := range r.cfg.Mixes {
		hot = append(hot, fmt.Sprintf("%s%d", MixPrefix, i))
	}
	hot = append(hot, CounterRes, ElectionRes)
	rng.Shuffle(len(hot), func(i, j int) { hot[i], hot[j] = hot[j], hot[i] })
	for _, res := range hot {
		if a := r.cfg.MasterOf(res); a >= 0 {
			return a, res, true
		}
	}
	return -1, "", false
}

// Freeze pauses the client holding resource on agent for d; it then writes
// once more under its old token without looking at Lost.
func (r *Runner) Freeze(agent int, resource string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range sortedKeys(r.holds) {
		if h := r.holds[id]; h.agent == agent && h.resource == resource {
			select {
			case h.freeze <- d:
			default:
			}
			return
		}
	}
}

func sortedKeys(m map[int]*hold) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && ks[j] < ks[j-1]; j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
	return ks
}

// Results are what the workloads saw beyond the history.
type Results struct {
	Increments   []check.Increment   `json:"increments"`
	Final        *check.CounterRead  `json:"final_counter"`
	Observations []check.Observation `json:"observations"`
	FrozenWrites []FrozenWrite       `json:"frozen_writes"`
	Clients      map[string]int      `json:"clients"`
}

// Results returns what the workloads saw; call it after Run and Finish.
func (r *Runner) Results() Results {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Results{Increments: append([]check.Increment(nil), r.incs...), Final: r.final,
		Observations: append([]check.Observation(nil), r.obs...),
		FrozenWrites: append([]FrozenWrite(nil), r.frozen...), Clients: r.perClient}
}
