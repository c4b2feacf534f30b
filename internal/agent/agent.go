package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/seed-a6839e30/dlm/clientport"
	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/internal/seam"
)

// Agent is one node of a cluster run as a process: the dlm node and the
// servers beside it, each on a listener of its own: the admin HTTP server
// and the client port. Their listeners are bound in Listen, so that a
// taken port is a usage error before the node joins; the client port
// serves once the node does, and closes first when the agent leaves (its
// sessions end, their locks released, before the node leaves).
type Agent struct {
	cfg Config
	set settings
	log *slog.Logger
	reg *prometheus.Registry

	admin     net.Listener
	adminHTTP *http.Server
	client    net.Listener             // nil: no client port
	node      atomic.Pointer[dlm.Node] // nil until the node serves
	ready     chan struct{}            // closed once node is set
	gather    *gatherer
	forward   *http.Client // passes membership changes on to the coordinator; bounded by each request's context
}

// ErrForced is returned by Run when a second signal came before the
// agent had left the cluster.
var ErrForced = errors.New("second signal: exited at once, without leaving the cluster")

// Main runs dlmnode agent with args: it returns the process's exit
// status: 0 after a clean leave, 2 for a bad flag, setting or address, 1
// otherwise. signals delivers SIGINT and SIGTERM, which stop the agent,
// and SIGHUP, which reloads its TLS files.
func Main(args []string, stdout, stderr io.Writer, signals <-chan os.Signal) int {
	cfg, err := Parse(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		var a *Agent
		if a, err = New(cfg, stderr); err == nil {
			if err = a.Listen(); err == nil {
				err = a.Run(signals)
			}
		}
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrUsage):
		fmt.Fprintln(stderr, "dlmnode agent:", strings.TrimPrefix(err.Error(), ErrUsage.Error()+": "))
		return 2
	default:
		fmt.Fprintln(stderr, "dlmnode agent:", err)
		return 1
	}
}

// New prepares an agent: it validates cfg (reading the files it names)
// and sets up logging and metrics. It binds nothing yet.
func New(cfg Config, logOut io.Writer) (*Agent, error) {
	set, err := cfg.build()
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: set.level}
	var h slog.Handler = slog.NewTextHandler(logOut, opts)
	if set.json {
		h = slog.NewJSONHandler(logOut, opts)
	}
	a := &Agent{cfg: cfg, set: set, log: slog.New(h), reg: prometheus.NewRegistry(), ready: make(chan struct{})}
	// The process's own metrics belong to the process, so the agent
	// registers them; the library registers only its own.
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.set.node.Logger, a.set.node.Registerer = a.log, a.reg
	if set.creds != nil {
		if err := set.creds.start(a.log, a.reg); err != nil {
			return nil, err
		}
	}
	a.gather = newGatherer(set.token)
	a.forward = &http.Client{}
	return a, nil
}

// Listen binds the admin listener and checks that the gossip and link
// ports are free, so that a port in use is reported as a usage error
// naming its flag before the node starts. A port taken by someone else
// between this check and the node's own bind still fails Run, as a usage
// error all the same.
func (a *Agent) Listen() error {
	ln, err := net.Listen("tcp", a.set.adminAddr)
	if err != nil {
		return usageError("--admin-addr %s: %v", a.set.adminAddr, bindCause(err))
	}
	a.admin = ln
	if host, port, err := net.SplitHostPort(a.set.adminAdvertise); err == nil && port == "0" {
		// Advertised from a bind to port 0: tell peers the port it got.
		_, got, _ := net.SplitHostPort(ln.Addr().String())
		a.set.adminAdvertise = net.JoinHostPort(host, got)
		a.set.node.Tags = map[string]string{AdminTag: "http://" + a.set.adminAdvertise}
	}
	if a.set.client != nil {
		cl, err := net.Listen("tcp", a.cfg.ClientAddr)
		if err != nil {
			_ = ln.Close()
			return usageError("--client-addr %s: %v", a.cfg.ClientAddr, bindCause(err))
		}
		a.client = cl
	}
	if err := probe("--link-addr", a.set.node.LinkAddr, false); err != nil {
		a.closeListeners()
		return err
	}
	if err := probe("--gossip-addr", a.set.node.GossipAddr, true); err != nil {
		a.closeListeners()
		return err
	}
	return nil
}

func (a *Agent) closeListeners() {
	_ = a.admin.Close()
	if a.client != nil {
		_ = a.client.Close()
	}
}

// ClientAddr returns the address the client port listens on (after
// Listen), "" if it is off.
func (a *Agent) ClientAddr() string {
	if a.client == nil {
		return ""
	}
	return a.client.Addr().String()
}

// probe binds addr (TCP, and UDP if udp) and lets it go again.
func probe(flagName, addr string, udp bool) error {
	if _, port, _ := net.SplitHostPort(addr); port == "0" {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return usageError("%s %s: %v", flagName, addr, bindCause(err))
	}
	_ = l.Close()
	if udp {
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			return usageError("%s %s (UDP): %v", flagName, addr, bindCause(err))
		}
		_ = u.Close()
	}
	return nil
}

// bindCause shortens a bind error to its cause ("address already in use").
func bindCause(err error) error {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err
	}
	return err
}

// AdminAddr returns the address the admin server listens on (after
// Listen).
func (a *Agent) AdminAddr() string { return a.admin.Addr().String() }

// Node returns the agent's node once it serves, nil before.
func (a *Agent) Node() *dlm.Node { return a.node.Load() }

// Ready is closed once the agent's node has joined the cluster and
// serves (Node is then set); it stays open if Run returns before that.
func (a *Agent) Ready() <-chan struct{} { return a.ready }

// Run starts the admin server and the node, and runs until a signal: the
// first SIGINT or SIGTERM leaves the cluster cleanly (releasing this
// node's locks) and Run returns nil once done; a second, before that,
// makes Run return ErrForced at once. SIGHUP reloads the TLS files
// (ReloadTLS) and nothing else.
func (a *Agent) Run(signals <-chan os.Signal) error {
	return untilSignals(signals, a.log, func() { _ = a.ReloadTLS() }, a.serve)
}

// ReloadTLS reads the TLS certificate, key and CAs again: connections
// made from now on, dialled or accepted, use them, and established ones
// keep theirs until they end. Files that do not load (or name another
// node) are refused, logged and counted, and the credentials in use stay.
func (a *Agent) ReloadTLS() error {
	if a.set.creds == nil {
		a.log.Info("SIGHUP: " + errNoTLS.Error())
		return errNoTLS
	}
	return a.set.creds.reload("SIGHUP")
}

// untilSignals runs work until it returns; the first stopping signal
// cancels its context (work then stops cleanly), a second makes
// untilSignals return ErrForced without waiting for work any longer.
// SIGHUP calls hup instead, at any time.
func untilSignals(signals <-chan os.Signal, log *slog.Logger, hup func(), work func(context.Context) error) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- work(ctx) }()
	// next waits for work to end (ok false) or for a stopping signal.
	next := func() (os.Signal, bool, error) {
		for {
			select {
			case err := <-done:
				return nil, false, err
			case sig := <-signals:
				if sig == syscall.SIGHUP {
					hup()
					continue
				}
				return sig, true, nil
			}
		}
	}
	sig, ok, err := next()
	if !ok {
		return err
	}
	log.Info("signal: leaving the cluster; a second signal exits at once", "signal", sig.String())
	cancel()
	if sig, ok, err = next(); !ok {
		return err
	}
	log.Warn("second signal: exiting without leaving cleanly", "signal", sig.String())
	return ErrForced
}

// serve runs the servers and the node until ctx ends, then stops them.
func (a *Agent) serve(ctx context.Context) error {
	a.adminHTTP = &http.Server{
		Handler:           a.adminHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	httpDone := make(chan error, 1)
	go func() { httpDone <- a.adminHTTP.Serve(a.admin) }()
	a.log.Info("admin server listening", "addr", a.AdminAddr(), "advertised", a.set.node.Tags[AdminTag], "token", a.set.token != "")

	if a.set.creds != nil && a.cfg.TLSReloadInterval > 0 {
		watchCtx, stopWatch := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() { defer close(watched); a.set.creds.watch(watchCtx, a.cfg.TLSReloadInterval) }()
		defer func() { stopWatch(); <-watched }()
	}
	cfg := a.set.node
	a.log.Info("joining the cluster", "name", cfg.Name, "members", cfg.Members, "seeds", cfg.Seeds,
		"gossip", cfg.GossipAddr, "link", cfg.LinkAddr)
	startCtx := ctx
	if a.set.unsafeNoLockDelay {
		a.log.Warn("UNSAFE: --unsafe-no-lock-delay re-grants a removed node's locks without waiting for its lease to run out")
		startCtx = seam.WithoutLockDelay(ctx)
	}
	node, err := dlm.Start(startCtx, cfg)
	if err != nil {
		if a.client != nil {
			_ = a.client.Close()
		}
		a.stopHTTP()
		<-httpDone
		switch {
		case ctx.Err() != nil:
			a.log.Info("stopped before joining the cluster")
			return nil
		case errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use"):
			if strings.Contains(err.Error(), "lock traffic") {
				return usageError("--link-addr %s: address already in use", cfg.LinkAddr)
			}
			return usageError("--gossip-addr %s: address already in use", cfg.GossipAddr)
		}
		return err
	}
	a.node.Store(node)
	close(a.ready)
	st := node.Status()
	a.log.Info("serving", "epoch", st.Epoch, "members", cfg.Members)
	clients, clientDone, err := a.serveClients(node)
	if err != nil {
		_ = node.Close()
		a.stopHTTP()
		<-httpDone
		return err
	}

	select {
	case <-ctx.Done():
	case err := <-httpDone:
		a.stopClients(clients, clientDone)
		_ = node.Close()
		return fmt.Errorf("admin server: %w", err)
	case err := <-clientDone:
		_ = node.Close()
		a.stopHTTP()
		<-httpDone
		return fmt.Errorf("client port: %w", err)
	}
	start := time.Now()
	a.stopClients(clients, clientDone) // ends the client sessions, releasing their locks
	err = node.Close()                 // releases this node's locks, then leaves
	a.log.Info("left the cluster", "took", time.Since(start).Round(time.Millisecond))
	a.stopHTTP()
	<-httpDone
	return err
}

// serveClients starts the client port, if there is one.
func (a *Agent) serveClients(node *dlm.Node) (*clientport.Server, chan error, error) {
	done := make(chan error, 1)
	if a.client == nil {
		return nil, done, nil
	}
	cfg := *a.set.client
	cfg.Node, cfg.Logger, cfg.Registerer = node, a.log, a.reg
	srv, err := clientport.New(cfg)
	if err != nil {
		_ = a.client.Close()
		return nil, nil, fmt.Errorf("client port: %w", err)
	}
	go func() { done <- srv.Serve(a.client) }()
	a.log.Info("client port listening", "addr", a.ClientAddr(), "token", cfg.Token != "", "tls", cfg.TLS != nil)
	return srv, done, nil
}

// stopClients closes the client port and waits for it.
func (a *Agent) stopClients(srv *clientport.Server, done chan error) {
	if srv == nil {
		return
	}
	_ = srv.Close()
	<-done
}

func (a *Agent) stopHTTP() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.adminHTTP.Shutdown(ctx); err != nil {
		_ = a.adminHTTP.Close()
	}
}
