//go:build unix

package client

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// helperPermits is a client process that holds permits: it acquires
// "count/permits" (DLM_HELPER_PERMITS) of semaphore res, prints its token
// and waits to be killed.
func helperPermits(ctx context.Context, c *Client, res, spec string) int {
	count, permits, ok := strings.Cut(spec, "/")
	n, err1 := strconv.Atoi(count)
	total, err2 := strconv.Atoi(permits)
	if !ok || err1 != nil || err2 != nil {
		fmt.Println("bad permits:", spec)
		return 2
	}
	sem, err := c.Lockspace("test").Semaphore(res, total)
	if err != nil {
		fmt.Println("semaphore:", err)
		return 1
	}
	p, err := sem.Acquire(ctx, n)
	if err != nil {
		fmt.Println("acquire:", err)
		return 1
	}
	fmt.Println("token", p.Token())
	select {
	case <-p.Lost():
		fmt.Println("lost:", p.Err())
	case <-ctx.Done():
		fmt.Println("never lost")
	}
	return 1
}

// TestKilledSemaphoreHolderProcess: a client process holding every permit
// of a semaphore is killed with SIGKILL. Its permits come back only when
// its session expires, about its TTL after the kill, not before; a
// client of another agent waiting for them is granted them then, with a
// larger token.
func TestKilledSemaphoreHolderProcess(t *testing.T) {
	const ttl = 2 * time.Second
	a := startAgents(t, 3, nil, nil)
	res := a.resourceOn(2, "sem-killed")
	h := startPermitHelper(t, a.addrs[0], res, "3/3", ttl)
	tok, _ := strconv.ParseUint(h.line(t, "token", 30*time.Second), 10, 64)
	sem, err := dial(t, a.addrs[1]).Lockspace("test").Semaphore(res, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sem.TryAcquire(bg, 1); err == nil {
		t.Fatal("a permit was free while the helper held all three")
	}
	granted := make(chan *Permit, 1)
	go func() {
		p, err := sem.Acquire(bg, 2)
		if err != nil {
			t.Error(err)
		}
		granted <- p
	}()
	time.Sleep(100 * time.Millisecond)
	killed := time.Now()
	if err := h.cmd.Process.Kill(); err != nil { // by pid: the process this test started
		t.Fatal(err)
	}
	p := within(t, granted, 3*ttl, "the waiter's permits after the holder was killed")
	if p == nil {
		t.FailNow()
	}
	after := time.Since(killed)
	if after < ttl/2 || after > ttl+2*time.Second {
		t.Fatalf("waiter granted %v after the kill; the session's TTL is %v", after, ttl)
	}
	if p.Token() <= tok {
		t.Fatalf("waiter's token %d not above the killed holder's %d", p.Token(), tok)
	}
	t.Logf("permits re-granted %v after SIGKILL of their holder (session TTL %v)", after, ttl)
	if err := p.Release(); err != nil {
		t.Fatal(err)
	}
}

func startPermitHelper(t *testing.T, addr, res, permits string, ttl time.Duration) *helperProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "DLM_HELPER_ADDR="+addr, "DLM_HELPER_RESOURCE="+res,
		"DLM_HELPER_PERMITS="+permits, "DLM_HELPER_TTL="+ttl.String())
	return runHelper(t, cmd)
}
