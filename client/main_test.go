package client

import (
	"os"
	"testing"

	"github.com/seed-a6839e30/dlm/internal/leakcheck"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain()) // this process is a client process of a test (process_test.go)
	}
	leakcheck.Main(m)
}
