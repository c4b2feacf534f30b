package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/modes"
)

// TestKeptAliveSessionOutlivesItsTTL: a session of a short TTL, kept alive
// by its client, keeps a lock mastered on another node for two and a half
// of its TTLs: the agent renews it at the master as often as the TTL
// needs, whichever of its keep-alives it skips.
func TestKeptAliveSessionOutlivesItsTTL(t *testing.T) {
	a := startAgents(t, 3, nil, nil)
	cfg := DefaultConfig()
	cfg.Addrs, cfg.SessionTTL = []string{a.addrs[0]}, 2*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := DialConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res := a.resourceOn(1, "kept")
	lk, err := c.Lockspace("test").Lock(ctx, res, modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-lk.Lost():
		t.Fatalf("lost within 2.5 TTLs: %v", lk.Err())
	case <-time.After(5 * time.Second):
	}
	other := dial(t, a.addrs[2])
	if _, err := other.Lockspace("test").TryLock(ctx, res, modes.EX); !errors.Is(err, lockapi.ErrNotQueued) {
		t.Fatalf("another client's TryLock of the kept lock: %v, want ErrNotQueued", err)
	}
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}
}
