//go:build unix

package main

import (
	"context"
	"testing"
	"time"

	dlmclient "github.com/seed-a6839e30/dlm/client"
	"github.com/seed-a6839e30/dlm/internal/agent"
	"github.com/seed-a6839e30/dlm/modes"
)

// TestAgentSIGTERMReleasesItsLocks: an agent that gets SIGTERM ends its
// clients' sessions and releases their locks as it leaves, so a client of
// another agent waiting for one is granted it at once, with a larger
// token, rather than after the session's TTL (a minute here, longer than
// the waiter waits); the holder's client sees its lock lost.
func TestAgentSIGTERMReleasesItsLocks(t *testing.T) {
	const ttl = time.Minute
	c := startAgents(t, clusterSpec{
		names: []string{"a1", "a2", "a3"}, members: []string{"a1", "a2", "a3"},
		extra: func(*agentProc) []string { return []string{"--client-session-ttl", ttl.String()} },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.waitReady(ctx); err != nil {
		t.Fatal(err)
	}
	a1, a2 := c.proc("a1"), c.proc("a2")
	dial := func(p *agentProc) *dlmclient.Client {
		cfg := dlmclient.DefaultConfig()
		cfg.Addrs, cfg.Name, cfg.SessionTTL = []string{p.client}, "via-"+p.name, ttl
		cl, err := dlmclient.DialConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	holder, other := dial(a1).Lockspace("app"), dial(a2).Lockspace("app")
	const res = "sigterm"
	held, err := holder.Lock(ctx, res, modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, stop := context.WithTimeout(ctx, ttl/2)
	defer stop()
	granted := make(chan error, 1)
	var token uint64
	go func() {
		lk, err := other.Lock(waitCtx, res, modes.EX)
		if err == nil {
			token = lk.Token()
			err = lk.Unlock()
		}
		granted <- err
	}()
	// The waiter is queued before the holder's agent leaves.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var cl agent.ClusterLocks
		getJSON(t, a2.AdminURL()+"/v1/locks?cluster=true&lockspace=app", &cl)
		if r, ok := findResource(cl, "app", res); ok && len(r.Granted) == 1 && len(r.Waiting) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter never showed in the lock dump: %+v", cl)
		}
		time.Sleep(50 * time.Millisecond)
	}

	start := time.Now()
	if err := a1.stop(20 * time.Second); err != nil {
		t.Fatalf("a1 after SIGTERM: %v", err)
	}
	if err := <-granted; err != nil {
		t.Fatalf("the waiter was not granted before half the session TTL: %v", err)
	}
	t.Logf("granted %v after a1's SIGTERM", time.Since(start).Round(time.Millisecond))
	if token <= held.Token() {
		t.Errorf("token %d after %d", token, held.Token())
	}
	select {
	case <-held.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder's client never saw its lock lost")
	}
}
