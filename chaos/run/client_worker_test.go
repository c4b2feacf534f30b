package main

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/proc"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/verdict"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/workload"
	"github.com/seed-a6839e30/dlm/clientport"
	"github.com/seed-a6839e30/dlm/dlm"
)

// TestClientWorkerPausedPastItsSession runs one client worker process (this
// test binary) whose clients lock through the client port of m1, one of
// three members in the test, and freezes it the way pause-holder does: a
// long holder stopped at its write, a witness asking for its lock from m2,
// the process frozen for twice its session's TTL. The agent ends the
// session, the witness gets the lock and writes, and the frozen holder's
// write when it wakes is refused; its clients carry on in a new session,
// and the merged history passes every check.
func TestClientWorkerPausedPastItsSession(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process and runs for about 15 s")
	}
	dir := t.TempDir()
	lf, err := os.Create(filepath.Join(dir, "test.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	log := slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	members := []string{"m1", "m2", "m3"}
	gossip := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	nodes := make([]*dlm.Node, 3)
	g, gctx := errgroup.WithContext(context.Background())
	for i := range nodes {
		cfg := dlm.DefaultConfig()
		cfg.Name, cfg.Members, cfg.Seeds, cfg.GossipAddr = members[i], members, gossip, gossip[i]
		cfg.Logger = log
		g.Go(func() (err error) { nodes[i], err = dlm.Start(gctx, cfg); return err })
	}
	err = g.Wait()
	defer func() {
		for _, n := range nodes {
			if n != nil {
				n.Close()
			}
		}
	}()
	if err != nil {
		t.Fatal(err)
	}
	pcfg := clientport.DefaultConfig()
	pcfg.Node, pcfg.Logger = nodes[0], log
	port, err := clientport.New(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	portLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var portWG sync.WaitGroup
	portWG.Go(func() { _ = port.Serve(portLn) })
	defer func() { port.Close(); portWG.Wait() }()

	ctlLn, storeLn, store := harnessSockets(t)

	origin := monoNow()
	sup := proc.NewSupervisor(log)
	defer sup.Close()
	ws := newWorkers(ctlLn, 1, log) // process 0 is the agent, m1
	defer ws.close()
	const ttl = 2 * time.Second
	wl := workload.DefaultConfig()
	// No counter, as in a run's client workers (docs/NEMESIS.md says why).
	wl.Clients, wl.Candidates, wl.Readers, wl.Keeper, wl.FirstID, wl.NoCounter = 5, 1, 0, false, 1000, true
	spec := workerSpec{Name: "c1", Origin: origin.UnixNano(), Dir: dir, Control: ctlLn.Addr().String(),
		Store: storeLn.Addr().String(), Workload: wl,
		Client: &clientSpec{Addrs: []string{portLn.Addr().String()}, Agents: []string{"m1"}, Sessions: 1,
			SessionTTL: ttl, ClockDrift: 0.05}}
	path, err := writeSpec(dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.add(sup, proc.Spec{Name: "c1", Path: os.Args[0], Env: append(os.Environ(), workerEnv+"="+path),
		Log: filepath.Join(dir, "c1.log")}); err != nil {
		t.Fatal(err)
	}
	if err := ws.waitReady(context.Background(), 0); err != nil {
		t.Fatalf("%v\n%s", err, readLog(dir, "c1.log"))
	}

	ls, err := nodes[1].Lockspace("chaos")
	if err != nil {
		t.Fatal(err)
	}
	h, hr, hctx, hstop := harnessRunner(t, dir, origin, store, "m2", ls, 1, 1)

	holder := waitHolder(t, ws)
	// The hold names the agent it goes through: the nemeses strike it.
	if holder.Worker != 1 || holder.Node != 0 {
		t.Fatalf("holder %+v: want worker 1 holding through agent 0 (m1)", holder)
	}
	if !ws.arm(holder) {
		t.Fatalf("holder %+v did not arm", holder)
	}
	hr.Witness(hctx, holder.Resource, 20*time.Second)
	time.Sleep(50 * time.Millisecond)
	p := ws.procs[0].proc
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	h.Freeze("c1-1")
	time.Sleep(2 * ttl)
	wokeAt := h.Elapsed()
	if err := p.Cont(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := ws.quiesce(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	hstop()
	if err := hr.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ws.stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}

	merged, err := gather(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := readResults(dir, hr.Results())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.FrozenWrites) != 1 || !res.FrozenWrites[0].Paused || res.FrozenWrites[0].Accepted || !res.FrozenWrites[0].Newer {
		t.Fatalf("frozen writes %+v: want one, after a pause, refused for a newer token", res.FrozenWrites)
	}
	var after int
	for _, r := range merged.Records() {
		if r.Node == "c1-1" && r.Kind == check.Acquire && r.Outcome == check.OK && r.Call > wokeAt {
			after++
		}
	}
	if after == 0 {
		t.Fatal("no grant to the client worker after it woke: its clients did not carry on in a new session")
	}
	v := verdict.Judge(verdict.Input{History: merged, Results: res, CheckTimeout: time.Minute, Dir: dir,
		Probe: check.AvailabilityOptions{Prefix: workload.ProbePrefix}})
	if !v.OK {
		t.Fatalf("%s\n%s\n%s", v.Summary(), strings.Join(v.Violations, "\n"), strings.Join(v.Inconclusive, "\n"))
	}
}
