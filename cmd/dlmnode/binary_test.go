package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// dlmnodeBinary builds dlmnode once for the package's tests.
func dlmnodeBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "dlmnode-test-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "dlmnode")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func removeBinary() {
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}
