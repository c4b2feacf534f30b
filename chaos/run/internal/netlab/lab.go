package netlab

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
)

// Node is one agent's place on the lab's network.
type Node struct {
	Name  string // n1, n2, ...
	Netns string // its network namespace, for `ip netns exec`
	IP    string // its address on the bridge
	veth  string // the bridge end of its veth pair
}

// Lab is a bridge and one network namespace per node, and the faults in
// force on them.
type Lab struct {
	id     string
	bridge string
	nodes  []Node
	log    *slog.Logger

	mu       sync.Mutex
	faults   Faults
	delayers map[int]*Delayer
	closed   bool
}

// The addresses: the harness (the bridge itself) is .1, node i (from 0)
// is .11+i. The subnet exists only inside the harness's own network
// namespace, so it cannot clash with the host's.
const (
	subnetPrefix = "10.99.0."
	hubIP        = subnetPrefix + "1"
	maxNodes     = 64
)

var idPattern = regexp.MustCompile(`^[a-z0-9]{1,8}$`)

// New builds a lab of n nodes named n1..nN. id (1-8 lowercase letters and
// digits, unique to the run) prefixes every namespace and interface it
// creates. It must run inside the namespaces of Reexec (see Enter). On
// error, whatever was built is removed.
func New(id string, n int, log *slog.Logger) (*Lab, error) {
	if !Inside() {
		return nil, errors.New("netlab: New outside the harness's private namespaces (Reexec, Enter)")
	}
	if !idPattern.MatchString(id) {
		return nil, fmt.Errorf("netlab: lab id %q must be 1-8 lowercase letters or digits", id)
	}
	if n < 1 || n > maxNodes {
		return nil, fmt.Errorf("netlab: %d nodes; want 1..%d", n, maxNodes)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Lab{id: id, bridge: id + "br", log: log, delayers: make(map[int]*Delayer)}
	if err := l.build(n); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return l, nil
}

func (l *Lab) build(n int) error {
	steps := [][]string{
		{"link", "add", l.bridge, "type", "bridge"},
		{"addr", "add", hubIP + "/24", "dev", l.bridge},
		{"link", "set", l.bridge, "up"},
	}
	for _, s := range steps {
		if _, err := run("ip", s...); err != nil {
			return err
		}
	}
	for i := range n {
		nd := Node{
			Name:  fmt.Sprintf("n%d", i+1),
			Netns: fmt.Sprintf("%s-n%d", l.id, i+1),
			IP:    fmt.Sprintf("%s%d", subnetPrefix, 11+i),
			veth:  fmt.Sprintf("%sv%d", l.id, i+1),
		}
		if _, err := run("ip", "netns", "add", nd.Netns); err != nil {
			return err
		}
		l.nodes = append(l.nodes, nd)
		for _, s := range [][]string{
			{"link", "add", nd.veth, "type", "veth", "peer", "name", "eth0", "netns", nd.Netns},
			{"link", "set", nd.veth, "master", l.bridge, "up"},
			{"-n", nd.Netns, "addr", "add", nd.IP + "/24", "dev", "eth0"},
			{"-n", nd.Netns, "link", "set", "eth0", "up"},
			{"-n", nd.Netns, "link", "set", "lo", "up"},
		} {
			if _, err := run("ip", s...); err != nil {
				return err
			}
		}
	}
	l.log.Info("network built", "bridge", l.bridge, "nodes", n)
	return nil
}

// Nodes returns the nodes, in order.
func (l *Lab) Nodes() []Node { return append([]Node(nil), l.nodes...) }

// HubIP is the harness's address on the bridge: clients in the harness
// reach the agents from it.
func (l *Lab) HubIP() string { return hubIP }

// Ruleset returns `nft list ruleset` inside node i's namespace: empty when
// no fault is in force there.
func (l *Lab) Ruleset(i int) (string, error) {
	out, err := runIn(l.nodes[i].Netns, "", "nft", "list", "ruleset")
	return strings.TrimSpace(out), err
}

// VerifyClean reports an error naming every node whose namespace still has
// a rule, and any delayer still running.
func (l *Lab) VerifyClean() error {
	var errs []error
	for i, nd := range l.nodes {
		rs, err := l.Ruleset(i)
		switch {
		case err != nil:
			errs = append(errs, err)
		case rs != "":
			errs = append(errs, fmt.Errorf("netlab: %s still has rules:\n%s", nd.Name, rs))
		}
	}
	l.mu.Lock()
	for i := range l.delayers {
		errs = append(errs, fmt.Errorf("netlab: the delayer of %s still runs", l.nodes[i].Name))
	}
	l.mu.Unlock()
	return errors.Join(errs...)
}

// Close heals every fault and removes the namespaces and the bridge. The
// processes running in the namespaces must be gone first. Close checks that
// nothing it made is left.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	var errs []error
	if len(l.nodes) > 0 {
		errs = append(errs, l.Apply(Faults{}))
	}
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	for _, nd := range l.nodes {
		// Deleting the veth takes its peer with it at once; a namespace
		// is destroyed (and its interfaces with it) asynchronously.
		if _, err := run("ip", "link", "show", nd.veth); err == nil {
			if _, err := run("ip", "link", "del", nd.veth); err != nil {
				errs = append(errs, err)
			}
		}
		if _, err := run("ip", "netns", "del", nd.Netns); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := run("ip", "link", "show", l.bridge); err == nil {
		if _, err := run("ip", "link", "del", l.bridge); err != nil {
			errs = append(errs, err)
		}
	}
	out, err := run("ip", "netns", "list")
	if err != nil {
		errs = append(errs, err)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, l.id+"-") {
			errs = append(errs, fmt.Errorf("netlab: namespace %s is left", strings.Fields(line)[0]))
		}
	}
	if links, err := run("ip", "-o", "link", "show"); err == nil && strings.Contains(links, ": "+l.id) {
		errs = append(errs, fmt.Errorf("netlab: interfaces named %s* are left", l.id))
	}
	l.log.Info("network removed", "bridge", l.bridge, "err", errors.Join(errs...))
	return errors.Join(errs...)
}
