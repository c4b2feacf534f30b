package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seed-a6839e30/dlm/bench/servers"
	"github.com/seed-a6839e30/dlm/client"
	"github.com/seed-a6839e30/dlm/modes"
)

// lockspace is the lockspace of the loader's and the prober's locks.
const lockspace = "pause"

// agent is one dlmnode process and its addresses.
type agent struct {
	name, client, admin string
	proc                *servers.Proc
	log                 string
}

// cluster is the five agents of one run.
type cluster struct {
	group  *servers.Group
	agents []*agent
}

var agentNames = []string{"n1", "n2", "n3", "n4", "n5"}

// startCluster starts the agents, logs in dir, and returns once each grants
// a lock to a client.
func startCluster(ctx context.Context, o options, dir string) (*cluster, error) {
	g, err := servers.NewGroup("", "pause", nil)
	if err != nil {
		return nil, err
	}
	c := &cluster{group: g}
	n := len(agentNames)
	ports, err := servers.FreePorts(4 * n)
	if err != nil {
		c.stop()
		return nil, err
	}
	gossip := make([]string, n)
	for i := range n {
		gossip[i] = fmt.Sprintf("127.0.0.1:%d", ports[4*i])
	}
	// The loader's sessions hold a fifth of the locks each.
	perSession := max(100_000, o.locks/n+1024)
	for i, name := range agentNames {
		a := &agent{
			name: name, client: fmt.Sprintf("127.0.0.1:%d", ports[4*i+3]), admin: fmt.Sprintf("127.0.0.1:%d", ports[4*i+2]),
			log: filepath.Join(dir, name+".log"),
		}
		spec := servers.Spec{Name: name, Path: o.dlmnode, LogPath: a.log, Args: []string{"agent",
			"--name", name, "--members", strings.Join(agentNames, ","), "--seeds", strings.Join(gossip, ","),
			"--gossip-addr", gossip[i], "--link-addr", fmt.Sprintf("127.0.0.1:%d", ports[4*i+1]),
			"--admin-addr", a.admin, "--client-addr", a.client,
			"--client-max-locks", strconv.Itoa(perSession), "--log-format", "json",
			"--lease", o.lease.String(), "--heartbeat", (o.lease / 10).String()}}
		if o.gctrace {
			spec.Env = append(spec.Env, "GODEBUG=gctrace=1")
		}
		if o.gomaxprocs > 0 {
			spec.Env = append(spec.Env, fmt.Sprintf("GOMAXPROCS=%d", o.gomaxprocs))
		}
		if a.proc, err = g.Start(spec); err != nil {
			c.stop()
			return nil, err
		}
		c.agents = append(c.agents, a)
	}
	// An agent serves once the cluster has a quorum, so readiness is probed
	// after all have started.
	for _, a := range c.agents {
		if err := servers.WaitReady(ctx, a.proc, time.Minute, grantsLock(a.client)); err != nil {
			c.stop()
			return nil, err
		}
	}
	return c, nil
}

// grantsLock is a readiness probe: the agent at addr grants a client a lock.
func grantsLock(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		cl, err := client.Dial(ctx, addr)
		if err != nil {
			return err
		}
		defer cl.Close()
		lk, err := cl.Lockspace(lockspace).Lock(ctx, "ready/"+addr, modes.EX)
		if err != nil {
			return err
		}
		return lk.Unlock()
	}
}

func (c *cluster) stop() { _ = c.group.Stop(5 * time.Second) }

// kill SIGKILLs agent i and waits (bounded) until it exited.
func (c *cluster) kill(i int) error {
	p := c.agents[i].proc
	servers.SignalGroup(p.Pid(), true)
	select {
	case <-p.Done():
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s did not exit within 10 s of SIGKILL", p.Name())
	}
}

// cpu sums the CPU time of the agents idx.
func (c *cluster) cpu(idx []int) time.Duration {
	var d time.Duration
	for _, i := range idx {
		d += c.agents[i].proc.CPU()
	}
	return d
}

// runtimeStats are what an agent's /metrics says of its collector.
type runtimeStats struct {
	gcs  int64   // collections so far (go_gc_duration_seconds_count)
	heap float64 // bytes allocated and not yet freed (go_memstats_heap_alloc_bytes)
}

// scrape reads the runtime figures off an agent's /metrics. Two series of
// the text format are all it needs, so it reads their lines rather than
// parsing the whole exposition.
func scrape(ctx context.Context, adminAddr string) (runtimeStats, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := get(ctx, "http://"+adminAddr+"/metrics")
	if err != nil {
		return runtimeStats{}, err
	}
	defer resp.Body.Close()
	return parseRuntimeStats(resp.Body)
}

// get fetches url; a status other than 200 is an error.
func get(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return resp, nil
}

func parseRuntimeStats(r io.Reader) (runtimeStats, error) {
	var s runtimeStats
	var found int
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "go_gc_duration_seconds_count":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return s, fmt.Errorf("%s: %w", name, err)
			}
			s.gcs, found = n, found+1
		case "go_memstats_heap_alloc_bytes":
			f, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return s, fmt.Errorf("%s: %w", name, err)
			}
			s.heap, found = f, found+1
		}
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	if found != 2 {
		return s, fmt.Errorf("metrics lack go_gc_duration_seconds_count or go_memstats_heap_alloc_bytes")
	}
	return s, nil
}

// logEvent is one line of an agent's JSON log, as far as a run reads it.
type logEvent struct {
	Time time.Time `json:"time"`
	Msg  string    `json:"msg"`
}

// logTail reads the lines an agent appends to its log. Lines that are not
// JSON (the runtime's gctrace, a crash) are skipped.
type logTail struct {
	path    string
	off     int64
	partial []byte
}

// next returns the events logged since the last call.
func (t *logTail) next() ([]logEvent, error) {
	f, err := os.Open(t.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	t.off += int64(len(b))
	b = append(t.partial, b...)
	end := bytes.LastIndexByte(b, '\n') + 1
	t.partial = append([]byte(nil), b[end:]...)
	var evs []logEvent
	for line := range bytes.SplitSeq(b[:end], []byte("\n")) {
		var e logEvent
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			continue
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// recoveryTimes are when an agent committed the first view after a kill and
// when it finished recovering into it.
type recoveryTimes struct {
	commit, done time.Time
	views        int // views committed from the kill to done
}

// watchRecovery follows the log of t from now on until it shows a view
// committed after since and the recovery done after that commit.
func watchRecovery(ctx context.Context, t *logTail, since time.Time, limit time.Duration) (recoveryTimes, error) {
	var r recoveryTimes
	end := time.Now().Add(limit)
	for {
		evs, err := t.next()
		if err != nil {
			return r, err
		}
		for _, e := range evs {
			if e.Time.Before(since) {
				continue
			}
			switch {
			case e.Msg == "view committed":
				r.views++
				if r.commit.IsZero() {
					r.commit = e.Time
				}
			case e.Msg == "recovery done" && !r.commit.IsZero() && !e.Time.Before(r.commit):
				r.done = e.Time
				return r, nil
			}
		}
		if time.Now().After(end) {
			return r, fmt.Errorf("%s: no view committed and recovered within %v of the kill", t.path, limit)
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}
