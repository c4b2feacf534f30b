package workload

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/dlm"
)

// soloLockspace starts a one-member cluster on loopback and returns its
// lockspace.
func soloLockspace(t *testing.T) *dlm.Lockspace {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gossip := l.Addr().String()
	l.Close()
	cfg := dlm.DefaultConfig()
	cfg.Name, cfg.Members, cfg.GossipAddr, cfg.LinkAddr = "m1", []string{"m1"}, gossip, "127.0.0.1:0"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := dlm.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	ls, err := n.Lockspace("chaos")
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// TestPinnedHolderHoldsPastItsPlannedEnd pins a long holder that means to
// hold for 200 ms: it lets go no sooner than the pin says, and a pin of a
// client that holds nothing is refused.
func TestPinnedHolderHoldsPastItsPlannedEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster member and holds a lock for 2 s")
	}
	ls := soloLockspace(t)
	type event struct {
		client int
		at     time.Time
	}
	held, unheld := make(chan event, 16), make(chan event, 16)
	cfg := DefaultConfig()
	// Three clients: a register writer, a mixer and a long holder.
	cfg.Clients, cfg.Candidates, cfg.Readers, cfg.Probes, cfg.Keeper = 3, 0, 0, false, false
	cfg.LongHoldMin, cfg.LongHoldMax = 200*time.Millisecond, 200*time.Millisecond
	var mu sync.Mutex
	holding := map[int]bool{}
	hooks := Hooks{
		Hold: func(client, _ int, _ string, _ uint64, _ time.Duration) {
			mu.Lock()
			first := !holding[client]
			holding[client] = true
			mu.Unlock()
			if first {
				held <- event{client, time.Now()}
			}
		},
		Unhold: func(client int) {
			mu.Lock()
			delete(holding, client)
			mu.Unlock()
			unheld <- event{client, time.Now()}
		},
	}
	h := check.NewHistory(time.Now)
	r := New(h, NewStore(), []Service{{Node: "m1", Agent: -1, LS: Embedded(ls)}}, cfg, hooks)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	if r.Pin(1<<30, time.Second) {
		t.Fatal("a client that holds nothing was pinned")
	}
	wait := func(ch chan event, what string) event {
		t.Helper()
		select {
		case e := <-ch:
			return e
		case <-time.After(20 * time.Second):
			t.Fatalf("no %s within 20 s", what)
			return event{}
		}
	}
	const pin = 2 * time.Second
	hold := wait(held, "long hold")
	pinned := time.Now()
	if !r.Pin(hold.client, pin) {
		t.Fatalf("long holder %d was not pinned", hold.client)
	}
	let := wait(unheld, "let go")
	if let.client != hold.client {
		t.Fatalf("client %d let go, want %d", let.client, hold.client)
	}
	if d := let.at.Sub(pinned); d < pin {
		t.Fatalf("the pinned holder let go %v after the pin, want at least %v (its own hold was 200 ms)", d, pin)
	}
	// The next hold is not pinned: it lets go after its own 200 ms.
	next := wait(held, "second long hold")
	if let := wait(unheld, "second let go"); let.at.Sub(next.at) >= pin {
		t.Fatalf("an unpinned hold lasted %v", let.at.Sub(next.at))
	}
}
