//go:build linux

package servers

import "syscall"

// SysProcAttr puts the child in its own process group and asks the kernel to
// SIGKILL it if the harness dies without running its teardown.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// SignalGroup signals the process group led by pid.
func SignalGroup(pid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-pid, sig) // ESRCH once the group is gone: nothing to do
}
