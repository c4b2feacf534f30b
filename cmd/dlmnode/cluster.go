package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// clusterStopTimeout bounds how long an agent may take to leave before it
// is killed.
const clusterStopTimeout = 15 * time.Second

func clusterMain(args []string, stdout, stderr io.Writer) error {
	var nodes int
	var dir string
	var ready time.Duration
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.IntVar(&nodes, "nodes", 3, "agents to start (node1..nodeN)")
	fs.StringVar(&dir, "dir", "", "directory for the agents' logs and data directories (default: a new temporary directory, kept); started again on the same directory, the agents keep the member set that \"dlmnode members\" changed")
	fs.DurationVar(&ready, "ready-timeout", time.Minute, "how long to wait for every agent to serve")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: dlmnode cluster [flags]

Starts a local cluster of agent processes ("dlmnode agent") on loopback,
with ports picked for them, waits until every one serves, and prints each
agent's admin URL and addresses. Each agent keeps its data directory in
DIR/data/NAME. Ctrl-C (or SIGTERM) stops them all: each releases its
locks and leaves; a second Ctrl-C kills them at once.

flags:
`)
		fs.PrintDefaults()
	}
	if err := parseCommand(fs, args, stderr, "cluster"); err != nil {
		return err
	}
	if nodes < 1 || nodes > 64 {
		fmt.Fprintln(stderr, "dlmnode cluster: --nodes must be in 1..64")
		return errUsage
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "dlm-cluster-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithTimeout(context.Background(), ready)
	defer cancel()
	go func() {
		select {
		case <-sigs:
			cancel() // a signal while starting: give up and stop what started
		case <-ctx.Done():
		}
	}()

	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("node%d", i+1)
	}
	spec := clusterSpec{names: names, members: names, extra: func(p *agentProc) []string {
		return []string{"--data-dir", filepath.Join(dir, "data", p.name)}
	}}
	c, err := startLocalCluster(ctx, bin, dir, spec)
	if err != nil {
		return fmt.Errorf("%w (logs in %s)", err, dir)
	}
	if err := c.waitReady(ctx); err != nil {
		_ = c.stopAll(clusterStopTimeout)
		return fmt.Errorf("%w (logs in %s)", err, dir)
	}
	cancel()
	printCluster(stdout, c, dir)

	exited := make(chan *agentProc, len(c.procs))
	for _, p := range c.procs {
		go func() { <-p.exited; exited <- p }()
	}
	running := len(c.procs)
	for running > 0 {
		select {
		case p := <-exited:
			running--
			fmt.Fprintf(stderr, "dlmnode cluster: %s exited (%v); its log: %s\n", p.name, p.exitErr, p.logPath)
			continue
		case <-sigs:
		}
		fmt.Fprintln(stdout, "stopping the agents (they release their locks and leave; Ctrl-C again kills them)")
		done := make(chan error, 1)
		go func() { done <- c.stopAll(clusterStopTimeout) }()
		select {
		case err := <-done:
			if err != nil {
				return err
			}
		case <-sigs:
			c.kill()
			fmt.Fprintln(stdout, "killed")
			return nil
		}
		fmt.Fprintln(stdout, "stopped")
		return nil
	}
	return fmt.Errorf("every agent exited (logs in %s)", dir)
}

func printCluster(w io.Writer, c *localCluster, dir string) {
	fmt.Fprintf(w, "dlmnode cluster: %d agents serving on loopback; logs and data in %s\n\n", len(c.procs), dir)
	t := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(t, "NAME\tPID\tADMIN\tCLIENTS\tGOSSIP\tLINK")
	var clients []string
	for _, p := range c.procs {
		fmt.Fprintf(t, "%s\t%d\t%s\t%s\t%s\t%s\n", p.name, p.cmd.Process.Pid, p.AdminURL(), p.client, p.gossip, p.link)
		clients = append(clients, p.client)
	}
	t.Flush()
	first := c.procs[0]
	fmt.Fprintf(w, `
Try:
  dlmnode status --admin %[1]s --cluster
  dlmnode lockdump --admin %[1]s --cluster
  dlmnode lock --addr %[2]s my-resource -- sh -c 'echo token $DLM_TOKEN'
  dlmnode members --admin %[1]s
  a browser on %[1]s/
Ctrl-C stops them all.
`, first.AdminURL(), strings.Join(clients, ","))
}
