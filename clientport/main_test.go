package clientport

import (
	"os"
	"testing"

	"github.com/seed-a6839e30/dlm/internal/leakcheck"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain()) // this process holds sessions for a memory benchmark
	}
	leakcheck.Main(m)
}
