package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/workload"
	"github.com/seed-a6839e30/dlm/client"
	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/internal/seam"
)

// workerEnv names the file of a worker's spec: a process started with it
// is a worker, not the harness.
const workerEnv = "DLM_CHAOS_WORKER"

// workerSpec is what a worker process runs: its workload clients, the
// cluster member they lock through, where it records and whom it tells.
type workerSpec struct {
	Name string `json:"name"` // w1, w2, ...: the history's node name for its clients
	// Origin is the run's time zero, in CLOCK_MONOTONIC nanoseconds.
	Origin int64 `json:"origin"`
	// Dir receives journal-NAME-PID.jsonl and results-NAME-PID.jsonl, a
	// pair per boot.
	Dir string `json:"dir"`
	// Control and Store are the harness's Unix sockets.
	Control string `json:"control"`
	Store   string `json:"store"`
	// Member configures the cluster member the clients lock through;
	// Client, if set instead, has them lock through agents' client
	// ports.
	Member   memberSpec      `json:"member"`
	Client   *clientSpec     `json:"client,omitempty"`
	Workload workload.Config `json:"workload"`
}

type memberSpec struct {
	Members           []string      `json:"members"`
	Seeds             []string      `json:"seeds"`
	GossipAddr        string        `json:"gossip_addr"`
	LinkAddr          string        `json:"link_addr"`
	UnsafeNoLockDelay bool          `json:"unsafe_no_lock_delay"`
	Lease             time.Duration `json:"lease"`
}

// clientSpec is a worker whose clients lock through the client protocol:
// Sessions clients of package client, each dialling every agent's client
// port, starting with a home agent of its own (Home, Home+1, ...).
type clientSpec struct {
	Addrs  []string `json:"addrs"`  // the agents' client ports
	Agents []string `json:"agents"` // their names, in the same order
	Home   int      `json:"home"`
	// Sessions is how many clients (sessions) the worker opens; its
	// workload clients are spread over them.
	Sessions int `json:"sessions"`
	// SessionTTL is how long a session outlives its client at the agent:
	// shorter than a pause, so that a paused holder's lock is given to
	// another before it wakes.
	SessionTTL time.Duration `json:"session_ttl"`
	// ClockDrift is the clients' (client.Config.ClockDrift): how much
	// sooner than the agent's answers allow they stop trusting their
	// locks. It is also the margin against this process being
	// descheduled, on a loaded machine, between its trust running out
	// and its noticing (a pause, which the checks take as a belief).
	ClockDrift float64 `json:"clock_drift"`
}

// ctlMsg is a line on a worker's control connection: an event from the
// worker (Ev) or a command from the harness (Cmd).
type ctlMsg struct {
	Ev      string         `json:"ev,omitempty"`  // hello, ready, hold, unhold, armed, quiet
	Cmd     string         `json:"cmd,omitempty"` // arm, pin, quiesce
	Worker  string         `json:"w,omitempty"`
	Pid     int            `json:"pid,omitempty"`
	Client  int            `json:"c,omitempty"`
	Agent   int            `json:"a,omitempty"` // a hold's agent, plus one (0: none)
	Res     string         `json:"r,omitempty"`
	Token   uint64         `json:"tok,omitempty"`
	OK      bool           `json:"ok,omitempty"`
	Clients map[string]int `json:"clients,omitempty"`
	// For is how long a long holder means to hold its lock (hold), or
	// must hold it at least (pin).
	For time.Duration `json:"for,omitempty"`
}

// resultLine is a line of a worker's results file.
type resultLine struct {
	Increment   *check.Increment      `json:"inc,omitempty"`
	Observation *check.Observation    `json:"obs,omitempty"`
	Frozen      *workload.FrozenWrite `json:"frozen,omitempty"`
}

// runWorker is a worker process's main: it returns its exit status.
func runWorker(specPath string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := worker(specPath, log); err != nil {
		log.Error("worker failed", "err", err)
		return 1
	}
	return 0
}

func worker(specPath string, log *slog.Logger) error {
	b, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	var spec workerSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("spec %s: %w", specPath, err)
	}
	pid := os.Getpid()
	// SIGCONT tells an armed holder it was frozen and woke; SIGTERM ends
	// the worker. Both are caught before anything runs.
	conts := make(chan os.Signal, 1)
	signal.Notify(conts, syscall.SIGCONT)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	// Every record and result is one write(2) to a file, unbuffered: a
	// SIGKILL loses none of what happened before it.
	open := func(kind string) (*os.File, error) {
		return os.OpenFile(filepath.Join(spec.Dir, fmt.Sprintf("%s-%s-%d.jsonl", kind, spec.Name, pid)),
			os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o644)
	}
	jf, err := open("journal")
	if err != nil {
		return err
	}
	defer jf.Close()
	rf, err := open("results")
	if err != nil {
		return err
	}
	defer rf.Close()
	h := check.NewHistory(monoNow)
	h.StartAt(time.Unix(0, spec.Origin))
	h.Journal(jf)
	var rmu sync.Mutex
	result := func(l resultLine) {
		b, _ := json.Marshal(l)
		rmu.Lock()
		defer rmu.Unlock()
		if _, err := rf.Write(append(b, '\n')); err != nil {
			log.Error("results", "err", err)
		}
	}

	conn, err := net.Dial("unix", spec.Control)
	if err != nil {
		return fmt.Errorf("control: %w", err)
	}
	defer conn.Close()
	var cmu sync.Mutex
	enc := json.NewEncoder(conn)
	send := func(m ctlMsg) {
		cmu.Lock()
		defer cmu.Unlock()
		if err := enc.Encode(m); err != nil {
			log.Warn("control", "err", err)
		}
	}
	send(ctlMsg{Ev: "hello", Worker: spec.Name, Pid: pid})

	var services []workload.Service
	if spec.Client != nil {
		closeAll, svcs, err := dialAgents(ctx, spec.Name, *spec.Client, log)
		defer closeAll()
		if err != nil {
			return err
		}
		services = svcs
	} else {
		node, err := startMember(ctx, spec, log)
		if err != nil {
			return err
		}
		defer node.Close()
		ls, err := node.Lockspace("chaos")
		if err != nil {
			return err
		}
		services = []workload.Service{{Node: spec.Name, Agent: -1, LS: workload.Embedded(ls)}}
	}
	store := workload.NewRemoteStore(spec.Store)
	defer store.Close()
	hooks := workload.Hooks{
		Hold: func(c, agent int, res string, tok uint64, d time.Duration) {
			send(ctlMsg{Ev: "hold", Client: c, Agent: agent + 1, Res: res, Token: tok, For: d})
		},
		Unhold:      func(c int) { send(ctlMsg{Ev: "unhold", Client: c}) },
		Increment:   func(i check.Increment) { result(resultLine{Increment: &i}) },
		Observation: func(o check.Observation) { result(resultLine{Observation: &o}) },
		Frozen:      func(w workload.FrozenWrite) { result(resultLine{Frozen: &w}) },
		WaitWake: func(d time.Duration) bool {
			select {
			case <-conts:
				return true
			case <-time.After(d):
				return false
			}
		},
	}
	wl := spec.Workload
	wl.ValueBase = int64(pid) << 28
	r := workload.New(h, store, services, wl, hooks)
	wctx, wstop := context.WithCancel(ctx)
	defer wstop()
	done := make(chan struct{})
	go func() { defer close(done); r.Run(wctx) }()
	send(ctlMsg{Ev: "ready", Clients: r.Clients()})

	// Commands; the connection closing means the harness is gone.
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		defer wstop()
		sc := bufio.NewScanner(conn)
		for sc.Scan() {
			var m ctlMsg
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				log.Warn("control: bad line", "err", err)
				continue
			}
			switch m.Cmd {
			case "arm":
				// A SIGCONT left from an earlier pause must not wake
				// this holder: drain it before it arms.
				select {
				case <-conts:
				default:
				}
				go func() {
					a := r.Arm(m.Client, time.Second)
					send(ctlMsg{Ev: "armed", Client: m.Client, OK: a.OK, Token: a.Token, Res: a.Resource})
				}()
			case "pin":
				r.Pin(m.Client, m.For)
			case "quiesce":
				wstop()
			}
		}
	}()
	// The clients run until the harness asks for quiet (before it reads
	// the counter), SIGTERM, or the harness is gone.
	<-wctx.Done()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		return errors.New("clients did not stop within 20s")
	}
	send(ctlMsg{Ev: "quiet"})
	select {
	case <-ctx.Done():
	case <-gone:
	}
	log.Info("worker stopping", "journal", h.JournalErr())
	return h.JournalErr()
}

// startMember starts the worker's own cluster member.
func startMember(ctx context.Context, spec workerSpec, log *slog.Logger) (*dlm.Node, error) {
	cfg := dlm.DefaultConfig()
	cfg.Name, cfg.Members, cfg.Seeds = spec.Name, spec.Member.Members, spec.Member.Seeds
	cfg.GossipAddr, cfg.LinkAddr = spec.Member.GossipAddr, spec.Member.LinkAddr
	if spec.Member.Lease > 0 {
		cfg.Lease = spec.Member.Lease
	}
	cfg.Logger = log
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if spec.Member.UnsafeNoLockDelay {
		sctx = seam.WithoutLockDelay(sctx) // the control run only
	}
	node, err := dlm.Start(sctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", spec.Name, err)
	}
	return node, nil
}

// dialAgents opens the worker's sessions with the agents' client ports:
// session k dials every agent, starting with agent Home+k. Each is a
// service of its own, named NAME-k in the history (its probe's resource
// and its clients' node), and says which agent it is with now (Via).
func dialAgents(ctx context.Context, name string, cs clientSpec, log *slog.Logger) (func(), []workload.Service, error) {
	var clients []*client.Client
	closeAll := func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}
	n := len(cs.Addrs)
	if n == 0 || len(cs.Agents) != n || cs.Sessions < 1 {
		return closeAll, nil, fmt.Errorf("client spec: %d addresses, %d agent names, %d sessions", n, len(cs.Agents), cs.Sessions)
	}
	var services []workload.Service
	for k := range cs.Sessions {
		cfg := client.DefaultConfig()
		for j := range n {
			cfg.Addrs = append(cfg.Addrs, cs.Addrs[(cs.Home+k+j)%n])
		}
		node := fmt.Sprintf("%s-%d", name, k+1)
		cfg.Name, cfg.SessionTTL, cfg.ClockDrift = node, cs.SessionTTL, cs.ClockDrift
		cfg.Logger = log.With("session", node)
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		c, err := client.DialConfig(dctx, cfg)
		cancel()
		if err != nil {
			return closeAll, nil, fmt.Errorf("session %s: %w", node, err)
		}
		clients = append(clients, c)
		via := func() int { return slices.Index(cs.Agents, c.Node()) }
		services = append(services, workload.Service{Node: node, Agent: -1, Via: via, LS: workload.Client(c.Lockspace("chaos"))})
	}
	return closeAll, services, nil
}
