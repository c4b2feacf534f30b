package verdict

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sync/errgroup"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/workload"
	"github.com/seed-a6839e30/dlm/dlm"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"),
		goleak.IgnoreAnyFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNodeByAddr"))
}

func freePort(t *testing.T) int {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
		l.Close()
		if err == nil {
			u.Close()
			return p
		}
	}
	t.Fatal("no free port")
	return 0
}

// recordRun runs the workloads for d against three dlm nodes in this
// process over loopback TCP (real sockets, no nemesis) and returns the
// history and its journal.
func recordRun(t *testing.T, d time.Duration) (*check.History, workload.Results, []byte) {
	t.Helper()
	names := []string{"m1", "m2", "m3"}
	addrs := make([]string, len(names))
	for i := range addrs {
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	}
	nodes := make([]*dlm.Node, len(names))
	g, gctx := errgroup.WithContext(context.Background())
	for i := range names {
		cfg := dlm.DefaultConfig()
		cfg.Name, cfg.Members, cfg.Seeds, cfg.GossipAddr = names[i], names, addrs, addrs[i]
		g.Go(func() (err error) { nodes[i], err = dlm.Start(gctx, cfg); return err })
	}
	err := g.Wait()
	t.Cleanup(func() {
		for _, n := range nodes {
			if n != nil {
				n.Close()
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	var mu sync.Mutex
	h := check.NewHistory(nil)
	h.Journal(lockedWriter{&mu, w})
	var svcs []workload.Service
	for i, n := range nodes {
		ls, err := n.Lockspace("chaos")
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, workload.Service{Node: names[i], Agent: -1, LS: workload.Embedded(ls)})
	}
	r := workload.New(h, workload.NewStore(), svcs, workload.DefaultConfig(), workload.Hooks{})
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	r.Run(ctx)
	if err := r.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	w.Flush()
	mu.Unlock()
	if err := h.JournalErr(); err != nil {
		t.Fatal(err)
	}
	return h, r.Results(), buf.Bytes()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bufio.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// TestRealHistoryPassesAndAPlantedOverlapIsCaught: a run's history recorded
// over real sockets passes every checker; the same history, replayed from
// its journal with one overlapping EX grant planted, is caught by the
// overlap check and by the lock model.
func TestRealHistoryPassesAndAPlantedOverlapIsCaught(t *testing.T) {
	h, res, journal := recordRun(t, 3*time.Second)
	end := h.Elapsed()
	v := Judge(Input{History: h, Results: res, Majority: []check.Window{{From: 0, To: end}},
		Settled: []check.Window{{From: 0, To: end}},
		Probe:   check.AvailabilityOptions{Prefix: workload.ProbePrefix}, CheckTimeout: 30 * time.Second, Dir: t.TempDir()})
	if !v.OK {
		t.Fatalf("a run without faults failed:\n%s\n%s", strings.Join(v.Violations, "\n"), strings.Join(v.Inconclusive, "\n"))
	}
	t.Log(v.Summary())
	if v.Stats.Grants < 100 || v.Counter.Acked < 10 || v.Election.Terms < 2 || v.Availability.Slots < 20 {
		t.Fatalf("too little happened: %+v counter %+v election %+v availability %+v", v.Stats, v.Counter, v.Election, v.Availability)
	}
	if v.Counter.Final == nil || v.Counter.Final.Value != int64(v.Counter.Acked) {
		t.Fatalf("counter: final %+v, %d acknowledged", v.Counter.Final, v.Counter.Acked)
	}
	desc, err := SelfTest(bytes.NewReader(journal), check.Options{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("planted and caught: " + desc)
	// Without the plant, the journal replays into a passing history.
	back, err := check.ReadJournal(bytes.NewReader(journal))
	if err != nil {
		t.Fatal(err)
	}
	if r := check.Check(back, check.Options{Checks: check.CheckOverlap | check.CheckModesModel}); !r.OK {
		t.Fatalf("the unplanted journal fails: %s", r)
	}
}

func TestPlantOverlapNeedsAnEXHold(t *testing.T) {
	if _, _, err := PlantOverlap(nil); err == nil {
		t.Fatal("planted into nothing")
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if Percentile(ds, 50) != 5 || Percentile(ds, 99) != 10 || Percentile(ds, 10) != 1 || Percentile(nil, 50) != 0 {
		t.Fatal("percentiles")
	}
}
