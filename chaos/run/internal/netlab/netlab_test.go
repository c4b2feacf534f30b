package netlab

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed-a6839e30/dlm/chaos/run/internal/proc"
)

// The test binary doubles as the processes inside the namespaces: with
// roleEnv set it runs a role instead of the tests. As root it runs the
// tests inside private namespaces (Reexec); otherwise the tests that need
// them skip.
const roleEnv = "DLM_NETLAB_TEST_ROLE"

var notRoot error // why the namespace tests skip, if they do

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "server":
		server()
		return
	case "probe":
		os.Exit(probe())
	}
	if err := Available(); err != nil {
		notRoot = err
		goleak.VerifyTestMain(m)
		return
	}
	if !Inside() {
		code, err := Reexec()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(code)
	}
	if err := Enter(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

func needRoot(t *testing.T) {
	t.Helper()
	if notRoot != nil {
		t.Skipf("skipping: %v; the namespace tests run as root (CI runs them)", notRoot)
	}
}

// server answers on TCP :7000 ("ping" -> "pong", "count" -> datagrams
// received on :7002) and echoes UDP on :7001.
func server() {
	ip := os.Getenv("IP")
	var count atomic.Int64
	l, err := net.Listen("tcp", ip+":7000")
	if err != nil {
		os.Exit(4)
	}
	echo, err := net.ListenPacket("udp", ip+":7001")
	if err != nil {
		os.Exit(5)
	}
	sink, err := net.ListenPacket("udp", ip+":7002")
	if err != nil {
		os.Exit(6)
	}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := echo.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = echo.WriteTo(buf[:n], from)
		}
	}()
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := sink.ReadFrom(buf); err != nil {
				return
			}
			count.Add(1)
		}
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				switch strings.TrimSpace(line) {
				case "count":
					fmt.Fprintf(c, "%d\n", count.Load())
				default:
					fmt.Fprintln(c, "pong")
				}
			}
		}()
	}
}

// probe runs in a node's namespace: KIND=tcp dials ADDR:7000 and expects a
// pong, KIND=udp expects an echo from ADDR:7001, KIND=burst sends N
// datagrams to ADDR:7002. It prints the round trip and exits 0 on success.
func probe() int {
	addr := os.Getenv("ADDR")
	timeout, _ := time.ParseDuration(os.Getenv("TIMEOUT"))
	start := time.Now()
	switch os.Getenv("KIND") {
	case "tcp":
		c, err := net.DialTimeout("tcp", addr+":7000", timeout)
		if err != nil {
			return 1
		}
		defer c.Close()
		_ = c.SetDeadline(start.Add(timeout))
		fmt.Fprintln(c, "ping")
		if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "pong\n" {
			return 1
		}
	case "udp":
		c, err := net.Dial("udp", addr+":7001")
		if err != nil {
			return 1
		}
		defer c.Close()
		_ = c.SetDeadline(start.Add(timeout))
		buf := make([]byte, 16)
		for time.Since(start) < timeout { // a lost datagram is sent again
			_, _ = c.Write([]byte("ping"))
			_ = c.SetReadDeadline(time.Now().Add(timeout / 4))
			if n, err := c.Read(buf); err == nil && string(buf[:n]) == "ping" {
				fmt.Println(time.Since(start))
				return 0
			}
		}
		return 1
	case "burst":
		n, _ := strconv.Atoi(os.Getenv("N"))
		c, err := net.Dial("udp", addr+":7002")
		if err != nil {
			return 1
		}
		defer c.Close()
		for range n {
			_, _ = c.Write([]byte("x"))
			time.Sleep(200 * time.Microsecond) // no burst loss in the socket buffers
		}
	default:
		return 2
	}
	fmt.Println(time.Since(start))
	return 0
}

// testLab builds a lab of n nodes, each running the server role.
type testLab struct {
	*Lab
	sup *proc.Supervisor
}

func newTestLab(t *testing.T, n int) *testLab {
	t.Helper()
	needRoot(t)
	id := fmt.Sprintf("t%d", time.Now().UnixNano()%1_000_000)
	l, err := New(id, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	tl := &testLab{Lab: l, sup: proc.NewSupervisor(nil)}
	t.Cleanup(func() {
		if err := tl.sup.Close(); err != nil {
			t.Error(err)
		}
		if err := l.Close(); err != nil {
			t.Error(err)
		}
		if out, _ := run("ip", "netns", "list"); strings.Contains(out, id+"-") {
			t.Errorf("namespaces left after Close:\n%s", out)
		}
	})
	self, _ := os.Executable()
	dir := t.TempDir()
	for _, nd := range l.Nodes() {
		if _, err := tl.sup.Start(proc.Spec{Name: nd.Name, Path: self, Netns: nd.Netns,
			Log: filepath.Join(dir, nd.Name+".log"),
			Env: append(os.Environ(), roleEnv+"=server", "IP="+nd.IP)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, nd := range l.Nodes() { // ready: the harness reaches each server
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, err := net.DialTimeout("tcp", nd.IP+":7000", time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("server of %s not up within 10 s: %v", nd.Name, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return tl
}

// reach runs a probe of kind from node a to node b and reports whether it
// succeeded, and its round trip.
func (tl *testLab) reach(t *testing.T, kind string, a, b int, timeout time.Duration, extra ...string) (bool, time.Duration) {
	t.Helper()
	self, _ := os.Executable()
	nodes := tl.Nodes()
	cmd := exec.Command("ip", "netns", "exec", nodes[a].Netns, self)
	cmd.Env = append(os.Environ(), roleEnv+"=probe", "KIND="+kind, "ADDR="+nodes[b].IP, "TIMEOUT="+timeout.String())
	cmd.Env = append(cmd.Env, extra...)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	rtt, _ := time.ParseDuration(strings.TrimSpace(string(out)))
	return err == nil, rtt
}

// count asks node i's server how many datagrams it received on :7002.
func (tl *testLab) count(t *testing.T, i int) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", tl.Nodes()[i].IP+":7000", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintln(c, "count")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (tl *testLab) requireClean(t *testing.T) {
	t.Helper()
	if err := tl.VerifyClean(); err != nil {
		t.Fatal(err)
	}
}

const probeTimeout = 2 * time.Second

func TestLabConnectsEveryPairAndLeavesNothing(t *testing.T) {
	tl := newTestLab(t, 3)
	for a := range 3 {
		for b := range 3 {
			if a == b {
				continue
			}
			for _, kind := range []string{"tcp", "udp"} {
				if ok, _ := tl.reach(t, kind, a, b, probeTimeout); !ok {
					t.Fatalf("%s n%d -> n%d failed on a healthy network", kind, a+1, b+1)
				}
			}
		}
	}
	tl.requireClean(t)
}

func TestPartitionCutsAndHealRemovesTheRules(t *testing.T) {
	tl := newTestLab(t, 3)
	if err := tl.Apply(Isolate(3, []int{0})); err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]int{{0, 1}, {1, 0}, {0, 2}, {2, 0}} {
		for _, kind := range []string{"tcp", "udp"} {
			if ok, _ := tl.reach(t, kind, pair[0], pair[1], 500*time.Millisecond); ok {
				t.Fatalf("%s n%d -> n%d connected across the partition", kind, pair[0]+1, pair[1]+1)
			}
		}
	}
	if ok, _ := tl.reach(t, "tcp", 1, 2, probeTimeout); !ok {
		t.Fatal("n2 -> n3, on the same side, could not connect")
	}
	if rs, _ := tl.Ruleset(0); !strings.Contains(rs, "drop") {
		t.Fatalf("n1's ruleset has no drop rule:\n%s", rs)
	}
	if err := tl.Apply(Faults{}); err != nil {
		t.Fatal(err)
	}
	tl.requireClean(t)
	if ok, _ := tl.reach(t, "tcp", 0, 1, probeTimeout); !ok {
		t.Fatal("n1 -> n2 still cut after heal")
	}
}

// TestIsolateAllCutsTheHubToo: a node isolated from everyone, the harness
// included, takes no connection from the hub and has a rule against
// sending to it, while its peers' links to the hub stay; heal removes it.
func TestIsolateAllCutsTheHubToo(t *testing.T) {
	tl := newTestLab(t, 3)
	dial := func(i int, timeout time.Duration) bool {
		c, err := net.DialTimeout("tcp", tl.Nodes()[i].IP+":7000", timeout)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	f := IsolateAll(3, []int{0})
	if got := f.String(); !strings.Contains(got, "n1<->hub") || strings.Contains(got, "n2<->hub") {
		t.Fatalf("faults %q: want n1 cut from the hub, n2 not", got)
	}
	if err := tl.Apply(f); err != nil {
		t.Fatal(err)
	}
	if dial(0, 500*time.Millisecond) {
		t.Fatal("the hub connected to n1 through its isolation")
	}
	if !dial(1, probeTimeout) {
		t.Fatal("the hub could not connect to n2, which is not cut from it")
	}
	if rs, _ := tl.Ruleset(0); !strings.Contains(rs, "daddr "+tl.HubIP()) {
		t.Fatalf("n1's ruleset has no rule against sending to the hub:\n%s", rs)
	}
	if ok, _ := tl.reach(t, "tcp", 0, 1, 500*time.Millisecond); ok {
		t.Fatal("n1 -> n2 connected across the isolation")
	}
	if err := tl.Apply(Faults{}); err != nil {
		t.Fatal(err)
	}
	tl.requireClean(t)
	if !dial(0, probeTimeout) {
		t.Fatal("the hub still cut from n1 after heal")
	}
}

// TestOneWayCutsOneDirection: datagrams from n1 never reach n2, while n2's
// reach n1.
func TestOneWayCutsOneDirection(t *testing.T) {
	tl := newTestLab(t, 2)
	if err := tl.Apply(OneWay([]int{0}, []int{1})); err != nil {
		t.Fatal(err)
	}
	const n = 50
	tl.reach(t, "burst", 0, 1, probeTimeout, "N="+strconv.Itoa(n))
	tl.reach(t, "burst", 1, 0, probeTimeout, "N="+strconv.Itoa(n))
	if got := tl.count(t, 1); got != 0 {
		t.Fatalf("n2 received %d datagrams from n1 through the one-way cut", got)
	}
	if got := tl.count(t, 0); got != n {
		t.Fatalf("n1 received %d of n2's %d datagrams; the cut is one way", got, n)
	}
	if err := tl.Apply(Faults{}); err != nil {
		t.Fatal(err)
	}
	tl.requireClean(t)
}

// TestLossDropsSomeOfThePackets: 30 % loss on n2 drops some but not all of
// 600 datagrams (the bounds are 12 standard deviations wide).
func TestLossDropsSomeOfThePackets(t *testing.T) {
	tl := newTestLab(t, 2)
	if err := tl.Apply(Lossy([]int{1}, 30)); err != nil {
		t.Fatal(err)
	}
	const n = 600
	tl.reach(t, "burst", 0, 1, probeTimeout, "N="+strconv.Itoa(n))
	got := tl.count(t, 1)
	if got < 300 || got > 540 {
		t.Fatalf("n2 received %d of %d datagrams at 30%% loss; want about 420", got, n)
	}
	t.Logf("30%% loss: %d of %d datagrams arrived", got, n)
	if err := tl.Apply(Faults{}); err != nil {
		t.Fatal(err)
	}
	tl.requireClean(t)
	before := tl.count(t, 1)
	tl.reach(t, "burst", 0, 1, probeTimeout, "N=100")
	if got := tl.count(t, 1) - before; got != 100 {
		t.Fatalf("after heal n2 received %d of 100 datagrams", got)
	}
}

// TestDelayHoldsPackets: with n2's packets to its peers held for 300 ms, a
// round trip from n1 to n2 takes at least 300 ms (the answer is held); the
// harness's own traffic to n2 is not delayed, and heal stops the delayer.
func TestDelayHoldsPackets(t *testing.T) {
	tl := newTestLab(t, 2)
	const d = 300 * time.Millisecond
	if err := tl.Apply(Slow([]int{1}, d)); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"tcp", "udp"} {
		ok, rtt := tl.reach(t, kind, 0, 1, 5*time.Second)
		if !ok || rtt < d {
			t.Fatalf("%s n1 -> n2 with n2 delayed %v: ok %v, round trip %v", kind, d, ok, rtt)
		}
		t.Logf("%s round trip with %v delay: %v", kind, d, rtt)
	}
	start := time.Now()
	tl.count(t, 1) // from the harness: not held
	if took := time.Since(start); took >= d {
		t.Fatalf("the harness's request to n2 took %v: its traffic was delayed", took)
	}
	passed, failed := tl.delayers[1].Passed()
	if passed == 0 || failed != 0 {
		t.Fatalf("delayer: %d passed, %d failed verdicts", passed, failed)
	}
	if err := tl.Apply(Faults{}); err != nil {
		t.Fatal(err)
	}
	tl.requireClean(t)
	if ok, _ := tl.reach(t, "tcp", 0, 1, probeTimeout); !ok {
		t.Fatal("n1 -> n2 failed after heal")
	}
}

func TestApplyRefusesBadFaults(t *testing.T) {
	tl := newTestLab(t, 2)
	for _, f := range []Faults{
		{Cut: map[Link]bool{{0, 5}: true}},
		{Cut: map[Link]bool{{1, 1}: true}},
		{Loss: map[int]int{0: 101}},
		{Delay: map[int]time.Duration{1: time.Minute}},
	} {
		if err := tl.Apply(f); err == nil {
			t.Errorf("Apply(%v) succeeded", f)
		}
	}
	tl.requireClean(t)
}

func TestNewRefusesBadArguments(t *testing.T) {
	needRoot(t)
	for _, c := range []struct {
		id string
		n  int
	}{{"Bad-Id", 3}, {"", 3}, {"waytoolongid", 3}, {"ok", 0}, {"ok", 65}} {
		if l, err := New(c.id, c.n, nil); err == nil {
			_ = l.Close()
			t.Errorf("New(%q, %d) succeeded", c.id, c.n)
		}
	}
}

// TestRingAndBridgeCutExactlyTheirLinks: in a lab of five, the majorities
// ring lets each node reach its two ring neighbours and nobody else, and
// the bridge lets the bridge node reach both sides, which cannot reach
// each other; after each heal every pair connects again and no rule is
// left.
func TestRingAndBridgeCutExactlyTheirLinks(t *testing.T) {
	if testing.Short() {
		t.Skip("probes every pair of a five-node lab twice")
	}
	tl := newTestLab(t, 5)
	for _, c := range []struct {
		name string
		f    Faults
	}{
		{"ring 3-1-4-0-2", Ring([]int{3, 1, 4, 0, 2})},
		{"bridge n5 between n1,n2 and n3,n4", Bridge([]int{0, 1}, []int{2, 3})},
	} {
		if err := tl.Apply(c.f); err != nil {
			t.Fatal(err)
		}
		cut := 0
		for a := range 5 {
			for b := range 5 {
				if a == b {
					continue
				}
				want := c.f.Connected(a, b)
				wait := probeTimeout
				if !want {
					wait, cut = 500*time.Millisecond, cut+1
				}
				if ok, _ := tl.reach(t, "tcp", a, b, wait); ok != want {
					t.Errorf("%s: n%d -> n%d connected %v, want %v", c.name, a+1, b+1, ok, want)
				}
			}
		}
		if cut == 0 {
			t.Fatalf("%s cuts nothing", c.name)
		}
		if err := tl.Apply(Faults{}); err != nil {
			t.Fatal(err)
		}
		tl.requireClean(t)
		if ok, _ := tl.reach(t, "tcp", 0, 2, probeTimeout); !ok {
			t.Fatalf("%s: n1 -> n3 still cut after heal", c.name)
		}
	}
}
