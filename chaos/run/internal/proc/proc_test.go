package proc

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The test binary doubles as the children the tests supervise: with
// childEnv set it runs one of the roles below instead of the tests.
const childEnv = "DLM_PROC_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		goleak.VerifyTestMain(m)
	case "echo":
		echoChild()
	case "supervisor":
		supervisorChild()
	case "sleep":
		time.Sleep(time.Minute)
	default:
		os.Exit(3)
	}
}

// echoChild answers every line on a TCP connection with the same line, and
// writes its port to the file $PORT_FILE.
func echoChild() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.Exit(4)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	if err := os.WriteFile(os.Getenv("PORT_FILE"), []byte(port), 0o644); err != nil {
		os.Exit(5)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			os.Exit(0)
		}
		go func() {
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				_, _ = c.Write([]byte(line))
			}
		}()
	}
}

// supervisorChild starts a sleeping grandchild through a Supervisor, writes
// its pid to $PID_FILE and waits to be killed.
func supervisorChild() {
	s := NewSupervisor(nil)
	self, _ := os.Executable()
	p, err := s.Start(Spec{Name: "grandchild", Path: self, Env: append(os.Environ(), childEnv+"=sleep")})
	if err != nil {
		os.Exit(6)
	}
	if err := os.WriteFile(os.Getenv("PID_FILE"), []byte(strconv.Itoa(p.Pid())), 0o644); err != nil {
		os.Exit(7)
	}
	time.Sleep(time.Minute)
}

func self(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// readFile polls for a file a child writes, up to 10 s.
func readFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written within 10 s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func startEcho(t *testing.T, s *Supervisor) (*Proc, string) {
	t.Helper()
	dir := t.TempDir()
	pf := filepath.Join(dir, "port")
	p, err := s.Start(Spec{Name: "echo", Path: self(t), Log: filepath.Join(dir, "log"),
		Env: append(os.Environ(), childEnv+"=echo", "PORT_FILE="+pf)})
	if err != nil {
		t.Fatal(err)
	}
	return p, "127.0.0.1:" + readFile(t, pf)
}

// ask sends a line and reports whether the answer came within d.
func ask(c net.Conn, d time.Duration) bool {
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "ping\n"
}

func TestKillReapsAndRestartIsANewBoot(t *testing.T) {
	s := NewSupervisor(nil)
	defer s.Close()
	p, addr := startEcho(t, s)
	pid := p.Pid()
	if pid == 0 || p.State() != Running || p.Boots() != 1 {
		t.Fatalf("after start: pid %d state %v boots %d", pid, p.State(), p.Boots())
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.State() != Exited || p.Pid() != 0 {
		t.Fatalf("after kill: state %v pid %d", p.State(), p.Pid())
	}
	if err, killed := p.ExitErr(); err == nil || !killed {
		t.Fatalf("after kill: exit %v, killed %v", err, killed)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("pid %d still exists after Kill: %v", pid, err)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("the killed echo server still accepts connections")
	}
	if err := p.Kill(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("second kill: %v, want ErrNotRunning", err)
	}
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	if p.Boots() != 2 || p.Pid() == 0 || p.Pid() == pid {
		t.Fatalf("after restart: boots %d pid %d (was %d)", p.Boots(), p.Pid(), pid)
	}
	if err := p.Restart(); err == nil {
		t.Fatal("restart of a running process succeeded")
	}
	log, err := os.ReadFile(p.Spec().Log)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), "=== echo start"); n != 2 {
		t.Fatalf("log has %d start headers, want 2:\n%s", n, log)
	}
}

// TestStopFreezesTheProcess: a stopped process keeps its socket open and
// does not answer; after SIGCONT it answers again, on the same connection.
func TestStopFreezesTheProcess(t *testing.T) {
	s := NewSupervisor(nil)
	defer s.Close()
	p, addr := startEcho(t, s)
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !ask(c, 5*time.Second) {
		t.Fatal("no answer before the stop")
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if st, _ := procState(p.Pid()); st != 'T' || p.State() != Stopped {
		t.Fatalf("after Stop: /proc state %q, State %v", st, p.State())
	}
	if ask(c, 300*time.Millisecond) {
		t.Fatal("the stopped process answered")
	}
	if err := p.Cont(); err != nil {
		t.Fatal(err)
	}
	// The line sent while it was stopped is answered first.
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("after Cont: %q, %v", line, err)
	}
	if p.State() != Running {
		t.Fatalf("after Cont: %v", p.State())
	}
}

func TestTerminateAndCloseEndEverything(t *testing.T) {
	s := NewSupervisor(nil)
	a, _ := startEcho(t, s)
	b, _ := startEcho(t, s)
	c, _ := startEcho(t, s)
	if err := a.Terminate(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if a.State() != Exited {
		t.Fatalf("after Terminate: %v", a.State())
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	pids := []int{b.Pid(), c.Pid()}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("pid %d alive after Close: %v", pid, err)
		}
	}
	if _, err := s.Start(Spec{Name: "late", Path: self(t)}); err == nil {
		t.Fatal("Start after Close succeeded")
	}
	if err := b.Restart(); err == nil {
		t.Fatal("Restart after Close succeeded")
	}
}

// TestChildrenDieWithTheSupervisor: when the supervising process itself is
// killed (no cleanup code runs), the kernel kills what it started.
func TestChildrenDieWithTheSupervisor(t *testing.T) {
	pf := filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command(self(t))
	cmd.Env = append(os.Environ(), childEnv+"=supervisor", "PID_FILE="+pf)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	grand, err := strconv.Atoi(readFile(t, pf))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(grand, 0); err != nil {
		t.Fatalf("grandchild %d not running: %v", grand, err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		// The grandchild was reparented; once it is dead it is reaped
		// by its new parent (init, or a subreaper), or shows as a zombie.
		st, err := procState(grand)
		if err != nil || st == 'Z' || st == 'X' {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(grand, syscall.SIGKILL)
			t.Fatalf("grandchild %d still %q 5 s after its supervisor was killed", grand, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBadSpec(t *testing.T) {
	s := NewSupervisor(nil)
	defer s.Close()
	if _, err := s.Start(Spec{Path: "/bin/true"}); err == nil {
		t.Fatal("a spec without a name was accepted")
	}
	_, err := s.Start(Spec{Name: "x", Path: filepath.Join(t.TempDir(), "missing")})
	if err == nil || !strings.Contains(err.Error(), "proc x: start") {
		t.Fatalf("missing program: %v", err)
	}
}
