// Command dlmnode runs dlm nodes.
//
//	dlmnode demo [flags]   start a local cluster and run the coupon scenario
//
// Run "dlmnode demo -h" for the demo's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: dlmnode <command> [flags]

commands:
  demo    start a local cluster over loopback TCP and run the coupon
          scenario: first-come coupons issued under an EX lock into a store
          that refuses stale fencing tokens (dlmnode demo -h for flags)
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	switch args[0] {
	case "demo":
		err := demoMain(ctx, args[1:], stdout, stderr)
		switch {
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		case err != nil:
			fmt.Fprintln(stderr, "dlmnode demo:", err)
			return 1
		}
		return 0
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "dlmnode: unknown command %q\n\n%s", args[0], usage)
	return 2
}
