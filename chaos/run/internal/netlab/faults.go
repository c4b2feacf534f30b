package netlab

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Link is a direction between two nodes (indexes into Lab.Nodes).
type Link struct{ From, To int }

// Faults are the network faults in force. The zero value is a healthy
// network. Faults concern the traffic between nodes only: the harness's
// own connections to the agents (clients, the admin API) stay clean, so
// what clients record is what the cluster did, not what the network did to
// the clients.
type Faults struct {
	// Cut: packets from From never reach To (To drops them on arrival).
	// A partition cuts both directions.
	Cut map[Link]bool
	// Loss: node i drops this percentage (1-100) of the packets its peers
	// send it, each at random.
	Loss map[int]int
	// Delay: node i's packets to its peers are held this long before they
	// leave.
	Delay map[int]time.Duration
	// Hub: node i and the hub (HubIP: the harness, with its own cluster
	// member) cannot reach each other, both ways. A node cut from every
	// other node but not from the hub still hears the cluster's news
	// from the harness's member.
	Hub map[int]bool
}

// Empty reports whether f is a healthy network.
func (f Faults) Empty() bool {
	for _, c := range f.Cut {
		if c {
			return false
		}
	}
	for _, p := range f.Loss {
		if p > 0 {
			return false
		}
	}
	for _, d := range f.Delay {
		if d > 0 {
			return false
		}
	}
	for _, c := range f.Hub {
		if c {
			return false
		}
	}
	return true
}

// String describes the faults in a line: "cut n1->n2 n2->n1; loss n3 30%".
func (f Faults) String() string {
	return f.Describe(func(i int) string { return fmt.Sprintf("n%d", i+1) })
}

// Describe is String with the nodes named by name.
func (f Faults) Describe(name func(int) string) string {
	var parts []string
	var cuts []string
	for _, k := range slices.SortedFunc(maps.Keys(f.Cut), func(a, b Link) int {
		if a.From != b.From {
			return a.From - b.From
		}
		return a.To - b.To
	}) {
		if f.Cut[k] {
			cuts = append(cuts, name(k.From)+"->"+name(k.To))
		}
	}
	for _, i := range slices.Sorted(maps.Keys(f.Hub)) {
		if f.Hub[i] {
			cuts = append(cuts, name(i)+"<->hub")
		}
	}
	if len(cuts) > 0 {
		parts = append(parts, "cut "+strings.Join(cuts, " "))
	}
	for _, i := range slices.Sorted(maps.Keys(f.Loss)) {
		if f.Loss[i] > 0 {
			parts = append(parts, fmt.Sprintf("loss %s %d%%", name(i), f.Loss[i]))
		}
	}
	for _, i := range slices.Sorted(maps.Keys(f.Delay)) {
		if f.Delay[i] > 0 {
			parts = append(parts, fmt.Sprintf("delay %s %v", name(i), f.Delay[i]))
		}
	}
	if len(parts) == 0 {
		return "healthy"
	}
	return strings.Join(parts, "; ")
}

// Faults returns the faults in force.
func (l *Lab) Faults() Faults {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.faults
}

// delayQueue is the NFQUEUE number delayers use; queue numbers are per
// network namespace, so every node uses the same.
const delayQueue = 7

// Apply replaces the faults in force with f. Each node's rules are
// replaced in one nftables transaction; a delayed node's queue rule
// follows. Apply(Faults{}) heals everything and leaves every namespace with
// an empty ruleset.
func (l *Lab) Apply(f Faults) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("netlab: lab closed")
	}
	if err := f.validate(len(l.nodes)); err != nil {
		return err
	}
	var errs []error
	for i, nd := range l.nodes {
		if _, err := runIn(nd.Netns, l.nftScript(i, f), "nft", "-f", "-"); err != nil {
			errs = append(errs, err)
		}
		d := f.Delay[i]
		dl := l.delayers[i]
		switch {
		case d > 0 && dl == nil:
			var err error
			if dl, err = startDelayer(nd.Netns, delayQueue, d, l.log.With("node", nd.Name)); err != nil {
				errs = append(errs, err)
				continue
			}
			l.delayers[i] = dl
		case d > 0:
			dl.SetDelay(d)
		case dl != nil:
			// The queue rule is gone with the flush above: no new
			// packet is held, and the ones held leave on time.
			if err := dl.Close(); err != nil {
				errs = append(errs, err)
			}
			delete(l.delayers, i)
		}
		if d > 0 {
			if _, err := runIn(nd.Netns, "", "iptables", "-t", "mangle", "-A", "OUTPUT",
				"-d", strings.Join(l.peerIPs(i), ","), "-j", "NFQUEUE",
				"--queue-num", fmt.Sprint(delayQueue), "--queue-bypass"); err != nil {
				errs = append(errs, err)
			}
		}
	}
	l.faults = f.clone()
	l.log.Info("faults", "now", f.String())
	return errors.Join(errs...)
}

// nftScript is node i's whole ruleset for f, replacing what was there.
func (l *Lab) nftScript(i int, f Faults) string {
	var drops []string
	for k, c := range f.Cut {
		if c && k.To == i {
			drops = append(drops, l.nodes[k.From].IP)
		}
	}
	slices.Sort(drops)
	var b strings.Builder
	b.WriteString("flush ruleset\n")
	hub := f.Hub[i]
	if hub {
		drops = append(drops, hubIP)
	}
	if len(drops) == 0 && f.Loss[i] == 0 {
		return b.String()
	}
	b.WriteString("table inet chaos {\n\tchain input {\n\t\ttype filter hook input priority filter; policy accept;\n")
	if len(drops) > 0 {
		fmt.Fprintf(&b, "\t\tip saddr { %s } drop\n", strings.Join(drops, ", "))
	}
	if p := f.Loss[i]; p > 0 {
		fmt.Fprintf(&b, "\t\tip saddr { %s } numgen random mod 100 < %d drop\n", strings.Join(l.peerIPs(i), ", "), p)
	}
	b.WriteString("\t}\n")
	if hub {
		fmt.Fprintf(&b, "\tchain output {\n\t\ttype filter hook output priority filter; policy accept;\n\t\tip daddr %s drop\n\t}\n", hubIP)
	}
	b.WriteString("}\n")
	return b.String()
}

func (l *Lab) peerIPs(i int) []string {
	var ips []string
	for j, nd := range l.nodes {
		if j != i {
			ips = append(ips, nd.IP)
		}
	}
	return ips
}

func (f Faults) validate(n int) error {
	for k, c := range f.Cut {
		if c && (k.From < 0 || k.From >= n || k.To < 0 || k.To >= n || k.From == k.To) {
			return fmt.Errorf("netlab: cut %d->%d outside nodes 0..%d", k.From, k.To, n-1)
		}
	}
	for i, p := range f.Loss {
		if i < 0 || i >= n || p < 0 || p > 100 {
			return fmt.Errorf("netlab: loss %d%% on node %d; want 0-100%% on 0..%d", p, i, n-1)
		}
	}
	for i, d := range f.Delay {
		if i < 0 || i >= n || d < 0 || d > maxDelay {
			return fmt.Errorf("netlab: delay %v on node %d; want 0..%v on 0..%d", d, i, maxDelay, n-1)
		}
	}
	for i, c := range f.Hub {
		if c && (i < 0 || i >= n) {
			return fmt.Errorf("netlab: hub cut of node %d outside nodes 0..%d", i, n-1)
		}
	}
	return nil
}

func (f Faults) clone() Faults {
	return Faults{Cut: maps.Clone(f.Cut), Loss: maps.Clone(f.Loss), Delay: maps.Clone(f.Delay), Hub: maps.Clone(f.Hub)}
}
