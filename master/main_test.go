package master

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs the property tests with 1000 random histories unless the
// -rapid.checks flag says otherwise: enough to find the mutations we tried
// (barging, lost wakeups, token reuse, a wrong matrix entry) every time, in
// about a second.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		if err := flag.Set("rapid.checks", "1000"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
