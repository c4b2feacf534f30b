package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-a6839e30/dlm/clientport"
	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/lockapi"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// TestDeadlineSendsNoCancel: a Lock whose context's deadline passes while
// it waits sends the agent no ClientCancel (the agent, told the timeout,
// has timed the request out by itself by then), and fails with
// ErrTimeout; the session holds nothing for it afterwards. A Lock whose
// context is cancelled does send one. The agent's node checks timeouts
// an hour apart here, so that its answer never comes before the client's
// deadline (with its 5 ms default, it often does: the client then has
// nothing to abandon), only when the holder lets go.
func TestDeadlineSendsNoCancel(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := startAgents(t, 1, func(cfg *clientport.Config) { cfg.Registerer = reg },
		func(cfg *dlm.Config) { cfg.TickInterval = time.Hour })
	holder, waiter := dial(t, a.addrs[0]), dial(t, a.addrs[0])
	ls := waiter.Lockspace("test")
	cancels := func() float64 {
		return counterOf(t, reg, "dlm_client_requests_total", "type", wire.TypeClientCancel.String())
	}

	lk, err := holder.Lockspace("test").Lock(bg, "r", modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	_, err = ls.Lock(ctx, "r", modes.EX)
	cancel()
	if !errors.Is(err, lockapi.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past its deadline: %v, want ErrTimeout matching context.DeadlineExceeded", err)
	}

	// Cancelled, once the agent has it waiting: a ClientCancel goes.
	ctx, cancel = context.WithCancel(bg)
	errc := make(chan error, 1)
	go func() {
		_, err := ls.Lock(ctx, "r", modes.EX)
		errc <- err
	}()
	eventually(t, 10*time.Second, "the second request to wait", func() bool {
		r, err := holder.Lockspace("test").Describe(bg, "r")
		return err == nil && len(r.Locks) == 2
	})
	cancel()
	if err := within(t, errc, 10*time.Second, "cancelled Lock"); !errors.Is(err, lockapi.ErrCancelled) {
		t.Fatalf("cancelled Lock: %v, want ErrCancelled", err)
	}
	// The agent reads a connection's requests in order: once it answers
	// one sent after the cancel, it has read every ClientCancel the two
	// Locks sent.
	if _, err := ls.Describe(bg, "r"); err != nil {
		t.Fatal(err)
	}
	if n := cancels(); n != 1 {
		t.Fatalf("%v ClientCancel requests, want 1: only the cancelled context's", n)
	}

	// Nothing is left of either request: the next waiter is granted.
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	next, err := ls.Lock(ctx, "r", modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// TestTimeoutAnsweredAtDeadline: the agent times a request out a margin
// before its context's deadline, so that the answer arrives in time; Lock
// and Convert return it at the deadline, with the context done, as an
// embedded node's do. The node checks timeouts every 100 µs here, so
// that its answer comes well within the margin.
func TestTimeoutAnsweredAtDeadline(t *testing.T) {
	a := startAgents(t, 1, nil, func(cfg *dlm.Config) { cfg.TickInterval = 100 * time.Microsecond })
	holder, waiter := dial(t, a.addrs[0]), dial(t, a.addrs[0])
	lk, err := holder.Lockspace("test").Lock(bg, "r", modes.PR)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	_, err = waiter.Lockspace("test").Lock(ctx, "r", modes.EX)
	done := ctx.Err()
	cancel()
	if !errors.Is(err, lockapi.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || done == nil {
		t.Fatalf("Lock past its deadline: %v, context's error %v when it returned; want ErrTimeout matching context.DeadlineExceeded, at the deadline", err, done)
	}

	mine, err := waiter.Lockspace("test").Lock(bg, "r", modes.PR)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(bg, 100*time.Millisecond)
	err = mine.Convert(ctx, modes.EX)
	done = ctx.Err()
	cancel()
	if !errors.Is(err, lockapi.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || done == nil || mine.Mode() != modes.PR {
		t.Fatalf("Convert past its deadline: %v (mode %v), context's error %v when it returned; want ErrTimeout matching context.DeadlineExceeded, at the deadline, PR kept", err, mine.Mode(), done)
	}
	for _, l := range []*Lock{mine, lk} {
		if err := l.Unlock(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTimeoutOf: the agent is asked to time a request out answerMargin
// before the caller's deadline, or halfway to it when that is near.
func TestTimeoutOf(t *testing.T) {
	if got := timeoutOf(context.Background()); got != 0 {
		t.Errorf("no deadline: %v, want 0", time.Duration(got))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if got := time.Duration(timeoutOf(ctx)); got <= 59*time.Minute || got > time.Hour-answerMargin {
		t.Errorf("an hour left: %v, want just under an hour less %v", got, answerMargin)
	}
	for left, want := range map[time.Duration]time.Duration{
		100 * time.Millisecond: 98 * time.Millisecond,
		4 * time.Millisecond:   2 * time.Millisecond,
		3 * time.Millisecond:   1500 * time.Microsecond,
		time.Millisecond:       500 * time.Microsecond,
		-time.Second:           time.Microsecond,
	} {
		if got := timeoutFor(left); got != want {
			t.Errorf("%v left: %v, want %v", left, got, want)
		}
	}
}
