package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/internal/agent"
)

func lockdumpMain(args []string, stdout, stderr io.Writer) error {
	var f adminFlags
	var lockspace, prefix string
	var limit int
	fs := flag.NewFlagSet("lockdump", flag.ContinueOnError)
	f.register(fs)
	fs.StringVar(&lockspace, "lockspace", "", "only this lockspace")
	fs.StringVar(&prefix, "prefix", "", "only resources whose names start with this")
	fs.IntVar(&limit, "limit", agent.DefaultLockLimit, "at most this many resources per node (0: all)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: dlmnode lockdump [flags]

Shows the resources a node masters, in the spirit of dlm_tool lockdump: per
resource its master, epoch and value block, then its granted, converting
and waiting locks with their ids, nodes, owners, modes, tokens, how long
they have waited and the TTL they have left. With --cluster, every live
member's.

flags:
`)
		fs.PrintDefaults()
	}
	if err := parseCommand(fs, args, stderr, "lockdump"); err != nil {
		return err
	}
	if limit < 0 {
		fmt.Fprintln(stderr, "dlmnode lockdump: --limit must not be negative")
		return errUsage
	}
	base, token, err := f.base(stderr, "lockdump")
	if err != nil {
		return err
	}
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if lockspace != "" {
		q.Set("lockspace", lockspace)
	}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if f.cluster {
		q.Set("cluster", "true")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var raw json.RawMessage
	if err := agent.Fetch(ctx, base, "/v1/locks", q, token, &raw); err != nil {
		return err
	}
	if f.json {
		_, err := fmt.Fprintln(stdout, string(raw))
		return err
	}
	if !f.cluster {
		var d dlm.LockDump
		if err := json.Unmarshal(raw, &d); err != nil {
			return err
		}
		printLockDump(stdout, d)
		return nil
	}
	var cl agent.ClusterLocks
	if err := json.Unmarshal(raw, &cl); err != nil {
		return err
	}
	for i, n := range cl.Nodes {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if n.Locks == nil {
			fmt.Fprintf(stdout, "node %s: %s\n", n.Node, n.Error)
			continue
		}
		printLockDump(stdout, *n.Locks)
	}
	return nil
}

func printLockDump(w io.Writer, d dlm.LockDump) {
	fmt.Fprintf(w, "node %s  epoch %d  %d resources mastered here", d.Node, d.Epoch, len(d.Resources))
	if d.Truncated {
		fmt.Fprint(w, " (first of more: raise --limit)")
	}
	fmt.Fprintln(w)
	for _, r := range d.Resources {
		valid := "valid"
		if !r.Value.Valid {
			valid = "NOT valid"
		}
		fmt.Fprintf(w, "\nResource %s/%s  master %s  epoch %d  value %s seq %d len %d\n", r.Lockspace, r.Name, r.Master, r.Epoch, valid, r.Value.Seq, r.Value.Len)
		for _, q := range []struct {
			title string
			locks []dlm.LockInfo
		}{{"Granted", r.Granted}, {"Converting", r.Converting}, {"Waiting", r.Waiting}} {
			if len(q.locks) == 0 {
				continue
			}
			fmt.Fprintf(w, "  %s\n", q.title)
			t := newTable(w)
			for _, l := range q.locks {
				mode := l.Mode.String()
				switch q.title {
				case "Converting":
					mode = l.Mode.String() + "->" + l.Requested.String()
				case "Waiting":
					mode = "--->" + l.Requested.String()
				}
				var extra []string
				if l.Token != 0 {
					extra = append(extra, fmt.Sprintf("token %d", l.Token))
				}
				if l.Wait > 0 {
					extra = append(extra, "waited "+agent.FormatDuration(l.Wait))
				}
				if l.TTL > 0 {
					extra = append(extra, "ttl "+agent.FormatDuration(l.TTL))
				}
				fmt.Fprintf(t, "    lock %d\tnode %s\towner %d\t%s\t%s\n", l.ID, l.Node, l.Owner, mode, strings.Join(extra, "  "))
			}
			t.Flush()
		}
	}
}
