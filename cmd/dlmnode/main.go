// Command dlmnode runs dlm nodes. Its demo subcommand starts a local cluster
// and runs the coupon scenario; it is being built.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "dlmnode: not built yet; the lock engine comes first (see README.md)")
	os.Exit(2)
}
