package netlab

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// cmdTimeout bounds every ip, nft and iptables command.
const cmdTimeout = 10 * time.Second

// run runs a command and returns its standard output; the error carries
// its standard error.
func run(name string, args ...string) (string, error) { return runIn("", "", name, args...) }

// runIn runs a command inside network namespace ns ("" for the harness's
// own), with input (if any) on its standard input.
func runIn(ns, input, name string, args ...string) (string, error) {
	if ns != "" {
		args = append([]string{"netns", "exec", ns, name}, args...)
		name = "ip"
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if input != "" {
		cmd.Stdin = strings.NewReader(input)
	}
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("netlab: %s %s: %w: %s", name, strings.Join(args, " "), err,
			strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
