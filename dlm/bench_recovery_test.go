//go:build unix

package dlm

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/seed-a6839e30/dlm/modes"
)

// The recovery benchmarks: what a failure costs, against the locks held,
// the share that moves and the size of the cluster; what a client of the
// resources it did not touch sees; what a broken link costs. All run on the
// in-process network in real time. docs/BENCHMARKS.md has the figures and
// the commands.

// benchRecoveryConfig is the timing of the recovery benchmarks: a 10 s
// lease renewed every second and slower failure detection, so that a
// node of a shared, loaded machine, busy taking a million locks, does not
// lose its lease or get suspected (which would start views the benchmark
// does not measure). The lock-delay grows with the lease; the work figures
// leave it out.
func benchRecoveryConfig(cfg *Config) {
	cfg.MaxLocks = 0
	cfg.Lease, cfg.HeartbeatInterval = 10*time.Second, time.Second
	cfg.ProbeInterval, cfg.ProbeTimeout = time.Second, 500*time.Millisecond
}

// benchLocks takes locks EX locks, each on its own resource, spread over
// the nodes of c, with a few goroutines per node, and returns the heap
// they cost (bytes in use after, less before, after a collection each).
func benchLocks(b *testing.B, c *cluster, prefix string, locks int) uint64 {
	b.Helper()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	before := heap() // after a collection: the garbage of a previous run is not counted
	ctx := context.Background()
	var g errgroup.Group
	workers := 4 * len(c.nodes)
	for w := range workers {
		g.Go(func() error {
			for i := w; i < locks; i += workers {
				if _, err := c.ls[i%len(c.nodes)].Lock(ctx, fmt.Sprintf("%s/%d", prefix, i), modes.EX); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	after := heap()
	return after - min(after, before)
}

// killAndRecover kills node victim of c and waits until node 0 completed
// the recovery of the view without it; it returns the locks the survivors
// rebuilt and the CPU the process used from the commit of that view to the
// end of its recovery (all nodes together), less what the cluster used in
// as long a time before the kill (heartbeats, gossip, ticks, and whatever
// load the benchmark itself runs), measured over a second.
func killAndRecover(b *testing.B, c *cluster, victim int) (rebuilt, cpuMs float64) {
	b.Helper()
	before := c.nodes[0].rec.View().Epoch
	rebuilt0 := c.rebuiltLocks()
	idle0, t0 := cpuSeconds(), time.Now()
	time.Sleep(time.Second)
	idle := (cpuSeconds() - idle0) / time.Since(t0).Seconds()
	var gc0, gc1 runtime.MemStats
	runtime.ReadMemStats(&gc0)
	if f := os.Getenv("DLM_RECOVERY_MEMPROFILE"); f != "" {
		writeHeapProfile(b, f+".before")
		defer writeHeapProfile(b, f+".after")
	}
	if f := os.Getenv("DLM_RECOVERY_CPUPROFILE"); f != "" {
		stop := startRecording(b, f, pprof.StartCPUProfile, pprof.StopCPUProfile)
		defer stop()
	}
	c.kill(victim)
	deadline := time.Now().Add(2 * time.Minute)
	var cpu0, sys0 float64
	var faults0 int64
	var committed time.Time
	for {
		if cpu0 == 0 && c.nodes[0].rec.View().Epoch > before {
			cpu0, committed = cpuSeconds(), time.Now() // the view without the victim committed
			sys0, faults0 = kernelShare()
		}
		s := c.nodes[0].rec.LastStats()
		if s.Epoch > before && c.nodes[0].rec.Serving() {
			runtime.ReadMemStats(&gc1)
			b.ReportMetric(float64(gc1.NumGC-gc0.NumGC), "gc-cycles")
			sys1, faults1 := kernelShare()
			b.ReportMetric((sys1-sys0)*1000, "sys-ms")
			b.ReportMetric(float64(faults1-faults0), "page-faults")
			return c.rebuiltLocks() - rebuilt0, (cpuSeconds() - cpu0 - idle*time.Since(committed).Seconds()) * 1000
		}
		if time.Now().After(deadline) {
			b.Fatal("no recovery within 2 minutes")
		}
		time.Sleep(time.Millisecond)
	}
}

// startRecording starts a recording into file (a CPU profile with
// pprof.StartCPUProfile, an execution trace with trace.Start) and returns
// what ends it: DLM_RECOVERY_CPUPROFILE records the recovery alone, not
// the taking of the locks before it, and DLM_PAUSE_TRACE what a paused
// client waited on.
func startRecording(b *testing.B, file string, start func(io.Writer) error, stop func()) func() {
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	if err := start(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		stop()
		_ = f.Close()
	}
}

// writeHeapProfile writes the heap profile to file: one before and one
// after a recovery (DLM_RECOVERY_MEMPROFILE) give, with pprof -base, what
// the recovery allocated.
func writeHeapProfile(b *testing.B, file string) {
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	runtime.GC() // the profile is as of the last collection
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cpuSeconds is the CPU time this process has used (user and system): the
// work of all nodes together, whatever else the machine runs meanwhile.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// kernelShare is the system part of the CPU time this process has used and
// the minor page faults it took: what of a recovery's CPU the kernel spent,
// much of it handing out the pages its allocations touch first (no
// collection runs in the window to give any back).
func kernelShare() (sys float64, faults int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Stime.Nano()).Seconds(), int64(ru.Minflt)
}

// BenchmarkRecovery: 5 nodes, every lock EX on its own resource spread over
// the nodes, one node killed. ms/recovery is the work on the view's
// coordinator: from the commit of the view without the dead node to locking
// served again, less the lock-delay (a fixed wait for the dead node's lease
// to run out, mostly spent before the commit); in one process on a shared
// 2-core machine it is at least the survivors' CPU over the cores the
// process gets. cpu-ms is that CPU: the whole process (all nodes) from the
// commit to the end of the recovery, less what the idle cluster uses in
// that time (see killAndRecover), whatever other processes of the machine
// take; cpu-ms/survivor is its share per surviving node, what each node of
// a cluster of separate machines spends; sys-ms and page-faults are the
// kernel's part of the window, not less the idle cluster's. Only the dead
// node's share moves:
// moved-locks are the locks rebuilt at new masters (its share, less its own
// locks, which are purged). bytes/lock is the heap the locks cost, holders'
// and masters' sides together. 10M locks run only with DLM_BENCH_10M=1
// (about 8 GB).
func BenchmarkRecovery(b *testing.B) {
	sizes := []int{10_000, 100_000, 1_000_000}
	if os.Getenv("DLM_BENCH_10M") != "" {
		sizes = append(sizes, 10_000_000)
	}
	for _, locks := range sizes {
		b.Run(fmt.Sprintf("locks=%d", locks), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				c := startMem(b, 5, benchRecoveryConfig)
				perLock := float64(benchLocks(b, c, "rec", locks)) / float64(locks)
				b.StartTimer()
				r, cpu := killAndRecover(b, c, 4)
				b.StopTimer()
				reportRecovery(b, c, r, cpu, 4)
				b.ReportMetric(perLock, "bytes/lock")
				c.close()
			}
		})
	}
}

func reportRecovery(b *testing.B, c *cluster, rebuilt, cpuMs float64, survivors int) {
	st := c.nodes[0].rec.LastStats()
	b.ReportMetric(ms(st.Work()), "ms/recovery")
	b.ReportMetric(ms(st.LockDelay), "lockdelay-ms")
	b.ReportMetric(ms(st.Prepare), "prepare-ms")
	b.ReportMetric(ms(st.Report), "report-ms")
	b.ReportMetric(ms(st.Rebuild), "rebuild-ms")
	b.ReportMetric(ms(st.Barrier1+st.Barrier2), "barrier-ms")
	b.ReportMetric(rebuilt, "moved-locks")
	b.ReportMetric(cpuMs, "cpu-ms")
	b.ReportMetric(cpuMs/float64(survivors), "cpu-ms/survivor")
}

// BenchmarkRecoveryShare: 200,000 locks on clusters of 3 to 17 nodes, one
// killed: the share that moves is the dead node's, 1/nodes of the buckets,
// and the work follows it.
func BenchmarkRecoveryShare(b *testing.B) {
	for _, nodes := range []int{3, 5, 9, 17} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				c := startMem(b, nodes, benchRecoveryConfig)
				benchLocks(b, c, "share", 200_000)
				b.StartTimer()
				r, cpu := killAndRecover(b, c, nodes-1)
				b.StopTimer()
				reportRecovery(b, c, r, cpu, nodes-1)
				b.ReportMetric(100/float64(nodes), "%moved")
				c.close()
			}
		})
	}
}

// BenchmarkRecoveryPause: with the locks of BenchmarkRecovery held, a
// client on node 0 locks and unlocks, in a loop, resources node 1 masters
// (which the failure does not touch), from before node 4 is killed until
// half a second after the recovery ended. It reports the longest wait of
// one lock+unlock in that window (max-ms), when it started from the
// commit of the view without node 4 on node 0 (max-at-ms: the recovery's
// phases follow it in the order prepare, report, lockdelay, barrier 1,
// rebuild, barrier 2), and the 99th percentile (p99-ms);
// and, for comparison, the same over the 3 s before the kill, when nothing
// happens but the loop (base-max-ms, base-p99-ms): on a shared machine the
// scheduler alone makes pauses, failure or not.
func BenchmarkRecoveryPause(b *testing.B) {
	for _, locks := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("locks=%d", locks), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				c := startMem(b, 5, benchRecoveryConfig)
				benchLocks(b, c, "pause", locks)
				names := resourcesOn(b, c, 1, 256)
				var mu sync.Mutex
				var lat []time.Duration
				var worst time.Duration // the longest in the window across the failure, and when it started
				var worstAt time.Time
				stop := make(chan struct{})
				done := make(chan error, 1)
				go func() {
					ctx := context.Background()
					for i := 0; ; i++ {
						select {
						case <-stop:
							done <- nil
							return
						default:
						}
						t0 := time.Now()
						lk, err := c.ls[0].Lock(ctx, names[i%len(names)], modes.EX)
						if err == nil {
							err = lk.Unlock()
						}
						if err != nil {
							done <- err
							return
						}
						d := time.Since(t0)
						if d > 5*time.Millisecond && trace.IsEnabled() {
							trace.Logf(ctx, "slow", "lock+unlock %v", d)
						}
						mu.Lock()
						lat = append(lat, d)
						if d > worst {
							worst, worstAt = d, t0
						}
						mu.Unlock()
					}
				}()
				// take returns the latencies measured so far, sorted, and
				// starts a new window.
				take := func() []time.Duration {
					mu.Lock()
					defer mu.Unlock()
					w := slices.Clone(lat)
					lat = lat[:0]
					slices.Sort(w)
					if len(w) == 0 {
						b.Fatal("no operation measured")
					}
					return w
				}
				time.Sleep(200 * time.Millisecond)
				take()
				time.Sleep(3 * time.Second)
				base := take() // from here: across the failure
				mu.Lock()
				worst = 0
				mu.Unlock()
				if f := os.Getenv("DLM_PAUSE_TRACE"); f != "" {
					stopTrace := startRecording(b, fmt.Sprintf("%s.%d", f, locks), trace.Start, trace.Stop)
					defer stopTrace()
				}
				b.StartTimer()
				r, cpu := killAndRecover(b, c, 4)
				b.StopTimer()
				time.Sleep(500 * time.Millisecond)
				close(stop)
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				w := take()
				b.ReportMetric(ms(w[len(w)-1]), "max-ms")
				b.ReportMetric(ms(w[len(w)*99/100]), "p99-ms")
				b.ReportMetric(float64(w[len(w)/2].Microseconds()), "p50-us")
				b.ReportMetric(float64(len(w)), "ops")
				st := c.nodes[0].rec.LastStats()
				b.ReportMetric(ms(worstAt.Sub(st.Started)), "max-at-ms")
				b.ReportMetric(ms(base[len(base)-1]), "base-max-ms")
				b.ReportMetric(ms(base[len(base)*99/100]), "base-p99-ms")
				// cpu-ms here is the recovery's CPU beyond the loop's.
				reportRecovery(b, c, r, cpu, 4)
				c.close()
			}
		})
	}
}

// BenchmarkLinkReset: with a million locks held on 5 nodes, the connection
// between two of them is reset. The link's session resends what was lost
// on the next connection: no view changes and nothing is rebuilt.
// reset-ms is the time from the reset to node 0 being granted again a lock
// node 1 masters (the redial and the resend, nothing else); views and
// rebuilt-locks count what the reset cost beyond that (both 0).
func BenchmarkLinkReset(b *testing.B) {
	for _, locks := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("locks=%d", locks), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				c := startMem(b, 5, benchRecoveryConfig)
				benchLocks(b, c, "reset", locks)
				res := resourcesOn(b, c, 1, 1)[0]
				mustUnlock(b, mustLock(b, c.ls[0], res, modes.EX))
				epoch, rebuilt := c.nodes[0].rec.View().Epoch, c.rebuiltLocks()
				ctx := context.Background()
				b.StartTimer()
				start := time.Now()
				c.net.Reset(c.nodes[0].Name(), c.nodes[1].Name())
				lk, err := c.ls[0].Lock(ctx, res, modes.EX)
				took := time.Since(start)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				mustUnlock(b, lk)
				time.Sleep(2 * time.Second) // a resync, if any, would have started by now
				b.ReportMetric(ms(took), "reset-ms")
				b.ReportMetric(float64(c.nodes[0].rec.View().Epoch-epoch), "views")
				b.ReportMetric(c.rebuiltLocks()-rebuilt, "rebuilt-locks")
				c.close()
			}
		})
	}
}

// BenchmarkClusterSize: a remote lock+unlock (EX) from node 0 on resources
// mastered by every other node in turn, on clusters of 3 to 65 nodes in one
// process. ns/op is the latency of the pair; lock-msgs/op the lock messages
// (requests, completions, unlocks, cancels, blocking notifications) sent
// per pair, cluster-wide; gossip-B/node/s and heartbeat-B/node/s the
// background traffic per node (memberlist's, and the quorum lease's
// heartbeats and acknowledgements), measured over 2 s of idle cluster.
func BenchmarkClusterSize(b *testing.B) {
	for _, nodes := range []int{3, 5, 9, 17, 33, 65} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			b.StopTimer()
			regs := make([]*prometheus.Registry, nodes)
			k := 0
			var mu sync.Mutex
			c := startMem(b, nodes, func(cfg *Config) {
				mu.Lock()
				regs[k] = prometheus.NewRegistry()
				cfg.Registerer = regs[k]
				k++
				mu.Unlock()
			})
			defer c.close()
			var names []string
			for i := 1; i < nodes; i++ {
				names = append(names, resourcesOn(b, c, i, 4)...)
			}
			// sum adds up a transport counter (messages or bytes sent) over
			// every node, for the message types given.
			sum := func(metric string, types ...string) float64 {
				total := 0.0
				for _, reg := range regs {
					mfs, err := reg.Gather()
					if err != nil {
						b.Fatal(err)
					}
					for _, mf := range mfs {
						if mf.GetName() != metric {
							continue
						}
						for _, m := range mf.GetMetric() {
							for _, lp := range m.GetLabel() {
								if lp.GetName() == "type" && slices.Contains(types, lp.GetValue()) {
									total += m.GetCounter().GetValue()
								}
							}
						}
					}
				}
				return total
			}
			const msgs, bytes = "dlm_transport_messages_sent_total", "dlm_transport_bytes_sent_total"
			lockTypes := []string{"lock_request", "completion", "unlock_request", "cancel_request", "blocking"}
			// background: 2 s of an idle cluster
			var gossip0 uint64
			for _, name := range c.names {
				p, s, _ := c.net.Sent(name)
				gossip0 += p + s
			}
			hb0 := sum(bytes, "heartbeat", "heartbeat_ack")
			time.Sleep(2 * time.Second)
			var gossip1 uint64
			for _, name := range c.names {
				p, s, _ := c.net.Sent(name)
				gossip1 += p + s
			}
			hb1 := sum(bytes, "heartbeat", "heartbeat_ack")
			ctx := context.Background()
			for i := range 200 { // warm up
				lk, err := c.ls[0].Lock(ctx, names[i%len(names)], modes.EX)
				if err != nil {
					b.Fatal(err)
				}
				mustUnlock(b, lk)
			}
			msgs0 := sum(msgs, lockTypes...)
			b.ResetTimer()
			b.StartTimer()
			for i := range b.N {
				lk, err := c.ls[0].Lock(ctx, names[i%len(names)], modes.EX)
				if err != nil {
					b.Fatal(err)
				}
				if err := lk.Unlock(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			time.Sleep(10 * time.Millisecond) // the last unlock leaves
			b.ReportMetric((sum(msgs, lockTypes...)-msgs0)/float64(b.N), "lock-msgs/op")
			b.ReportMetric(float64(gossip1-gossip0)/float64(nodes)/2, "gossip-B/node/s")
			b.ReportMetric((hb1-hb0)/float64(nodes)/2, "heartbeat-B/node/s")
		})
	}
}

// TestScaleTable measures, in fake time (synctest) with every link write
// delayed by 100 µs, a remote lock+unlock's latency and the lock messages it
// takes on clusters of 3 to 65 nodes, and the background traffic per node
// (gossip, and the quorum lease's heartbeats): deterministic figures for
// docs/BENCHMARKS.md, where the real-time BenchmarkClusterSize shares two
// cores among all the nodes. It asserts nothing; DLM_SCALE_TABLE=1 runs it.
func TestScaleTable(t *testing.T) {
	if os.Getenv("DLM_SCALE_TABLE") == "" {
		t.Skip("a measurement; DLM_SCALE_TABLE=1 runs it")
	}
	const delay = 100 * time.Microsecond
	for _, nodes := range []int{3, 5, 9, 17, 33, 65} {
		synctestRun(t, func(t *testing.T) {
			regs := make([]*prometheus.Registry, nodes)
			var mu sync.Mutex
			k := 0
			c := startMem(t, nodes, func(cfg *Config) {
				mu.Lock()
				regs[k] = prometheus.NewRegistry()
				cfg.Registerer = regs[k]
				k++
				mu.Unlock()
			})
			defer c.close()
			c.net.SetStreamDelay(delay)
			var names []string
			for i := 1; i < nodes; i++ {
				names = append(names, c.resourceOn(i, fmt.Sprintf("scale%d", i)))
			}
			sum := func(metric string, types ...string) float64 {
				total := 0.0
				for _, reg := range regs {
					mfs, _ := reg.Gather()
					for _, mf := range mfs {
						if mf.GetName() != metric {
							continue
						}
						for _, m := range mf.GetMetric() {
							for _, lp := range m.GetLabel() {
								if lp.GetName() == "type" && slices.Contains(types, lp.GetValue()) {
									total += m.GetCounter().GetValue()
								}
							}
						}
					}
				}
				return total
			}
			lockTypes := []string{"lock_request", "completion", "unlock_request", "cancel_request", "blocking"}
			gossip := func() uint64 {
				var g uint64
				for _, name := range c.names {
					p, s, _ := c.net.Sent(name)
					g += p + s
				}
				return g
			}
			g0, hb0 := gossip(), sum("dlm_transport_bytes_sent_total", "heartbeat", "heartbeat_ack")
			time.Sleep(10 * time.Second)
			g1, hb1 := gossip(), sum("dlm_transport_bytes_sent_total", "heartbeat", "heartbeat_ack")
			m0 := sum("dlm_transport_messages_sent_total", lockTypes...)
			const ops = 200
			start := time.Now()
			for i := range ops {
				mustUnlock(t, mustLock(t, c.ls[0], names[i%len(names)], modes.EX))
			}
			took := time.Since(start)
			time.Sleep(10 * time.Millisecond) // the last unlock leaves
			t.Logf("nodes=%d: lock+unlock %v (fake time, %v per link write), %.2f lock messages per lock+unlock, gossip %.0f B/node/s, heartbeats %.0f B/node/s",
				nodes, took/ops, delay, (sum("dlm_transport_messages_sent_total", lockTypes...)-m0)/ops,
				float64(g1-g0)/float64(nodes)/10, (hb1-hb0)/float64(nodes)/10)
		})
	}
}
