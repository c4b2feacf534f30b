package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/internal/agent"
)

// TestMembersUsage: the command's mistakes are one line and exit status
// 2, before any agent is asked; its help names every subcommand.
func TestMembersUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"members", "-h"}, 0, "dlmnode members replace OLD NEW [flags]"},
		{[]string{"members", "--help"}, 0, "-timeout duration"},
		{[]string{"help"}, 0, `"members add NAME"`},
		{[]string{"members", "add"}, 2, "dlmnode members add: want NAME (one member name), got 0 arguments"},
		{[]string{"members", "add", "a", "b"}, 2, "want NAME (one member name), got 2 arguments"},
		{[]string{"members", "remove"}, 2, "dlmnode members remove: want NAME"},
		{[]string{"members", "replace", "a"}, 2, "want OLD NEW (two member names), got 1 arguments"},
		{[]string{"members", "list", "x"}, 2, "takes no arguments"},
		{[]string{"members", "promote", "a"}, 2, `unknown subcommand "promote"`},
		{[]string{"members", "add", "a", "--timeout", "0s"}, 2, "--timeout must be positive"},
		{[]string{"members", "add", " "}, 2, `" " is not a member name`},
		{[]string{"members", "--no-such-flag"}, 2, "flag provided but not defined"},
		{[]string{"members", "--admin", "http://"}, 2, "want a URL or host:port"},
		{[]string{"members", "add", "n4", "--admin", "127.0.0.1:1", "--token-file", "/nonexistent/token"}, 2, "--token-file"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.want) {
			t.Errorf("%v: exit %d (want %d), output %q lacks %q", tc.args, code, tc.code, out.String()+errb.String(), tc.want)
		}
		if code == 2 && strings.Count(strings.TrimSpace(errb.String()), "\n") > 0 && !strings.Contains(errb.String(), "Usage") && !strings.Contains(errb.String(), "usage") {
			t.Errorf("%v: more than one line: %q", tc.args, errb.String())
		}
	}
}

// TestMembershipPrinting: the list marks this node, shows the set a
// change is moving from and which set each member is in; the hint after
// an add names the new member list, the live members' gossip addresses as
// seeds and what a failure would do meanwhile.
func TestMembershipPrinting(t *testing.T) {
	m := agent.Membership{Node: "a2", ClusterID: "prod", Coordinator: "a1",
		Config: dlm.MembershipConfig{Version: 3, Members: []string{"a1", "a2", "a4"}, Old: []string{"a1", "a2", "a3"}},
		Members: []dlm.MemberStatus{
			{Name: "a1", Live: true, InView: true, GossipAddr: "10.0.0.1:7946"},
			{Name: "a2", Self: true, Live: true, InView: true, GossipAddr: "10.0.0.2:7946"},
			{Name: "a3"},
			{Name: "a4"},
		}}
	var b bytes.Buffer
	printMembership(&b, m)
	out := b.String()
	for _, want := range []string{"membership v3: a1 a2 a4 (changing from a1 a2 a3)\n", "coordinator a1  answered by a2", "IN SET", "a2 *", "old (leaving)", "new (joining)", "both"} {
		if !strings.Contains(out, want) {
			t.Errorf("the list lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	m.Config = dlm.MembershipConfig{Version: 4, Members: []string{"a1", "a2", "a4"}}
	printJoinHint(&b, m, "a4")
	for _, want := range []string{"dlmnode agent --name a4 --members a1,a2,a4 --seeds 10.0.0.1:7946,10.0.0.2:7946 --data-dir DIR",
		"2 of the 3 members are up and a quorum needs 2: one more failure stops the cluster"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the hint lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	m.Members[3].Live = true
	printJoinHint(&b, m, "a4")
	if !strings.Contains(b.String(), "a4 is running already") {
		t.Errorf("the hint for a running member: %q", b.String())
	}
}
