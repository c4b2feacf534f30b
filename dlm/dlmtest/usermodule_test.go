package dlmtest_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// userTest is the test of a user's module: it sees dlm only as a
// dependency, so the compiler refuses any import of an internal package.
const userTest = `package orders_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed-a6839e30/dlm/dlm"
	"github.com/seed-a6839e30/dlm/dlm/dlmtest"
	"github.com/seed-a6839e30/dlm/modes"
)

func takeLock(t *testing.T, c *dlmtest.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lss, err := c.Lockspaces("orders")
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lss[0].Lock(ctx, "order/42", modes.EX)
	if err != nil {
		t.Fatal(err)
	}
	if lk.Token() == 0 {
		t.Error("no fencing token")
	}
	if _, err := lss[1].TryLock(ctx, "order/42", modes.PR); !errors.Is(err, dlm.ErrNotQueued) {
		t.Errorf("TryLock of a held EX lock: %v, want ErrNotQueued", err)
	}
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}
	t.Log("USER-MODULE: lock taken and released")
}

func TestInProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { takeLock(t, dlmtest.Start(t, 3)) })
}

func TestLoopbackTCP(t *testing.T) { takeLock(t, dlmtest.Start(t, 3, dlmtest.TCP())) }
`

// TestUserModule proves that a user can depend on the library: a module
// outside this repository's, written into a temporary directory with a
// replace directive pointing here, imports only the public packages,
// starts clusters with dlmtest and takes a lock. Its module graph must not
// hold the bench harness's dependencies.
func TestUserModule(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: builds a module of its own with the go command")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH: cannot build a user's module")
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/orders\n\ngo 1.26.0\n\n" +
		"require github.com/seed-a6839e30/dlm v0.0.0\n\n" +
		"replace github.com/seed-a6839e30/dlm => " + filepath.ToSlash(repo) + "\n"
	for name, content := range map[string]string{
		"go.mod":         gomod,
		"go.sum":         string(sum), // the library's dependencies, verified already
		"orders_test.go": userTest,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Dir = dir
		// -mod=mod fills in the requirements from the library's go.mod;
		// GOPROXY, GOMODCACHE and GOCACHE come from the environment.
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("go %s in the user's module: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	out := run("test", "-count=1", "-v", ".")
	if got := strings.Count(out, "USER-MODULE: lock taken and released"); got != 2 {
		t.Fatalf("the user's tests took %d locks, want 2:\n%s", got, out)
	}
	graph := run("list", "-m", "all")
	sc := bufio.NewScanner(strings.NewReader(graph))
	for sc.Scan() {
		for _, banned := range []string{"go.etcd.io/", "google.golang.org/grpc", "github.com/redis/", "github.com/go-redsync/", "github.com/go-zookeeper/", "go.uber.org/zap", "golang.org/x/perf"} {
			if strings.HasPrefix(sc.Text(), banned) {
				t.Errorf("the user's module graph holds %s, a dependency of the bench harness only", sc.Text())
			}
		}
	}
}
