package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/clientport"
	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/modes"
)

// TestLostFloodKeepsTheSession: a session whose locks are all lost at
// once, many times over what its agent may keep of the frames it sent
// (MaxOutbox), is told of every loss and carries on. The agent sends the
// pushes only as fast as the client acknowledges them, and the client,
// which sends no request meanwhile, acknowledges them alone.
func TestLostFloodKeepsTheSession(t *testing.T) {
	// About 130 B of notes each: 4 × MaxOutbox. Taken well within their
	// TTL, so that they are lost together, while the client sends nothing.
	const locks = 4000
	reg := prometheus.NewRegistry()
	a := startAgents(t, 1, func(cfg *clientport.Config) {
		cfg.Registerer, cfg.MaxOutbox = reg, 128<<10
	}, nil)
	c := dial(t, a.addrs[0])
	session := c.Session()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ls := c.Lockspace("test")
	held := make([]*Lock, locks)
	for i := range held {
		lk, err := ls.Lock(ctx, fmt.Sprintf("flood/%d", i), modes.EX, lockapi.WithTTL(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		held[i] = lk
	}
	for i, lk := range held {
		select {
		case <-lk.Lost():
		case <-ctx.Done():
			t.Fatalf("lock %d of %d not lost: %v", i, locks, ctx.Err())
		}
	}
	// The client's own clock gives up a little before the master does;
	// then the master releases the last lock too.
	other := dial(t, a.addrs[0])
	if _, err := other.Lockspace("test").Lock(ctx, fmt.Sprintf("flood/%d", locks-1), modes.EX); err != nil {
		t.Fatalf("the last lost lock, taken by another client: %v", err)
	}
	if _, err := ls.Lock(ctx, "after", modes.EX); err != nil {
		t.Fatalf("a lock after the flood: %v", err)
	}
	if got := c.Session(); got != session {
		t.Fatalf("session %x after the flood, want %x still", got, session)
	}
	if n := counterOf(t, reg, "dlm_client_refused_total", "reason", "unacknowledged"); n != 0 {
		t.Fatalf("refused{unacknowledged} = %v, want 0", n)
	}
}
