package clientport

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/internal/certs"
	"github.com/seed-a6839e30/dlm/modes"
	"github.com/seed-a6839e30/dlm/transport"
	"github.com/seed-a6839e30/dlm/transport/wire"
)

// The memory benchmarks measure what an agent keeps per idle client
// session and per lock a client holds, once the idle connections have
// parked (poller_linux.go). The clients are a process of their
// own (this test binary in helper mode), so that the agent's process holds
// only the agent's side. Run them once each:
//
//	go test -run '^$' -bench 'IdleSessions|ClientLocks' -benchtime 1x ./clientport/

const helperEnv = "DLM_CLIENTPORT_TEST_HELPER"

// helperMain opens DLM_HELPER_SESSIONS sessions with DLM_HELPER_ADDR,
// takes DLM_HELPER_LOCKS locks in each (on resources of its own), prints
// "ready" and holds them until its standard input closes.
func helperMain() int {
	addr := os.Getenv("DLM_HELPER_ADDR")
	sessions, _ := strconv.Atoi(os.Getenv("DLM_HELPER_SESSIONS"))
	locks, _ := strconv.Atoi(os.Getenv("DLM_HELPER_LOCKS"))
	l := wire.DefaultLimits()
	conns := make([]net.Conn, 0, sessions)
	var buf []byte
	var tcfg *tls.Config
	if pem := os.Getenv("DLM_HELPER_TLS"); pem != "" {
		var err error
		if tcfg, err = helperTLS(pem); err != nil {
			fmt.Println("tls:", err)
			return 1
		}
	}
	for s := range sessions {
		nc, err := net.Dial("tcp", addr)
		if err == nil && tcfg != nil {
			tc := tls.Client(nc, tcfg)
			nc, err = tc, tc.Handshake()
		}
		if err != nil {
			fmt.Println("dial:", err)
			return 1
		}
		conns = append(conns, nc)
		buf, _ = wire.AppendFrame(buf[:0], wire.Header{ID: 1}, &wire.ClientHello{TTL: int64(5 * time.Minute), Version: wire.ClientProtocol}, &l)
		for k := range locks {
			m := &wire.ClientLock{Lockspace: "mem", Resource: "s" + strconv.Itoa(s) + "-" + strconv.Itoa(k), Mode: modes.EX}
			buf, _ = wire.AppendFrame(buf, wire.Header{ID: uint64(k) + 2}, m, &l)
			if len(buf) > 64<<10 || k == locks-1 {
				if _, err := nc.Write(buf); err != nil {
					fmt.Println("write:", err)
					return 1
				}
				buf = buf[:0]
			}
		}
		if locks == 0 {
			if _, err := nc.Write(buf); err != nil {
				fmt.Println("write:", err)
				return 1
			}
		}
		// Read the welcome and every grant before the next session.
		br := bufio.NewReaderSize(nc, 64<<10)
		dec := wire.NewClientDecoder(l)
		for range locks + 1 {
			if err := helperRead(br, dec); err != nil {
				fmt.Println(err)
				return 1
			}
		}
		if locks > 0 {
			// Acknowledge the grants read, as the Go client does every
			// 64 frames: a client that never does leaves the agent a note
			// of every grant (kept.go), which no client of the protocol
			// leaves it.
			buf, _ = wire.AppendFrame(buf[:0], wire.Header{ID: uint64(locks) + 2}, &wire.ClientAck{Read: uint64(locks) + 1}, &l)
			if _, err := nc.Write(buf); err != nil {
				fmt.Println("write:", err)
				return 1
			}
			if err := helperRead(br, dec); err != nil {
				fmt.Println(err)
				return 1
			}
		}
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, nc := range conns {
		_ = nc.Close()
	}
	return 0
}

// helperRead reads one frame from the agent and fails on a refusal.
func helperRead(br *bufio.Reader, dec *wire.Decoder) error {
	var prefix [4]byte
	if _, err := io.ReadFull(br, prefix[:]); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	payload := make([]byte, binary.BigEndian.Uint32(prefix[:]))
	if _, err := io.ReadFull(br, payload); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if _, m, err := dec.Decode(payload); err != nil || m.Type() == wire.TypeClientError {
		return fmt.Errorf("refused: %v %v", err, m)
	}
	return nil
}

// helperTLS is the client side of BenchmarkIdleSessionsTLS: the PEM
// blocks of the CA, the client's certificate and its key, separated by
// "|" (which PEM never holds).
func helperTLS(pems string) (*tls.Config, error) {
	parts := strings.SplitN(pems, "|", 3)
	if len(parts) != 3 {
		return nil, fmt.Errorf("want 3 PEM parts, have %d", len(parts))
	}
	kp, err := tls.X509KeyPair([]byte(parts[1]), []byte(parts[2]))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(parts[0]))
	return (&transport.TLSConfig{Certificate: kp, CAs: pool}).ClientConfig()
}

// agentMemory is what the process holds: live heap and goroutine stacks.
func agentMemory() (heap, stacks uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.StackInuse
}

// measureSessions starts a helper holding sessions×locks against a
// one-node agent and returns the agent's growth in heap and stacks.
func measureSessions(b *testing.B, sessions, locks int) (heap, stacks int64) {
	return measureSessionsTLS(b, sessions, locks, false)
}

// measureSessionsTLS is measureSessions, with mutual TLS on the port if
// withTLS.
func measureSessionsTLS(b *testing.B, sessions, locks int, withTLS bool) (heap, stacks int64) {
	var agentTLS *transport.TLSConfig
	var helperPEM string
	if withTLS {
		agentTLS, helperPEM = benchPKI(b)
	}
	p := startPort(b, 1, func(c *Config) { c.MaxConnections, c.MaxLocks, c.TLS = sessions+10, locks+10, agentTLS })
	heap0, stack0 := agentMemory()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "DLM_HELPER_ADDR="+p.addr,
		"DLM_HELPER_SESSIONS="+strconv.Itoa(sessions), "DLM_HELPER_LOCKS="+strconv.Itoa(locks))
	if withTLS {
		cmd.Env = append(cmd.Env, "DLM_HELPER_TLS="+helperPEM)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill() // by pid: the helper this benchmark started
			<-done
		}
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		b.Fatalf("helper: %q %v", line, err)
	}
	for p.srv.Sessions() < sessions {
		time.Sleep(10 * time.Millisecond)
	}
	// Idle connections park (Linux): measure once they all have, as an
	// agent with idle clients is.
	for deadline := time.Now().Add(30 * time.Second); !withTLS && p.srv.poll != nil && p.srv.poll.parkedConns() < sessions; {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d connections parked after 30 s", p.srv.poll.parkedConns(), sessions)
		}
		time.Sleep(10 * time.Millisecond)
	}
	heap1, stack1 := agentMemory()
	if path := os.Getenv("DLM_HEAP_PROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			_ = pprof.WriteHeapProfile(f)
			_ = f.Close()
		}
	}
	return int64(heap1) - int64(heap0), int64(stack1) - int64(stack0)
}

// BenchmarkIdleSessions: 10,000 connected client sessions that hold no
// lock and send nothing but keep-alives.
func BenchmarkIdleSessions(b *testing.B) {
	const sessions = 10000
	heap, stacks := measureSessions(b, sessions, 0)
	for b.Loop() {
	}
	b.ReportMetric(float64(heap)/sessions, "heap-B/session")
	b.ReportMetric(float64(stacks)/sessions, "stack-B/session")
	b.ReportMetric(float64(heap+stacks)/sessions, "B/session")
}

// BenchmarkIdleSessionsTLS: BenchmarkIdleSessions over mutual TLS, whose
// connections keep their reader goroutine (they are never parked).
func BenchmarkIdleSessionsTLS(b *testing.B) {
	const sessions = 10000
	heap, stacks := measureSessionsTLS(b, sessions, 0, true)
	for b.Loop() {
	}
	b.ReportMetric(float64(heap)/sessions, "heap-B/session")
	b.ReportMetric(float64(stacks)/sessions, "stack-B/session")
	b.ReportMetric(float64(heap+stacks)/sessions, "B/session")
}

// benchPKI makes a cluster's CA, the agent's node certificate and a
// client certificate, and returns the agent's TLS configuration and the
// helper's PEM blocks (see helperTLS).
func benchPKI(b *testing.B) (*transport.TLSConfig, string) {
	ca, caPEM, _, err := certs.NewCA("bench", time.Hour, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	nodeCert, nodeKey, _, err := ca.Issue(transport.Identity{Cluster: "bench", Role: transport.RoleNode, Name: "agent"}, nil, time.Hour, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	clientCert, clientKey, _, err := ca.Issue(transport.Identity{Cluster: "bench", Role: transport.RoleClient, Name: "helper"}, nil, time.Hour, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	kp, err := tls.X509KeyPair(nodeCert, nodeKey)
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &transport.TLSConfig{Certificate: kp, CAs: pool}, string(caPEM) + "|" + string(clientCert) + "|" + string(clientKey)
}

// BenchmarkClientLocks: 1,000,000 EX locks held by 100 client sessions on
// resources of their own, on a one-node agent that masters them too; the
// figure counts everything the agent keeps for a lock: its client port's
// and its node's books, and the master's table.
func BenchmarkClientLocks(b *testing.B) {
	const sessions, perSession = 100, 10000
	heap, stacks := measureSessions(b, sessions, perSession)
	for b.Loop() {
	}
	b.ReportMetric(float64(heap)/(sessions*perSession), "B/lock")
	b.ReportMetric(float64(stacks)/sessions, "stack-B/session")
}
