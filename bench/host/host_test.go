package host

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"testing"
)

func TestDescribe(t *testing.T) {
	m := Describe()
	if m.OS != runtime.GOOS || m.Arch != runtime.GOARCH || m.CPUs < 1 || m.GoVersion == "" {
		t.Fatalf("%+v", m)
	}
	if s := m.String(); !strings.HasPrefix(s, runtime.GOOS+"/"+runtime.GOARCH) || !strings.HasSuffix(s, m.GoVersion) {
		t.Fatalf("String() = %q", s)
	}
}

func TestMachineString(t *testing.T) {
	m := Machine{OS: "linux", Arch: "amd64", CPUs: 2, CPUModel: "Test CPU", Kernel: "6.1.0", GoVersion: "go1.26.0", MemoryMB: 24000}
	if got, want := m.String(), "linux/amd64, 2 CPUs (Test CPU), 24000 MB, Linux 6.1.0, go1.26.0"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestParseLoadAverage(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"2.51 2.10 1.90 3/412 12345\n", "2.51 2.10 1.90"},
		{"0.00 0.01 0.05 1/1 1", "0.00 0.01 0.05"},
		{"", ""},
		{"1.0 2.0", ""},
		{"a b c d", ""},
	} {
		if got := parseLoadAverage(tc.in); got != tc.want {
			t.Errorf("parseLoadAverage(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if _, err := os.Stat("/proc/loadavg"); err == nil && LoadAverage() == "" {
		t.Error("LoadAverage is empty although /proc/loadavg exists")
	}
}

func TestIsTerminal(t *testing.T) {
	if IsTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is not a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Error("a regular file is not a terminal")
	}
}
