package main

import (
	"context"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/nemesis"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/workload"
	"github.com/seed-a6839e30/dlm/dlm"
)

// harnessSockets serves what a test's workers reach the harness by: the
// control socket (returned, for newWorkers) and the fenced register, until
// the test ends.
func harnessSockets(t *testing.T) (ctlLn net.Listener, storeLn net.Listener, store *workload.Store) {
	t.Helper()
	sockDir, err := os.MkdirTemp("", "chaos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	if ctlLn, err = net.Listen("unix", filepath.Join(sockDir, "control")); err != nil {
		t.Fatal(err)
	}
	if storeLn, err = net.Listen("unix", filepath.Join(sockDir, "store")); err != nil {
		t.Fatal(err)
	}
	store = workload.NewStore()
	var wg sync.WaitGroup
	wg.Go(func() { store.Serve(storeLn) })
	t.Cleanup(func() { storeLn.Close(); wg.Wait() })
	return ctlLn, storeLn, store
}

// harnessRunner runs the harness's own clients (the counter's keeper, the
// witnesses, candidates and readers as asked) through ls of node, journaled
// from origin into dir/harness-journal.jsonl; stop ends them.
func harnessRunner(t *testing.T, dir string, origin time.Time, store *workload.Store, node string, ls *dlm.Lockspace,
	candidates, readers int) (h *check.History, hr *workload.Runner, ctx context.Context, stop func()) {
	t.Helper()
	h = check.NewHistory(monoNow)
	h.StartAt(origin)
	jf, err := os.Create(filepath.Join(dir, "harness-journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jf.Close() })
	h.Journal(jf)
	cfg := workload.DefaultConfig()
	cfg.Clients, cfg.Candidates, cfg.Readers, cfg.FirstID = 0, candidates, readers, 1
	hr = workload.New(h, store, []workload.Service{{Node: node, Agent: -1, LS: workload.Embedded(ls)}}, cfg, workload.Hooks{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { hr.Run(ctx) })
	return h, hr, ctx, func() { cancel(); wg.Wait() }
}

// waitHolder waits up to 10 s for a long holder of ws to hold its lock.
func waitHolder(t *testing.T, ws *workers) nemesis.Holder {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	holder, ok := ws.pick(rng)
	for deadline := time.Now().Add(10 * time.Second); !ok && time.Now().Before(deadline); holder, ok = ws.pick(rng) {
		time.Sleep(20 * time.Millisecond)
	}
	if !ok {
		t.Fatal("no long holder in 10 s")
	}
	return holder
}
