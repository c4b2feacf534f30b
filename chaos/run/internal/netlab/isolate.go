// Package netlab builds the network a chaos run's agents live on, and
// breaks it: one network namespace per agent, each with a veth into a
// bridge, and faults as nftables rules inside the agents' namespaces
// (partitions of any shape, one-way cuts, packet loss) or packets held back
// in user space (delay).
//
// Everything lives inside a private network and mount namespace of the
// harness's own (Reexec, Enter): the bridge is in the harness's namespace,
// the agents' namespaces are bind-mounted on a private tmpfs over /run, so
// the host's network, its /run/netns and the other users of the machine
// see none of it, and the kernel removes all of it when the harness exits,
// however it exits. Close removes it explicitly all the same.
//
// Delay: this kernel has no sch_netem, so `tc qdisc ... netem` is not an
// option. A delayed agent's outgoing packets to its peers are queued to
// user space (iptables' NFQUEUE target, via the nf_tables compat layer)
// and the harness accepts each one after the delay (see Delayer). Packets
// keep their order; a held packet is real kernel state, so TCP sees a
// slow path, not a proxy.
package netlab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
)

// insideEnv marks a process Reexec started inside the new namespaces.
const insideEnv = "DLM_CHAOS_NETLAB"

// ErrNeedRoot says the namespace nemeses cannot run: the harness is not
// root or lacks a tool. Its message says which.
var ErrNeedRoot = errors.New("netlab: network namespaces need root")

// Inside reports whether this process runs inside the namespaces Reexec
// created.
func Inside() bool { return os.Getenv(insideEnv) == "1" }

// Available reports nil if this process can build a lab: it is root and
// has ip, nft and iptables. The error names what is missing.
func Available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w (running as uid %d)", ErrNeedRoot, os.Geteuid())
	}
	for _, tool := range []string{"ip", "nft", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w and the %s command, not found (apt-get install iproute2 nftables iptables)", ErrNeedRoot, tool)
		}
	}
	return nil
}

// Reexec runs this program again with the same arguments in new network and
// mount namespaces, and returns its exit status once it ended. SIGINT and
// SIGTERM are passed on to it; if this process dies, the kernel kills it.
// The child must call Enter first.
func Reexec() (int, error) {
	// Pdeathsig is bound to the thread that forks; this goroutine keeps
	// its thread until the child is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	exe, err := os.Executable()
	if err != nil {
		return 1, err
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Args[0] = os.Args[0]
	cmd.Env = append(os.Environ(), insideEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS,
		Pdeathsig:  syscall.SIGKILL,
		Setpgid:    true, // a Ctrl-C reaches it once, through us
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 1, fmt.Errorf("netlab: start in new namespaces: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sigs:
			_ = cmd.Process.Signal(s)
		case err := <-done:
			var ee *exec.ExitError
			switch {
			case err == nil:
				return 0, nil
			case errors.As(err, &ee):
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					return 128 + int(ws.Signal()), nil
				}
				return ee.ExitCode(), nil
			}
			return 1, err
		}
	}
}

// Enter prepares the namespaces Reexec created: mounts stop propagating to
// the host, a private tmpfs covers /run (where `ip netns` keeps its
// namespaces), and loopback is up.
func Enter() error {
	if !Inside() {
		return errors.New("netlab: Enter outside the namespaces of Reexec")
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("netlab: make mounts private: %w", err)
	}
	if err := syscall.Mount("netlab", "/run", "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("netlab: tmpfs on /run: %w", err)
	}
	if _, err := run("ip", "link", "set", "lo", "up"); err != nil {
		return err
	}
	return nil
}
