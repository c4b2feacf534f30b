package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/modes"
)

// gateProxy forwards loopback connections to an agent. While held, the
// connections it accepts wait (their bytes unread) until release, so that
// a test can let requests pile up while the client reconnects.
type gateProxy struct {
	t     *testing.T
	ln    net.Listener
	to    string
	mu    sync.Mutex
	open  chan struct{} // closed while connections pass
	conns []net.Conn
	count int // connections accepted
	wg    sync.WaitGroup
}

func startGateProxy(t *testing.T, to string) *gateProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &gateProxy{t: t, ln: ln, to: to, open: make(chan struct{})}
	close(p.open)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *gateProxy) addr() string { return p.ln.Addr().String() }

func (p *gateProxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.count++
		p.conns = append(p.conns, down)
		open := p.open
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			<-open
			up, err := net.Dial("tcp", p.to)
			if err != nil {
				_ = down.Close()
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, down); _ = up.Close() }()
			_, _ = io.Copy(down, up)
			_ = down.Close()
		}()
	}
}

// hold makes new connections wait, and cuts the ones that pass now.
func (p *gateProxy) hold() {
	p.mu.Lock()
	p.open = make(chan struct{})
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// release lets the waiting connections through.
func (p *gateProxy) release() {
	p.mu.Lock()
	close(p.open)
	p.mu.Unlock()
}

func (p *gateProxy) accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}

func (p *gateProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestResumeSendsWaitingRequestsOnce: requests made while the connection
// is down wait for the resume and are then sent once each, with ids the
// agent takes: every one is answered on the resumed connection, and the
// client needs no further reconnection (an id the agent refuses ends the
// connection).
func TestResumeSendsWaitingRequestsOnce(t *testing.T) {
	a := startAgents(t, 1, nil, nil)
	p := startGateProxy(t, a.addrs[0])
	c := dial(t, p.addr())
	ls := c.Lockspace("test")
	held, err := ls.Lock(bg, "resume-held", modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	session := c.Session()

	for round := range 10 {
		p.hold()
		waitFor(t, 5*time.Second, "the client to see its connection cut", func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.cn == nil
		})
		const n = 60
		errs := make(chan error, n)
		for i := range n {
			go func() {
				ctx, cancel := context.WithTimeout(bg, 10*time.Second)
				defer cancel()
				var err error
				switch i % 3 {
				case 0:
					_, err = ls.Describe(ctx, fmt.Sprintf("resume-%d", i))
				case 1:
					var lk *Lock
					if lk, err = ls.TryLock(ctx, fmt.Sprintf("resume-%d-%d", round, i), modes.PR); err == nil {
						err = lk.Unlock()
					}
				default:
					err = held.refresh(ctx)
				}
				errs <- err
			}()
		}
		// Every request is made (and waits for the connection) before the
		// resume goes through.
		waitFor(t, 3*time.Second, "the requests to wait for the connection", func() bool { return unsent(c) >= n })
		p.release()
		for range n {
			if err := within(t, errs, 15*time.Second, "a request made while the connection was down"); err != nil {
				t.Fatalf("round %d: %v (%d connections)", round, err, p.accepted())
			}
		}
		if got, want := p.accepted(), 2+round; got != want {
			t.Fatalf("round %d: %d connections to the agent, want %d (one resume per drop): the agent refused something", round, got, want)
		}
	}
	if c.Session() != session {
		t.Fatalf("session %x after the resumes, was %x", c.Session(), session)
	}
	select {
	case <-held.Lost():
		t.Fatalf("lock lost across the resumes: %v", held.Err())
	default:
	}
	if err := held.Unlock(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// unsent counts the requests waiting for a connection to be sent on.
func unsent(c *Client) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, cl := range c.pending {
		if !cl.sent {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestConcurrentRequestsKeepIDOrder: many goroutines locking and unlocking
// at once on one connection (unlocks leave lazily, with the next request)
// never put a request id on the wire below one sent before it: the agent
// would refuse it and end the connection.
func TestConcurrentRequestsKeepIDOrder(t *testing.T) {
	a := startAgents(t, 1, nil, nil)
	p := startGateProxy(t, a.addrs[0])
	c := dial(t, p.addr())
	ls := c.Lockspace("test")
	const workers, each = 16, 200
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := range each {
				lk, err := ls.Lock(bg, fmt.Sprintf("order-%d-%d", w, i%4), modes.EX)
				if err == nil {
					err = lk.Unlock()
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := within(t, errs, 20*time.Second, "a worker"); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.accepted(); got != 1 {
		t.Fatalf("%d connections to the agent, want 1: the agent refused a request id", got)
	}
}
