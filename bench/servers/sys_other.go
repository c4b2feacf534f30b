//go:build unix && !linux

package servers

import "syscall"

// SysProcAttr puts the child in its own process group.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// SignalGroup signals the process group led by pid.
func SignalGroup(pid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-pid, sig)
}
