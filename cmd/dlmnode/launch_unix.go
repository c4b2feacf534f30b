//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// ownProcessGroup puts an agent in a process group of its own, so that the
// terminal's Ctrl-C reaches only dlmnode cluster, which then stops each
// agent once (a second signal would make an agent exit without leaving).
func ownProcessGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// terminate asks a process to leave cleanly.
func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
