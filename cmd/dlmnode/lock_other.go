//go:build !unix

package main

import (
	"os"
	"os/exec"
)

func ownGroup(*exec.Cmd) {}

// signalGroup sends s to COMMAND; without process groups, only to it.
func signalGroup(p *os.Process, s os.Signal) {
	if s == os.Interrupt {
		_ = p.Signal(s)
		return
	}
	_ = p.Kill()
}
