package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/internal/agent"
)

// adminFlags are the flags dlmnode status, lockdump and members share: which agent
// to ask, and how.
type adminFlags struct {
	admin     string
	tokenFile string
	cluster   bool
	json      bool
}

func (f *adminFlags) register(fs *flag.FlagSet) {
	f.registerTarget(fs)
	fs.BoolVar(&f.cluster, "cluster", false, "ask every live member, through this agent")
	fs.BoolVar(&f.json, "json", false, "print the agent's JSON answer instead of tables")
}

// registerTarget declares --admin and --token-file: which agent, and its
// token.
func (f *adminFlags) registerTarget(fs *flag.FlagSet) {
	def := os.Getenv("DLM_ADMIN")
	if def == "" {
		def = fmt.Sprintf("http://127.0.0.1:%d", agent.DefaultAdminPort)
	}
	fs.StringVar(&f.admin, "admin", def, "the agent's admin address (URL or host:port; env DLM_ADMIN)")
	fs.StringVar(&f.tokenFile, "token-file", os.Getenv("DLM_ADMIN_TOKEN_FILE"), "file holding the agent's admin token (env DLM_ADMIN_TOKEN_FILE)")
}

// base returns the admin URL and the token.
func (f *adminFlags) base(stderr io.Writer, cmd string) (string, string, error) {
	u := f.admin
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	if p, err := url.Parse(u); err != nil || p.Host == "" {
		fmt.Fprintf(stderr, "dlmnode %s: --admin %q: want a URL or host:port\n", cmd, f.admin)
		return "", "", errUsage
	}
	token := ""
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			fmt.Fprintf(stderr, "dlmnode %s: --token-file: %v\n", cmd, err)
			return "", "", errUsage
		}
		token = strings.TrimSpace(string(b))
	}
	return u, token, nil
}

func parseCommand(fs *flag.FlagSet, args []string, stderr io.Writer, cmd string) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "dlmnode %s: unexpected argument %q\n", cmd, fs.Arg(0))
		return errUsage
	}
	return nil
}

func statusMain(args []string, stdout, stderr io.Writer) error {
	var f adminFlags
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: dlmnode status [flags]

Shows a node's state, epoch, quorum, members, lockspaces (resources and
locks it masters, locks it holds), and its latest recoveries and deadlocks,
as its agent's /v1/status answers them. With --cluster, every live member's.

flags:
`)
		fs.PrintDefaults()
	}
	if err := parseCommand(fs, args, stderr, "status"); err != nil {
		return err
	}
	base, token, err := f.base(stderr, "status")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := url.Values{}
	if f.cluster {
		q.Set("cluster", "true")
	}
	var raw json.RawMessage
	if err := agent.Fetch(ctx, base, "/v1/status", q, token, &raw); err != nil {
		return err
	}
	if f.json {
		_, err := fmt.Fprintln(stdout, string(raw))
		return err
	}
	if f.cluster {
		var cs agent.ClusterStatus
		if err := json.Unmarshal(raw, &cs); err != nil {
			return err
		}
		printClusterStatus(stdout, cs)
		return nil
	}
	var st dlm.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return err
	}
	printStatus(stdout, st)
	return nil
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func quorumText(st dlm.Status) string {
	inView := 0
	for _, m := range st.Members {
		if m.InView {
			inView++
		}
	}
	held := "lost"
	if st.HasQuorum {
		held = "held"
	}
	return fmt.Sprintf("%s (%d in view, %d needed)", held, inView, st.Quorum)
}

func printStatus(w io.Writer, st dlm.Status) {
	fmt.Fprintf(w, "node %s  cluster %s  state %s  epoch %d  coordinator %s  quorum %s\n",
		st.Name, st.ClusterID, st.State, st.Epoch, orDash(st.Coordinator), quorumText(st))
	fmt.Fprintf(w, "up %s (since %s)\n", agent.FormatDuration(time.Since(st.Started)), st.Started.Format(time.RFC3339))
	fmt.Fprintf(w, "membership v%d: %s", st.Membership.Version, strings.Join(st.Membership.Members, " "))
	if st.Membership.Joint() {
		fmt.Fprintf(w, " (changing from %s)", strings.Join(st.Membership.Old, " "))
	}
	fmt.Fprint(w, "\n\n")
	t := newTable(w)
	fmt.Fprintln(t, "MEMBER\tLIVE\tIN VIEW\tLINK\tGOSSIP\tADMIN")
	for _, m := range st.Members {
		name := m.Name
		if m.Self {
			name += " *"
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\n", name, yesNo(m.Live), yesNo(m.InView), orDash(m.LinkAddr), orDash(m.GossipAddr), orDash(m.Tags[agent.AdminTag]))
	}
	t.Flush()
	fmt.Fprintln(w)
	t = newTable(w)
	fmt.Fprintln(t, "LOCKSPACE\tRESOURCES\tLOCKS\tGRANTED\tCONVERTING\tWAITING\tHELD\tREQUESTS\tMOST WAITERS")
	for _, ls := range st.Lockspaces {
		var top []string
		for _, c := range ls.MostWaiters {
			top = append(top, fmt.Sprintf("%s(%d)", c.Resource, c.Queued))
		}
		fmt.Fprintf(t, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", ls.Name, ls.Resources, ls.Locks, ls.Granted, ls.Converting, ls.Waiting, ls.Held, ls.Requests, orDash(strings.Join(top, " ")))
	}
	if len(st.Lockspaces) == 0 {
		fmt.Fprintln(t, "(none)")
	}
	t.Flush()
	if len(st.Recoveries) > 0 {
		fmt.Fprintln(w)
		t = newTable(w)
		fmt.Fprintln(t, "RECOVERY\tSTARTED\tREMOVED\tADDED\tREPORT\tLOCK-DELAY\tBARRIER1\tREBUILD\tBARRIER2\tTOTAL")
		for _, r := range st.Recoveries {
			fmt.Fprintf(t, "epoch %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Epoch, r.Started.Format("15:04:05"),
				orDash(strings.Join(r.Removed, ",")), orDash(strings.Join(r.Added, ",")),
				agent.FormatDuration(r.Report), agent.FormatDuration(r.LockDelay), agent.FormatDuration(r.Barrier1), agent.FormatDuration(r.Rebuild), agent.FormatDuration(r.Barrier2), agent.FormatDuration(r.Total))
		}
		t.Flush()
	}
	if len(st.Deadlocks) > 0 {
		fmt.Fprintln(w)
		t = newTable(w)
		fmt.Fprintln(t, "DEADLOCK\tAT\tLOCKSPACE\tRESOURCE\tVICTIM\tDETAIL")
		for _, d := range st.Deadlocks {
			fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s lock %d\t%s\n", d.Kind, d.At.Format("15:04:05"), d.Lockspace, d.Resource, d.Node, d.Lock, d.Detail)
		}
		t.Flush()
	}
}

func printClusterStatus(w io.Writer, cs agent.ClusterStatus) {
	t := newTable(w)
	fmt.Fprintln(t, "NODE\tSTATE\tEPOCH\tQUORUM\tRESOURCES\tLOCKS\tQUEUED\tHELD\tREQUESTS\tADMIN")
	for _, n := range cs.Nodes {
		if n.Status == nil {
			fmt.Fprintf(t, "%s\t?\t\t\t\t\t\t\t\t%s  (%s)\n", n.Node, orDash(n.AdminURL), n.Error)
			continue
		}
		st := n.Status
		var res, locks, queued, held, reqs int
		for _, ls := range st.Lockspaces {
			res, locks, queued, held, reqs = res+ls.Resources, locks+ls.Locks, queued+ls.Converting+ls.Waiting, held+ls.Held, reqs+ls.Requests
		}
		fmt.Fprintf(t, "%s\t%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", n.Node, st.State, st.Epoch, quorumText(*st), res, locks, queued, held, reqs, orDash(n.AdminURL))
	}
	t.Flush()
	fmt.Fprintf(w, "(gathered by %s; RESOURCES, LOCKS and QUEUED are what each node masters, HELD and REQUESTS its own locks)\n", cs.From)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
