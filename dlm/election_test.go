package dlm

import (
	"context"
	"errors"
	"testing"
)

func TestElection(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		ctx, cancel := context.WithCancel(bg)
		defer cancel()
		if _, err := c.ls[1].Election("e").Leader(ctx); !errors.Is(err, ErrNoLeader) {
			t.Fatalf("Leader before any campaign: %v", err)
		}
		seen := c.ls[2].Election("e").Observe(ctx)
		if l := <-seen; l.Value != nil {
			t.Fatalf("first observation %+v, want no leader", l)
		}
		first, err := c.ls[0].Election("e").Campaign(ctx, []byte("one"))
		if err != nil {
			t.Fatal(err)
		}
		if l := <-seen; string(l.Value) != "one" || l.Token != first.Token() || !l.Valid {
			t.Fatalf("observed %+v, want one with token %d", l, first.Token())
		}
		if l, err := c.ls[1].Election("e").Leader(ctx); err != nil || string(l.Value) != "one" {
			t.Fatalf("Leader = %+v, %v", l, err)
		}
		// A second candidate waits while the first leads.
		won := make(chan *Leadership, 1)
		go func() {
			l, err := c.ls[1].Election("e").Campaign(ctx, []byte("two"))
			if err != nil {
				t.Error(err)
			}
			won <- l
		}()
		synctestWait()
		select {
		case <-won:
			t.Fatal("second candidate won while the first leads")
		default:
		}
		if l, err := c.ls[2].Election("e").Leader(ctx); err != nil || string(l.Value) != "one" {
			t.Fatalf("Leader while a candidate waits = %+v, %v", l, err)
		}
		if err := first.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		second := <-won
		var l Leader
		for l = range seen {
			if string(l.Value) == "two" {
				break
			}
		}
		if l.Token <= first.Token() || l.Token != second.Token() {
			t.Fatalf("second leader token %d, first %d", l.Token, first.Token())
		}
		if err := second.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if l := <-seen; l.Value != nil {
			t.Fatalf("after the last resignation observed %+v, want no leader", l)
		}
		big := make([]byte, 64)
		if _, err := c.ls[0].Election("e").Campaign(ctx, big); !errors.Is(err, ErrLimit) {
			t.Fatalf("oversized value: %v", err)
		}
	})
}
