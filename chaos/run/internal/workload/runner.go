package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/modes"
)

// Service is one way into the lock service: an agent (Agent >= 0, through
// the client protocol) or an embedded member (Agent -1).
type Service struct {
	Node  string // the node's name, as the history records it
	Agent int
	// Via, if set, says which agent the service goes through now (-1:
	// none or unknown): a client of the client port moves to another
	// agent when it loses its own. It overrides Agent.
	Via func() int `json:"-"`
	LS  Lockspace
}

// agent is the agent the service goes through now, or -1.
func (s Service) agent() int {
	if s.Via != nil {
		return s.Via()
	}
	return s.Agent
}

// Config sizes the workloads.
type Config struct {
	// Clients is the number of workload clients, spread over the
	// services: by turns a register writer, a mode mixer, a register
	// writer, a mode mixer, a counter incrementer. Every other register
	// writer is a long holder (see register). Candidates election
	// candidates, Readers election readers and ProbeResources probes per
	// service (if Probes) come on top.
	Clients             int
	Candidates, Readers int
	Probes              bool
	// ProbeResources is how many probes each service runs, each on a
	// resource of its own: spread over the masters by the hash, so that
	// whether a lock could be had does not hang on one node (a few fixed
	// names can all fall to one master in some views, and that master's
	// failure would read as the whole service's).
	ProbeResources int
	// NoCounter makes the fifth clients mode mixers instead of counter
	// incrementers (the modes model's work on the counter grows fast with
	// its operations: one runner's counters are plenty).
	NoCounter bool
	// Keeper takes the runner's own NL lock on the counter before the
	// clients start, for Finish: the resource, and its value block,
	// live only while some lock is on it (see keep). One runner of a
	// run keeps the counter, in a process no nemesis reaches.
	Keeper bool
	// FirstID is the first client id: ids are unique across the
	// runners of a run.
	FirstID int
	// ValueBase is added to every value written to the register: values
	// are unique across the runners of a run.
	ValueBase int64
	// Seed draws every client's choices.
	Seed uint64
	// Registers, Mixes are how many resources of each kind the clients
	// share (hot: a few, contended).
	Registers, Mixes int
	// OpTimeout bounds every lock operation.
	OpTimeout time.Duration
	// ProbeEvery is the probes' period; ProbeWithin their deadline.
	ProbeEvery, ProbeWithin time.Duration
	// LongHold is the range of a long holder's hold.
	LongHoldMin, LongHoldMax time.Duration
	// MasterOf, if set, names the agent mastering a resource (-1 if it
	// is not an agent or unknown), for the kill-master nemesis.
	MasterOf func(resource string) int `json:"-"`
}

// DefaultConfig is ten clients on two registers and three mixed
// resources, two candidates, a reader and the probes.
func DefaultConfig() Config {
	return Config{Clients: 10, Candidates: 2, Readers: 1, Probes: true, ProbeResources: 4, Keeper: true, Registers: 2, Mixes: 3,
		OpTimeout: 5 * time.Second, ProbeEvery: 100 * time.Millisecond, ProbeWithin: time.Second,
		LongHoldMin: time.Second, LongHoldMax: 3 * time.Second}
}

// Hooks are how a runner tells the rest of the harness what happens, when
// it runs in a worker process. Every field may be nil.
type Hooks struct {
	// Hold and Unhold report a long holder's EX lock, the agent it holds
	// it through (-1: its own member) and how long it means to hold it
	// (the nemeses aim at these holders).
	Hold   func(client, agent int, resource string, token uint64, hold time.Duration)
	Unhold func(client int)
	// Increment, Observation and Frozen report each result as it
	// happens (the process may be killed before the end).
	Increment   func(check.Increment)
	Observation func(check.Observation)
	Frozen      func(FrozenWrite)
	// WaitWake blocks until the process was stopped and continued
	// (SIGCONT), or until d passed; it reports whether it woke.
	WaitWake func(d time.Duration) bool
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
	store        Register
	services     []Service
	hooks        Hooks
	nextID       int
	keeper       Lock // see keep
	keeperClient *client
	keeperLost   sync.Once // records the keeper's Lost once, whoever sees it first

	mu        sync.Mutex
	holds     map[int]*hold // long holders' current EX holds, by client id
	incs      []check.Increment
	final     *check.CounterRead
	obs       []check.Observation
	frozen    []FrozenWrite
	values    int64
	perClient map[string]int // clients per kind, for the report
	plan      []planned
	witnesses sync.WaitGroup
}

// hold is a long holder's EX lock, while it holds it.
type hold struct {
	agent    int
	resource string
	token    uint64
	arm      chan chan Armed
	pin      chan time.Duration
}

// Armed is a long holder's answer to Arm: stopped at the point of writing
// under Token, or not (OK false: it no longer held the lock).
type Armed struct {
	OK       bool   `json:"ok"`
	Token    uint64 `json:"tok"`
	Resource string `json:"r"`
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
	// Paused says the process was stopped and continued while the holder
	// waited to write (false: the wait ran out first).
	Paused bool `json:"paused"`
}

// New returns a runner over services, recording into h and writing to
// store.
func New(h *check.History, store Register, services []Service, cfg Config, hooks Hooks) *Runner {
	r := &Runner{cfg: cfg, h: h, store: store, services: services, hooks: hooks, nextID: cfg.FirstID,
		holds: make(map[int]*hold), perClient: make(map[string]int)}
	r.plan = r.makePlan()
	for _, p := range r.plan {
		r.perClient[p.kind]++
	}
	return r
}

// planned is a client Run will start.
type planned struct {
	kind string
	svc  Service
	f    func(ctx context.Context, c *client)
}

func (r *Runner) makePlan() []planned {
	var plan []planned
	add := func(kind string, svc Service, f func(ctx context.Context, c *client)) {
		plan = append(plan, planned{kind, svc, f})
	}
	n := len(r.services)
	registers := 0
	for i := range r.cfg.Clients {
		svc := r.services[i%n]
		switch i % 5 {
		case 0, 2:
			if registers++; registers%2 == 0 {
				add("long holder", svc, r.longHolder)
			} else {
				add("register", svc, r.register)
			}
		case 1, 3:
			add("mix", svc, r.mix)
		case 4:
			if r.cfg.NoCounter {
				add("mix", svc, r.mix)
			} else {
				add("counter", svc, r.counter)
			}
		}
	}
	for i := range r.cfg.Candidates {
		add("candidate", r.services[(n-1)*(i%2)], r.candidate)
	}
	for i := range r.cfg.Readers {
		add("reader", r.services[(n/2+i)%n], r.reader)
	}
	if r.cfg.Probes {
		k := max(1, r.cfg.ProbeResources)
		for _, svc := range r.services {
			for i := range k {
				res := fmt.Sprintf("%s%s/%d", ProbePrefix, svc.Node, i)
				// Staggered over a period, so that the probes of a slot
				// are not all called at one instant.
				lag := r.cfg.ProbeEvery * time.Duration(i) / time.Duration(k)
				add("probe", svc, func(ctx context.Context, c *client) { r.probe(ctx, c, res, lag) })
			}
		}
	}
	return plan
}

// Run runs every client until ctx ends and all of them have stopped.
func (r *Runner) Run(ctx context.Context) {
	var wg sync.WaitGroup
	rng := rand.New(rand.NewPCG(r.cfg.Seed, 0x776f726b)) // "work"
	if r.cfg.Keeper {
		r.keep(ctx)
	}
	for _, p := range r.plan {
		id := r.newID()
		c := &client{r: r, id: id, svc: p.svc, rng: rand.New(rand.NewPCG(rng.Uint64(), uint64(id)))}
		wg.Go(func() { p.f(ctx, c) })
	}
	wg.Wait()
	r.witnesses.Wait()
}

// newID returns a client id not used before.
func (r *Runner) newID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.nextID
	r.nextID++
	return id
}

// Witness asks for resource in EX as a new client of the runner's first
// service, with a deadline of d, writes the register once under its token
// when granted, and lets go: started just before a nemesis strikes the
// resource's holder, its grant is the moment the lock could be had
// elsewhere (check.TimeToGrant), and its write is the newer one a paused
// holder's late write meets. It returns once the request is recorded, with
// a channel closed when the witness is done (written and let go, or
// failed); Run waits for it to end.
func (r *Runner) Witness(ctx context.Context, resource string, d time.Duration) <-chan struct{} {
	c := &client{r: r, id: r.newID(), svc: r.services[0]}
	op := r.h.Acquire(c.id, c.svc.Node, resource, modes.EX)
	done := make(chan struct{})
	r.witnesses.Go(func() {
		defer close(done)
		octx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		lk, err := c.svc.LS.Acquire(octx, resource, modes.EX)
		if err != nil {
			resolve(op, err)
			return
		}
		op.Granted(lk.Mode(), lk.Token())
		select {
		case <-lk.Lost():
			r.h.Lost(c.id, c.svc.Node, resource)
		default:
			c.write(resource, lk.Token())
		}
		c.unlock(resource, lk)
	})
	return done
}

// Clients counts the clients of each kind the runner runs.
func (r *Runner) Clients() map[string]int { return maps.Clone(r.perClient) }

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
// effect (a deadline, a broken connection, a master that became
// unavailable, a client session lost before the answer came), Fail when
// the lock service said no.
func outcome(err error) check.Outcome {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), errors.Is(err, lockapi.ErrUnavailable),
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

// lost records that the client was told lk was lost, and why, in a note
// next to it (whether the client stopped trusting its lock by itself or
// heard it from its agent, say).
func (c *client) lost(res string, lk Lock) {
	c.r.h.Lost(c.id, c.svc.Node, res)
	if e, ok := lk.(interface{ Err() error }); ok {
		c.r.h.Note("lost", fmt.Sprintf("client %d on %s, %s: %v", c.id, c.svc.Node, res, e.Err()))
	}
}

// convert converts lk to mode, recording a Lost of the lock the moment the
// lock service tells it, also while the conversion waits: a client waiting
// to convert holds its old mode, and believes in it until it is told the
// lock is gone. It reports whether the lock was lost.
func (c *client) convert(ctx context.Context, res string, lk Lock, mode modes.Mode) (lost bool, err error) {
	done := make(chan error, 1)
	go func() { done <- lk.Convert(ctx, mode) }()
	select {
	case err = <-done:
		select {
		case <-lk.Lost():
			if err != nil {
				c.lost(res, lk)
				return true, err
			}
		default:
		}
		return false, err
	case <-lk.Lost():
		c.lost(res, lk)
		return true, <-done
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
// answer; it reports whether the store accepted it and whether it had
// accepted a higher token before.
func (c *client) write(key string, token uint64) (accepted, newer bool) {
	c.r.mu.Lock()
	c.r.values++
	v := c.r.cfg.ValueBase + c.r.values
	c.r.mu.Unlock()
	w := c.r.h.Write(c.id, c.svc.Node, key, token, v)
	accepted, newer, err := c.r.store.Write(key, token, v)
	switch {
	case err != nil:
		w.Unknown() // the answer was lost; the write may have happened
	case accepted:
		w.Accepted()
	default:
		w.Rejected()
	}
	return accepted && err == nil, newer
}

// Holder picks a long holder that holds its lock now.
func (r *Runner) Holder(rng *rand.Rand) (client, agent int, resource string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := sortedKeys(r.holds)
	if len(ids) == 0 {
		return -1, -1, "", false
	}
	id := ids[rng.IntN(len(ids))]
	h := r.holds[id]
	return id, h.agent, h.resource, true
}

// Arm stops long holder client at the point of writing under its token,
// until the process is stopped and continued (Hooks.WaitWake): then it
// writes under that token without looking whether the lock was lost, as
// a process paused between its check and its write would. It waits at
// most d for the holder to get there.
func (r *Runner) Arm(client int, d time.Duration) Armed {
	r.mu.Lock()
	h := r.holds[client]
	r.mu.Unlock()
	if h == nil {
		return Armed{}
	}
	reply := make(chan Armed, 1)
	select {
	case h.arm <- reply:
	case <-time.After(d):
		return Armed{}
	}
	select {
	case a := <-reply:
		return a
	case <-time.After(d):
		return Armed{}
	}
}

// Pin keeps long holder client holding its lock for at least d more
// (until then its planned end does not let it go; losing the lock
// still does): a holder busy with its work while a fault cuts its node
// off, whose lock must not be given to another while it still trusts
// it. It reports whether client held a lock to pin.
func (r *Runner) Pin(client int, d time.Duration) bool {
	r.mu.Lock()
	h := r.holds[client]
	r.mu.Unlock()
	if h == nil {
		return false
	}
	// The holder takes the latest pin; one it has not taken yet is
	// replaced.
	for {
		select {
		case h.pin <- d:
			return true
		default:
		}
		select {
		case <-h.pin:
		default:
		}
	}
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

func (r *Runner) addIncrement(inc check.Increment) {
	r.mu.Lock()
	r.incs = append(r.incs, inc)
	r.mu.Unlock()
	if r.hooks.Increment != nil {
		r.hooks.Increment(inc)
	}
}

func (r *Runner) addObservation(o check.Observation) {
	r.mu.Lock()
	r.obs = append(r.obs, o)
	r.mu.Unlock()
	if r.hooks.Observation != nil {
		r.hooks.Observation(o)
	}
}

func (r *Runner) addFrozen(w FrozenWrite) {
	r.mu.Lock()
	r.frozen = append(r.frozen, w)
	r.mu.Unlock()
	if r.hooks.Frozen != nil {
		r.hooks.Frozen(w)
	}
}

// Results returns what the workloads saw; call it after Run and Finish.
func (r *Runner) Results() Results {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Results{Increments: append([]check.Increment(nil), r.incs...), Final: r.final,
		Observations: append([]check.Observation(nil), r.obs...),
		FrozenWrites: append([]FrozenWrite(nil), r.frozen...), Clients: r.perClient}
}
