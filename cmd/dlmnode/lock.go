package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	dlmclient "github.com/seed-a6839e30/dlm/client"
	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// Exit statuses of dlmnode lock. They follow flock(1): 1 when the lock
// was not acquired (--nowait, or --wait ran out), 64 (EX_USAGE) for a
// usage error, otherwise COMMAND's own status (128+n if a signal n ended
// it); and three of its own.
const (
	exitNotAcquired = 1  // flock(1)'s default conflict exit code
	exitUsage       = 64 // EX_USAGE, as flock(1)
	exitUnavailable = 69 // EX_UNAVAILABLE: no agent could be reached, or it refused
	exitLost        = 75 // EX_TEMPFAIL: the lock was lost while COMMAND ran; try again
	exitCannotRun   = 126
	exitNotFound    = 127
)

const lockUsage = `usage: dlmnode lock [flags] RESOURCE -- COMMAND [ARGS...]
       dlmnode lock --permits N [--acquire K] [flags] RESOURCE -- COMMAND [ARGS...]

Runs COMMAND while holding a lock on RESOURCE, like flock(1) and
consul lock, through an agent's client port. COMMAND's environment has
DLM_TOKEN (the lock's fencing token: pass it with every write to what the
lock protects), DLM_RESOURCE, DLM_MODE and DLM_LOCKSPACE. The lock is
released when COMMAND exits.

With --permits N, RESOURCE is a counting semaphore of N permits, as with
consul lock -n: COMMAND runs holding K of them (--acquire, 1 by default),
so at most N/K such commands run at once, cluster-wide; requests are served
in arrival order, a large one never overtaken by later small ones. Every
command using the semaphore must give the same N: while anyone holds or
waits for its permits, another N is refused (exit 64). COMMAND's
environment has DLM_TOKEN (this acquisition's fencing token), DLM_RESOURCE,
DLM_LOCKSPACE, DLM_PERMITS (N) and DLM_ACQUIRED (K), and no DLM_MODE.

If the lock is lost while COMMAND runs (the agent died or was cut off, the
session could not be kept alive), COMMAND's process group gets SIGTERM at
once and SIGKILL after --grace, and dlmnode lock says so and exits with 75.
SIGINT and SIGTERM are passed on to COMMAND.

Agents with --client-tls take a client certificate of the cluster's CA
(dlmnode certs client NAME): --tls-cert-file, --tls-key-file and
--tls-ca-file; a node certificate is refused. Agents with a token take
--token-file.

Exit status: COMMAND's own (128+n if signal n ended it); 1 if the lock was
not acquired (--nowait, or --wait ran out; see --conflict-exit-code); 64 for
a usage error (also: --permits other than the semaphore's, or RESOURCE
locked in modes, not a semaphore); 69 if no agent could be reached or one refused the client;
75 if the lock was lost while COMMAND ran; 126 if COMMAND could not be run,
127 if it was not found.

flags:
`

// lockFlags are dlmnode lock's settings.
type lockFlags struct {
	addrs      []string
	mode       modes.Mode
	wait       time.Duration
	nowait     bool
	lockspace  string
	ttl        time.Duration
	grace      time.Duration
	tokenFile  string
	certFile   string
	keyFile    string
	caFile     string
	conflict   int
	resource   string
	command    []string
	connectFor time.Duration
	// permits is the semaphore's number of permits (--permits), 0 for a
	// lock in a mode; acquire is how many of them COMMAND holds.
	permits int
	acquire int
}

func parseLockFlags(args []string, stderr io.Writer) (lockFlags, error) {
	f := lockFlags{mode: modes.EX, lockspace: "default", grace: 5 * time.Second, conflict: exitNotAcquired, connectFor: 10 * time.Second}
	fs := flag.NewFlagSet("lock", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addrs := envOr("DLM_CLIENT_ADDRS", "127.0.0.1:7949")
	fs.StringVar(&addrs, "addr", addrs, "agents' client ports (host:port), comma-separated; the first that answers is used (env DLM_CLIENT_ADDRS)")
	fs.TextVar(&f.mode, "mode", modes.EX, "lock mode: NL, CR, CW, PR, PW or EX")
	fs.DurationVar(&f.wait, "wait", 0, "give up (exit 1) if the lock is not granted within this long; 0 waits as long as it takes")
	fs.BoolVar(&f.nowait, "nowait", false, "give up (exit 1) at once if the lock cannot be granted now")
	fs.StringVar(&f.lockspace, "lockspace", f.lockspace, "lockspace of RESOURCE")
	fs.DurationVar(&f.ttl, "ttl", 0, "session TTL: how long the lock outlives this process if it dies or hangs (0: the agent's default)")
	fs.DurationVar(&f.grace, "grace", f.grace, "after a lost lock, how long COMMAND has between SIGTERM and SIGKILL")
	fs.StringVar(&f.tokenFile, "token-file", os.Getenv("DLM_CLIENT_TOKEN_FILE"), "file holding the agents' client token (env DLM_CLIENT_TOKEN_FILE)")
	fs.StringVar(&f.certFile, "tls-cert-file", os.Getenv("DLM_CLIENT_CERT_FILE"), "PEM client certificate (dlmnode certs client NAME) for agents with --client-tls (env DLM_CLIENT_CERT_FILE)")
	fs.StringVar(&f.keyFile, "tls-key-file", os.Getenv("DLM_CLIENT_KEY_FILE"), "PEM private key of --tls-cert-file (env DLM_CLIENT_KEY_FILE)")
	fs.StringVar(&f.caFile, "tls-ca-file", os.Getenv("DLM_CLIENT_CA_FILE"), "PEM certificate of the cluster's CA: the agent must present a node certificate it signed (env DLM_CLIENT_CA_FILE)")
	fs.IntVar(&f.conflict, "conflict-exit-code", f.conflict, "exit status when the lock was not acquired (flock's -E)")
	fs.DurationVar(&f.connectFor, "connect-timeout", f.connectFor, "how long to try the agents before giving up (exit 69)")
	fs.IntVar(&f.permits, "permits", 0, fmt.Sprintf("RESOURCE is a semaphore of this many permits (1..%d), not a lock in a mode (consul lock -n)", wire.MaxPermits))
	fs.IntVar(&f.acquire, "acquire", 1, "with --permits: how many permits COMMAND holds")
	fs.Usage = func() {
		fmt.Fprint(stderr, lockUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	rest := fs.Args()
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	if len(rest) > 0 {
		f.resource, rest = rest[0], rest[1:]
	}
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	f.command = rest
	bad := func(format string, a ...any) (lockFlags, error) {
		fmt.Fprintf(stderr, "dlmnode lock: "+format+"\n", a...)
		return f, errUsage
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	for _, a := range strings.Split(addrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			f.addrs = append(f.addrs, a)
		}
	}
	switch {
	case f.resource == "":
		return bad("RESOURCE is required (dlmnode lock -h)")
	case len(f.command) == 0:
		return bad("COMMAND is required after RESOURCE (dlmnode lock -h)")
	case len(f.addrs) == 0:
		return bad("--addr names no agent")
	case f.nowait && f.wait != 0:
		return bad("--wait and --nowait exclude each other")
	case f.wait < 0 || f.ttl < 0 || f.grace < 0 || f.connectFor <= 0:
		return bad("durations must not be negative")
	case (f.certFile != "" || f.keyFile != "" || f.caFile != "") && (f.certFile == "" || f.keyFile == "" || f.caFile == ""):
		return bad("mutual TLS needs all of --tls-cert-file, --tls-key-file and --tls-ca-file")
	case f.conflict < 0 || f.conflict > 255:
		return bad("--conflict-exit-code must be in 0..255")
	case set["permits"] && (f.permits < 1 || f.permits > wire.MaxPermits):
		return bad("--permits %d: a semaphore has 1..%d permits", f.permits, wire.MaxPermits)
	case set["acquire"] && !set["permits"]:
		return bad("--acquire is for a semaphore: give its --permits")
	case set["permits"] && (f.acquire < 1 || f.acquire > f.permits):
		return bad("--acquire %d: must be 1..%d, the semaphore's permits", f.acquire, f.permits)
	case set["permits"] && set["mode"]:
		return bad("--mode is for a lock; a semaphore's permits have none")
	}
	return f, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// lockMain is dlmnode lock; it returns the exit status.
func lockMain(args []string, stdout, stderr io.Writer) int {
	f, err := parseLockFlags(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		return exitUsage
	}
	say := func(format string, a ...any) { fmt.Fprintf(stderr, "dlmnode lock: "+format+"\n", a...) }
	cfg := dlmclient.DefaultConfig()
	cfg.Addrs, cfg.Name, cfg.SessionTTL = f.addrs, "dlmnode-lock", f.ttl
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			say("--token-file: %v", err)
			return exitUsage
		}
		cfg.Token = strings.TrimSpace(string(b))
	}
	if f.certFile != "" {
		if cfg.TLS, err = dlmclient.LoadTLS(f.certFile, f.keyFile, f.caFile); err != nil {
			say("%v", err)
			return exitUsage
		}
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// Until COMMAND starts, a signal gives up.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	dctx, dcancel := context.WithTimeout(ctx, f.connectFor)
	c, err := dlmclient.DialConfig(dctx, cfg)
	dcancel()
	if err != nil {
		say("%v", err)
		return exitUnavailable
	}
	defer c.Close()
	ls := c.Lockspace(f.lockspace)
	lctx := ctx
	if f.wait > 0 {
		var lcancel context.CancelFunc
		lctx, lcancel = context.WithTimeout(ctx, f.wait)
		defer lcancel()
	}
	h, err := take(lctx, ls, f)
	switch {
	case errors.Is(err, lockapi.ErrNotQueued), errors.Is(err, lockapi.ErrTimeout) && f.wait > 0 && ctx.Err() == nil:
		say("%s not acquired: %v", f.resource, err)
		return f.conflict
	case errors.Is(err, lockapi.ErrPermitsMismatch):
		say("%s: %v: every command using the semaphore must give the same --permits", f.resource, err)
		return exitUsage
	case errors.Is(err, lockapi.ErrWrongKind) && f.permits > 0:
		say("%s: %v: it is locked in modes, not used as a semaphore", f.resource, err)
		return exitUsage
	case errors.Is(err, lockapi.ErrWrongKind):
		say("%s: %v: it is a semaphore (dlmnode lock --permits)", f.resource, err)
		return exitUsage
	case err != nil:
		say("%s: %v", f.resource, err)
		if ctx.Err() != nil {
			return exitNotAcquired
		}
		return exitUnavailable
	}
	cancel() // signals go to COMMAND from now on
	return runHolding(h, f, sigs, say)
}

// held is what COMMAND runs under: a lock, or permits of a semaphore.
type held interface {
	Token() uint64
	Lost() <-chan struct{}
	Err() error
	release() error
}

type heldLock struct{ *dlmclient.Lock }

func (h heldLock) release() error { return h.Unlock() }

type heldPermits struct{ *dlmclient.Permit }

func (h heldPermits) release() error { return h.Release() }

// take acquires what f asks for: the lock, or the permits.
func take(ctx context.Context, ls *dlmclient.Lockspace, f lockFlags) (held, error) {
	if f.permits > 0 {
		sem, err := ls.Semaphore(f.resource, f.permits)
		if err != nil {
			return nil, err
		}
		var p *dlmclient.Permit
		if f.nowait {
			p, err = sem.TryAcquire(ctx, f.acquire)
		} else {
			p, err = sem.Acquire(ctx, f.acquire)
		}
		if err != nil {
			return nil, err
		}
		return heldPermits{p}, nil
	}
	var lk *dlmclient.Lock
	var err error
	if f.nowait {
		lk, err = ls.TryLock(ctx, f.resource, f.mode)
	} else {
		lk, err = ls.Lock(ctx, f.resource, f.mode)
	}
	if err != nil {
		return nil, err
	}
	return heldLock{lk}, nil
}

// commandEnv is COMMAND's environment: this process's, and what it holds.
func commandEnv(h held, f lockFlags) []string {
	env := append(os.Environ(),
		"DLM_TOKEN="+strconv.FormatUint(h.Token(), 10),
		"DLM_RESOURCE="+f.resource,
		"DLM_LOCKSPACE="+f.lockspace,
	)
	if f.permits > 0 {
		return append(env, "DLM_PERMITS="+strconv.Itoa(f.permits), "DLM_ACQUIRED="+strconv.Itoa(f.acquire))
	}
	return append(env, "DLM_MODE="+f.mode.String())
}

// runHolding runs COMMAND while lk is held, and releases lk when COMMAND
// ends; a lost lock (or permits) ends COMMAND.
func runHolding(lk held, f lockFlags, sigs chan os.Signal, say func(string, ...any)) int {
	cmd := exec.Command(f.command[0], f.command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = commandEnv(lk, f)
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		_ = lk.release()
		say("%v", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotRun
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	lost := false
	var kill <-chan time.Time
	for {
		select {
		case err := <-exited:
			if lost {
				say("COMMAND ended after the lock was lost")
				return exitLost
			}
			if uerr := lk.release(); uerr != nil {
				say("unlock: %v", uerr)
			}
			return statusOf(err, say)
		case s := <-sigs:
			signalGroup(cmd.Process, s)
		case <-lk.Lost():
			if lost {
				continue
			}
			lost = true
			what := "lock on " + f.resource
			if f.permits > 0 {
				what = "permits of " + f.resource
			}
			say("%s lost while COMMAND ran (%v): sending it SIGTERM, SIGKILL in %v", what, lk.Err(), f.grace)
			signalGroup(cmd.Process, syscall.SIGTERM)
			kill = time.After(f.grace)
		case <-kill:
			say("COMMAND still running %v after SIGTERM: SIGKILL", f.grace)
			signalGroup(cmd.Process, syscall.SIGKILL)
			kill = nil
		}
	}
}

// statusOf is the exit status that reports how COMMAND ended.
func statusOf(err error, say func(string, ...any)) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		say("%v", err)
		return exitCannotRun
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}
