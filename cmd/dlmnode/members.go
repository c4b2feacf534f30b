package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/internal/agent"
)

const membersUsage = `usage: dlmnode members [list] [flags]
       dlmnode members add NAME [flags]
       dlmnode members remove NAME [flags]
       dlmnode members replace OLD NEW [flags]

Shows or changes the cluster's member set, through any agent's admin
address (the agent passes a change on to the view's coordinator).

  list      (the default) the configuration in force: its version, its
            members (live, in the view, addresses) and, while a change is
            half done, the set it is changing from
  add       make NAME a member; then start NAME's agent with the cluster's
            seeds and a --data-dir of its own (the command prints how)
  remove    take NAME out of the cluster; its locks are released as when
            a node fails. Stop NAME's agent afterwards (a node that removes
            itself leaves by itself)
  replace   put NEW in OLD's place in one change (a dead host replaced by
            a new one), keeping the cluster's size; then start NEW

A change goes through a joint configuration of the old and new sets, so
no two majorities exist at any moment; it returns once the cluster runs
the new set. A change needs a majority of the new set up, one change at a
time. If --timeout ends the wait after the joint step was agreed, the
cluster still completes the change: "dlmnode members" shows where it is.
The agent's admin token (--token-file) is required when it has one.
docs/operations.md describes growing, shrinking and replacing step by step.

flags:
`

func membersMain(args []string, stdout, stderr io.Writer) error {
	var f adminFlags
	var timeout time.Duration
	fs := flag.NewFlagSet("members", flag.ContinueOnError)
	f.registerTarget(fs)
	fs.BoolVar(&f.json, "json", false, "print the agent's JSON answer instead of text")
	fs.DurationVar(&timeout, "timeout", time.Minute, "how long to wait for the answer (a change: until the cluster runs the new set)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), membersUsage)
		fs.PrintDefaults()
	}
	fs.SetOutput(stderr)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	verb := "list"
	if len(pos) > 0 {
		verb, pos = pos[0], pos[1:]
	}
	want := map[string]int{"list": 0, "add": 1, "remove": 1, "replace": 2}
	n, ok := want[verb]
	switch {
	case !ok:
		fmt.Fprintf(stderr, "dlmnode members: unknown subcommand %q: want list, add, remove or replace\n", verb)
		return errUsage
	case len(pos) != n:
		fmt.Fprintf(stderr, "dlmnode members %s: %s\n", verb, argsHint(verb, len(pos)))
		return errUsage
	case timeout <= 0:
		fmt.Fprintln(stderr, "dlmnode members: --timeout must be positive")
		return errUsage
	}
	for _, p := range pos {
		if strings.TrimSpace(p) == "" || strings.HasPrefix(p, "-") {
			fmt.Fprintf(stderr, "dlmnode members %s: %q is not a member name\n", verb, p)
			return errUsage
		}
	}
	base, token, err := f.base(stderr, "members")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var raw json.RawMessage
	if verb == "list" {
		err = agent.Fetch(ctx, base, "/v1/members", nil, token, &raw)
	} else {
		body := agent.MemberChange{}
		if verb == "replace" {
			body.Old, body.New = pos[0], pos[1]
		} else {
			body.Name = pos[0]
		}
		err = postChange(ctx, base, verb, token, body, &raw)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && verb != "list" {
			return fmt.Errorf("no answer within --timeout %v: if the joint step was agreed the cluster completes the change; \"dlmnode members --admin %s\" shows where it is", timeout, f.admin)
		}
		return err
	}
	if f.json {
		_, err := fmt.Fprintln(stdout, string(raw))
		return err
	}
	var m agent.Membership
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	switch verb {
	case "list":
		printMembership(stdout, m)
	case "add":
		fmt.Fprintf(stdout, "added %s: %s (made by %s)\n", pos[0], membershipLine(m.Config), m.Node)
		printJoinHint(stdout, m, pos[0])
	case "remove":
		fmt.Fprintf(stdout, "removed %s: %s (made by %s)\n", pos[0], membershipLine(m.Config), m.Node)
		fmt.Fprintf(stdout, "%s is out of the cluster: stop its agent if it still runs, and clear its --data-dir before the host serves again.\n", pos[0])
	case "replace":
		fmt.Fprintf(stdout, "replaced %s by %s: %s (made by %s)\n", pos[0], pos[1], membershipLine(m.Config), m.Node)
		fmt.Fprintf(stdout, "%s is out of the cluster: stop its agent if it still runs.\n", pos[0])
		printJoinHint(stdout, m, pos[1])
	}
	return nil
}

func argsHint(verb string, got int) string {
	switch verb {
	case "list":
		return fmt.Sprintf("takes no arguments, got %d", got)
	case "replace":
		return fmt.Sprintf("want OLD NEW (two member names), got %d arguments", got)
	}
	return fmt.Sprintf("want NAME (one member name), got %d arguments", got)
}

// postChange POSTs a change, asking again while the agent says nothing
// was done and to try again (the cluster is choosing a coordinator).
func postChange(ctx context.Context, base, verb, token string, body agent.MemberChange, v *json.RawMessage) error {
	for {
		err := agent.Post(ctx, base, "/v1/members/"+verb, token, body, v)
		var ae *agent.AdminError
		if !errors.As(err, &ae) || !ae.RetryAfter {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last answer: %v)", ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func membershipLine(c dlm.MembershipConfig) string {
	s := fmt.Sprintf("membership v%d: %s", c.Version, strings.Join(c.Members, " "))
	if c.Joint() {
		s += fmt.Sprintf(" (changing from %s)", strings.Join(c.Old, " "))
	}
	return s
}

func printMembership(w io.Writer, m agent.Membership) {
	fmt.Fprintf(w, "%s\n", membershipLine(m.Config))
	fmt.Fprintf(w, "cluster %s  coordinator %s  answered by %s\n\n", m.ClusterID, orDash(m.Coordinator), m.Node)
	t := newTable(w)
	joint := m.Config.Joint()
	header := "MEMBER\tLIVE\tIN VIEW\tGOSSIP\tLINK\tADMIN"
	if joint {
		header += "\tIN SET"
	}
	fmt.Fprintln(t, header)
	for _, ms := range m.Members {
		name := ms.Name
		if ms.Self {
			name += " *"
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", name, yesNo(ms.Live), yesNo(ms.InView), orDash(ms.GossipAddr), orDash(ms.LinkAddr), orDash(ms.Tags[agent.AdminTag]))
		if joint {
			row += "\t" + setOf(m.Config, ms.Name)
		}
		fmt.Fprintln(t, row)
	}
	t.Flush()
}

// setOf says which sets of a joint configuration name is in.
func setOf(c dlm.MembershipConfig, name string) string {
	inNew, inOld := slices.Contains(c.Members, name), slices.Contains(c.Old, name)
	switch {
	case inNew && inOld:
		return "both"
	case inNew:
		return "new (joining)"
	}
	return "old (leaving)"
}

// printJoinHint tells the operator how to start a new member: the new
// member list, and the gossip addresses of the live members as seeds.
func printJoinHint(w io.Writer, m agent.Membership, name string) {
	var seeds []string
	joined := false
	for _, ms := range m.Members {
		if ms.Name == name && ms.Live {
			joined = true
		}
		if ms.Live && ms.Name != name && ms.GossipAddr != "" {
			seeds = append(seeds, ms.GossipAddr)
		}
	}
	if joined {
		fmt.Fprintf(w, "%s is running already and is taken into the next view.\n", name)
		return
	}
	up := 0
	for _, ms := range m.Members {
		if ms.Live && slices.Contains(m.Config.Members, ms.Name) {
			up++
		}
	}
	need := len(m.Config.Members)/2 + 1
	fmt.Fprintf(w, "Now start %s's agent (with its own addresses, and the cluster's TLS and token files if it uses them):\n", name)
	fmt.Fprintf(w, "  dlmnode agent --name %s --members %s --seeds %s --data-dir DIR ...\n", name, strings.Join(m.Config.Members, ","), strings.Join(seeds, ","))
	fmt.Fprintf(w, "Until it is up, %d of the %d members are up and a quorum needs %d: %s.\n", up, len(m.Config.Members), need, tolerance(up-need))
}

func tolerance(spare int) string {
	switch {
	case spare <= 0:
		return "one more failure stops the cluster"
	case spare == 1:
		return "the cluster survives one more failure"
	}
	return fmt.Sprintf("the cluster survives %d more failures", spare)
}
