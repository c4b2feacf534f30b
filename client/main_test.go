package client

import (
	"testing"

	"github.com/seed-a6839e30/dlm/internal/leakcheck"
)

func TestMain(m *testing.M) {
	maybeHelper()
	leakcheck.Main(m)
}
