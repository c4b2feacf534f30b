//go:build !unix

package main

import (
	"os"
	"os/exec"
)

func ownProcessGroup(*exec.Cmd) {}

// terminate ends a process; without SIGTERM it cannot be asked to leave.
func terminate(p *os.Process) error { return p.Kill() }
