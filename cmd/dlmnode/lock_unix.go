//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// ownGroup starts COMMAND in a process group of its own, so that a lost
// lock ends everything it started (a shell's children too), not only
// the process dlmnode lock started.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// signalGroup sends s to COMMAND's process group.
func signalGroup(p *os.Process, s os.Signal) {
	if sig, ok := s.(syscall.Signal); ok {
		if syscall.Kill(-p.Pid, sig) == nil {
			return
		}
	}
	_ = p.Signal(s)
}
