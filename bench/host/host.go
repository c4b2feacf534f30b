// Package host describes the machine the benchmark harnesses run on, so that
// every figure they print can be read against the hardware, toolchain and
// load that produced it. It reads runtime and /proc only; a field it cannot
// read stays empty rather than failing the run.
package host

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes where a run happened.
type Machine struct {
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
	Kernel    string `json:"kernel,omitempty"`
	GoVersion string `json:"go_version"`
	MemoryMB  int    `json:"memory_mb,omitempty"`
}

func (m Machine) String() string {
	s := fmt.Sprintf("%s/%s, %d CPUs", m.OS, m.Arch, m.CPUs)
	if m.CPUModel != "" {
		s += " (" + m.CPUModel + ")"
	}
	if m.MemoryMB > 0 {
		s += fmt.Sprintf(", %d MB", m.MemoryMB)
	}
	if m.Kernel != "" {
		s += ", Linux " + m.Kernel
	}
	return s + ", " + m.GoVersion
}

// Describe describes this host. GoVersion is the toolchain that built the
// calling program.
func Describe() Machine {
	m := Machine{
		OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
	}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	if kb, err := strconv.Atoi(strings.TrimSuffix(procField("/proc/meminfo", "MemTotal"), " kB")); err == nil {
		m.MemoryMB = kb / 1024
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// LoadAverage returns the 1, 5 and 15 minute load averages as the kernel
// prints them ("2.51 2.10 1.90"), or "" where /proc/loadavg does not exist.
// On a small shared machine it is the first thing to read next to a noisy
// figure.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return parseLoadAverage(string(b))
}

func parseLoadAverage(s string) string {
	f := strings.Fields(s)
	if len(f) < 3 {
		return ""
	}
	for _, v := range f[:3] {
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return ""
		}
	}
	return strings.Join(f[:3], " ")
}

// procField returns the value of the first "key: value" line of a /proc
// file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// IsTerminal reports whether w is a character device (a terminal), where a
// status line can be rewritten in place; elsewhere (CI logs, pipes) it would
// pile up as carriage returns.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
