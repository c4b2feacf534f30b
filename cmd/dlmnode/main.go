// Command dlmnode runs dlm nodes and looks at them.
//
//	dlmnode agent [flags]      run one node of a cluster as a process
//	dlmnode cluster [flags]    start a local cluster of agent processes
//	dlmnode status [flags]     a node's (or the cluster's) state, from its admin address
//	dlmnode lockdump [flags]   the locks a node (or every node) masters
//	dlmnode members [add|remove|replace ...] [flags]   show or change the member set
//	dlmnode certs ca|node|client [flags]   make a cluster's CA and its certificates
//	dlmnode demo [flags]       start a local cluster and run the coupon scenario
//	dlmnode lock [flags] RESOURCE -- COMMAND [ARGS]   run COMMAND holding a lock (--permits: a semaphore's permits)
//
// Run "dlmnode <command> -h" for a command's flags; docs/operations.md is
// the operator's guide.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/seed-a6839e30/dlm/internal/agent"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: dlmnode <command> [flags]

commands:
  agent     run one node of a cluster as a process: flags, DLM_* environment
            variables or a TOML file; admin HTTP with /metrics, /healthz,
            /readyz, /v1/status, /v1/locks, /v1/members and a page at /
  cluster   start a local cluster of agent processes on loopback (3 unless
            --nodes), print their addresses, stop them all on Ctrl-C
  status    show a node's state, members and lockspaces (--cluster: every
            node's), from its admin address
  lockdump  show the locks on the resources a node masters (--cluster:
            every node's), from its admin address
  members   show the cluster's member set, or change it online through an
            agent's admin address: "members add NAME", "members remove
            NAME", "members replace OLD NEW"
  certs     make a cluster's certificates for mutual TLS: "certs ca", then
            "certs node NAME[=HOST,...] ..." and "certs client NAME ..."
  demo      start a local cluster over loopback TCP and run the coupon
            scenario: first-come coupons issued under an EX lock into a store
            that refuses stale fencing tokens
  lock      run a command while holding a lock, like flock(1), through an
            agent's client port: dlmnode lock [flags] RESOURCE -- COMMAND;
            with --permits N, holding permits of a semaphore (consul lock -n)

Run "dlmnode <command> -h" for a command's flags.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "agent":
		sigs := make(chan os.Signal, 2)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		defer signal.Stop(sigs)
		return agent.Main(args[1:], stdout, stderr, sigs)
	case "cluster":
		return exitCode(stderr, "cluster", clusterMain(args[1:], stdout, stderr))
	case "status":
		return exitCode(stderr, "status", statusMain(args[1:], stdout, stderr))
	case "lockdump":
		return exitCode(stderr, "lockdump", lockdumpMain(args[1:], stdout, stderr))
	case "members":
		return exitCode(stderr, "members", membersMain(args[1:], stdout, stderr))
	case "certs":
		return exitCode(stderr, "certs", certsMain(args[1:], stdout, stderr))
	case "demo":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		return exitCode(stderr, "demo", demoMain(ctx, args[1:], stdout, stderr))
	case "lock":
		return lockMain(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "dlmnode: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// exitCode maps a command's error to the exit status: 0, 2 for usage
// (already reported), 1 for the rest (reported here).
func exitCode(stderr io.Writer, cmd string, err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	fmt.Fprintf(stderr, "dlmnode %s: %v\n", cmd, err)
	return 1
}
