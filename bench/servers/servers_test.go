package servers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func sh(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("skipped: no sh")
	}
	return p
}

// Stop kills the whole process group, including a grandchild that ignores
// SIGTERM, and removes the directory.
func TestGroupStopKillsProcessGroup(t *testing.T) {
	g, err := NewGroup(t.TempDir(), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := g.Start(Spec{Name: "sh", Path: sh(t), Args: []string{"-c", `trap "" TERM; sleep 60 & echo "child $!"; wait`}})
	if err != nil {
		t.Fatal(err)
	}
	var child int
	err = WaitReady(context.Background(), p, 10*time.Second, func(context.Context) error {
		_, err := fmt.Sscanf(p.LogTail(100), "child %d", &child)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// A pidfd becomes readable when the grandchild exits: an event to wait
	// for, not a state to poll. ESRCH means it is gone already.
	pidfd, err := unix.PidfdOpen(child, 0)
	if err != nil && !errors.Is(err, unix.ESRCH) {
		t.Skipf("skipped: no pidfd on this kernel: %v", err)
	}
	if err := g.Stop(100 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("leader still running after Stop")
	}
	if pidfd >= 0 && err == nil {
		defer unix.Close(pidfd)
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 10_000)
		if err != nil || n != 1 {
			t.Fatalf("grandchild %d survived the group kill (poll %d, %v)", child, n, err)
		}
	}
	if _, err := os.Stat(g.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("directory left: %v", err)
	}
	p.Stop(time.Second) // idempotent
}

func TestWaitReadyReportsExitAndTimeout(t *testing.T) {
	g, err := NewGroup(t.TempDir(), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop(time.Second)
	never := func(context.Context) error { return errors.New("not yet") }
	p, err := g.Start(Spec{Name: "exits", Path: sh(t), Args: []string{"-c", "echo bad config; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	err = WaitReady(context.Background(), p, time.Minute, never)
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "bad config") {
		t.Fatalf("exit: %v", err)
	}
	q, err := g.Start(Spec{Name: "slow", Path: sh(t), Args: []string{"-c", "sleep 60"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitReady(context.Background(), q, 50*time.Millisecond, never); !errors.Is(err, ErrNotReady) {
		t.Fatalf("timeout: %v", err)
	}
	if q.CPU() < 0 || q.Pid() <= 0 || q.Name() != "slow" {
		t.Fatal("accessors")
	}
}

func TestFreePorts(t *testing.T) {
	ports, err := FreePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] || p <= 0 {
			t.Fatalf("ports %v", ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d not free: %v", p, err)
		}
		l.Close()
	}
}

func TestParseStatCPU(t *testing.T) {
	// Fields after the command: state ppid pgrp session tty tpgid flags
	// minflt cminflt majflt cmajflt utime stime ...
	stat := "1234 (java (x) y) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0"
	if got := parseStatCPU(stat); got != 3*time.Second {
		t.Fatalf("got %v", got)
	}
	if parseStatCPU("garbage") != 0 || parseStatCPU("1 (x) S 1") != 0 {
		t.Fatal("bad input not zero")
	}
}
