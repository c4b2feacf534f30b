package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/run/internal/netlab"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/proc"
)

// agents is the cluster of dlmnode agent processes the nemeses act on.
type agents struct {
	sup   *proc.Supervisor
	lab   *netlab.Lab // nil without the network namespaces
	procs []*proc.Proc
	names []string
	// gossip and admin addresses, per agent.
	gossip, admin []string
	readyWait     time.Duration
}

// agentSpec is how to start the cluster's agents.
type agentSpec struct {
	bin     string
	n       int
	members []string // every member's name: the agents', then the embedded members'
	seeds   []string // gossip addresses of every member
	dir     string   // logs
	lab     *netlab.Lab
	// extra flags for every agent (the control's unsafe setting).
	extra []string
}

// agentAddrs picks the members' addresses (gossip, link, admin and client
// port; the last two only agents use): their own IP in their namespace,
// or distinct loopback ports.
func agentAddrs(lab *netlab.Lab, n int) (gossip, link, admin, client []string, err error) {
	if lab != nil {
		for _, nd := range lab.Nodes()[:n] {
			gossip = append(gossip, nd.IP+":7946")
			link = append(link, nd.IP+":7947")
			admin = append(admin, nd.IP+":7948")
			client = append(client, nd.IP+":7949")
		}
		return gossip, link, admin, client, nil
	}
	for range n {
		ports, err := freePorts(4)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		gossip = append(gossip, fmt.Sprintf("127.0.0.1:%d", ports[0]))
		link = append(link, fmt.Sprintf("127.0.0.1:%d", ports[1]))
		admin = append(admin, fmt.Sprintf("127.0.0.1:%d", ports[2]))
		client = append(client, fmt.Sprintf("127.0.0.1:%d", ports[3]))
	}
	return gossip, link, admin, client, nil
}

// freePorts returns n loopback ports free for TCP and UDP a moment ago.
func freePorts(n int) ([]int, error) {
	var out []int
	var hold []net.Listener
	defer func() {
		for _, l := range hold {
			l.Close()
		}
	}()
	for tries := 0; len(out) < n && tries < 50; tries++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			l.Close()
			continue
		}
		u.Close()
		hold = append(hold, l)
		out = append(out, p)
	}
	if len(out) < n {
		return nil, errors.New("no free loopback ports")
	}
	return out, nil
}

// startAgents starts every agent; it does not wait for them.
func startAgents(sup *proc.Supervisor, s agentSpec, gossip, link, admin, client []string) (*agents, error) {
	a := &agents{sup: sup, lab: s.lab, gossip: gossip, admin: admin, readyWait: 30 * time.Second}
	for i := range s.n {
		name := s.members[i]
		args := []string{"agent", "--name", name, "--members", strings.Join(s.members, ","),
			"--seeds", strings.Join(s.seeds, ","), "--gossip-addr", gossip[i], "--link-addr", link[i],
			"--admin-addr", admin[i], "--client-addr", client[i], "--log-format", "json"}
		if s.lab != nil {
			args = append(args, "--admin-insecure", "--insecure", "--client-insecure") // on the lab's private bridge
		}
		args = append(args, s.extra...)
		spec := proc.Spec{Name: name, Path: s.bin, Args: args, Log: filepath.Join(s.dir, name+".log"),
			Env: os.Environ()}
		if s.lab != nil {
			spec.Netns = s.lab.Nodes()[i].Netns
		}
		p, err := sup.Start(spec)
		if err != nil {
			return a, err
		}
		a.procs = append(a.procs, p)
		a.names = append(a.names, name)
	}
	return a, nil
}

// start restarts agent i (a new boot under the same name) and waits until
// it answers /healthz, within readyWait: readiness proper (/readyz) needs a
// quorum, which a quorum-loss nemesis restarting a majority one by one does
// not have yet.
func (a *agents) start(i int) error {
	if err := a.procs[i].Restart(); err != nil {
		return err
	}
	return a.waitHTTP(context.Background(), i, "/healthz", a.readyWait)
}

// waitReady waits for every agent's /readyz.
func (a *agents) waitReady(ctx context.Context) error {
	for i := range a.procs {
		if err := a.waitHTTP(ctx, i, "/readyz", a.readyWait); err != nil {
			return err
		}
	}
	return nil
}

func (a *agents) waitHTTP(ctx context.Context, i int, path string, within time.Duration) error {
	deadline := time.Now().Add(within)
	cl := &http.Client{Timeout: time.Second}
	var last error
	for time.Now().Before(deadline) {
		if a.procs[i].State() == proc.Exited {
			err, _ := a.procs[i].ExitErr()
			return fmt.Errorf("agent %s exited (%v); see its log %s", a.names[i], err, a.procs[i].Spec().Log)
		}
		resp, err := cl.Get("http://" + a.admin[i] + path)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s", path, resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("agent %s not answering %s within %v: %v (log %s)", a.names[i], path, within, last, a.procs[i].Spec().Log)
}
