package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/proc"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/verdict"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/workload"
	"github.com/seed-a6839e30/dlm/dlm"
)

func TestMain(m *testing.M) {
	// The test binary is also the worker the tests start.
	if spec := os.Getenv(workerEnv); spec != "" {
		os.Exit(runWorker(spec))
	}
	os.Exit(m.Run())
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0])
}

// TestWorkerFrozenKilledAndMerged runs one worker process (this test
// binary) as the third member of a cluster whose other two members live in
// the test, and strikes it the way the nemeses do: a long holder stopped
// at its write, the process frozen past its lease (it records nothing
// while frozen; its late write is refused, for a witness wrote in
// between), then killed and restarted. The journals of the test and of
// both boots merge into one history that passes every check.
func TestWorkerFrozenKilledAndMerged(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and runs for about 20 s")
	}
	dir := t.TempDir()
	lf, err := os.Create(filepath.Join(dir, "test.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	log := slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	members := []string{"m1", "m2", "w1"}
	gossip := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	ctlLn, storeLn, store := harnessSockets(t)

	origin := monoNow()
	sup := proc.NewSupervisor(log)
	defer sup.Close()
	ws := newWorkers(ctlLn, 0, log)
	defer ws.close()
	wl := workload.DefaultConfig()
	wl.Clients, wl.Candidates, wl.Readers, wl.Keeper, wl.FirstID = 5, 0, 0, false, 1000
	spec := workerSpec{Name: "w1", Origin: origin.UnixNano(), Dir: dir, Control: ctlLn.Addr().String(),
		Store: storeLn.Addr().String(), Workload: wl,
		Member: memberSpec{Members: members, Seeds: gossip, GossipAddr: gossip[2], LinkAddr: "127.0.0.1:0"}}
	path, err := writeSpec(dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.add(sup, proc.Spec{Name: "w1", Path: os.Args[0], Env: append(os.Environ(), workerEnv+"="+path),
		Log: filepath.Join(dir, "w1.log")}); err != nil {
		t.Fatal(err)
	}
	nodes := make([]*dlm.Node, 2)
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
	if err := ws.waitReady(context.Background(), 0); err != nil {
		t.Fatalf("%v\n%s", err, readLog(dir, "w1.log"))
	}

	ls, err := nodes[0].Lockspace("chaos")
	if err != nil {
		t.Fatal(err)
	}
	h, hr, hctx, hstop := harnessRunner(t, dir, origin, store, "m1", ls, 0, 0)

	// A long holder, stopped at its write; a witness asks for its lock;
	// the worker freezes for two leases.
	holder := waitHolder(t, ws)
	if !ws.arm(holder) {
		t.Fatalf("holder %+v did not arm", holder)
	}
	hr.Witness(hctx, holder.Resource, 20*time.Second)
	time.Sleep(50 * time.Millisecond)
	p := ws.procs[0].proc
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	frozeAt := h.Elapsed()
	h.Freeze("w1")
	time.Sleep(2 * dlm.DefaultConfig().Lease)
	wokeAt := h.Elapsed()
	if err := p.Cont(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)

	// Killed while it runs, restarted, ready again.
	if err := ws.kill(0); err != nil {
		t.Fatal(err)
	}
	h.Crash("w1")
	if err := ws.start(0); err != nil {
		t.Fatalf("%v\n%s", err, readLog(dir, "w1.log"))
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
	journals, _, _ := workerFiles(dir)
	if len(journals) != 2 {
		t.Fatalf("%d worker journals, want one per boot: %v", len(journals), journals)
	}
	var during, after int
	for _, r := range merged.Records() {
		if r.Node != "w1" || r.Kind == check.Crash || r.Kind == check.Lost {
			continue
		}
		if r.Call > frozeAt && r.Call < wokeAt {
			during++
		}
		if r.Call > wokeAt {
			after++
		}
	}
	if during != 0 || after == 0 {
		t.Fatalf("the frozen worker recorded %d calls while frozen (want none) and %d after", during, after)
	}
	if len(res.FrozenWrites) != 1 || !res.FrozenWrites[0].Paused || res.FrozenWrites[0].Accepted {
		t.Fatalf("frozen writes %+v: want one, after a pause, refused", res.FrozenWrites)
	}
	v := verdict.Judge(verdict.Input{History: merged, Results: res, CheckTimeout: time.Minute, Dir: dir,
		Probe: check.AvailabilityOptions{Prefix: workload.ProbePrefix}})
	if !v.OK {
		t.Fatalf("%s\n%s\n%s", v.Summary(), strings.Join(v.Violations, "\n"), strings.Join(v.Inconclusive, "\n"))
	}
	if v.Counter.Final == nil || !v.Counter.Final.Valid || v.Counter.Acked == 0 {
		t.Fatalf("counter %+v", v.Counter)
	}
}

func readLog(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, name))
	return string(b)
}
