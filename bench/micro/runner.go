package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed-a6839e30/dlm/bench/servers"
)

// runner runs go test commands one after another, from the module root.
type runner struct {
	goBin  string
	p      *progress
	dir    string // the module root, set by locate
	module string // the module path, set by locate
}

// locate finds the library's module from go env, so that the command works
// from any directory of the repository and reads results by import path;
// it returns the go command's version, which is the toolchain the
// benchmarks are built with (it can differ from the one that built this
// command). From the bench module (bench/, nested in the library's
// directory) it steps up to the library's go.mod.
func (r *runner) locate(ctx context.Context) (goVersion string, err error) {
	out, err := exec.CommandContext(ctx, r.goBin, "env", "GOMOD", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("go env: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	gomod := strings.TrimSpace(lines[0])
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module (go env GOMOD is %q); run from the dlm repository", gomod)
	}
	if len(lines) > 1 {
		goVersion = strings.TrimSpace(lines[1])
	}
	if r.module, err = modulePath(gomod); err != nil {
		return goVersion, err
	}
	if lib, ok := strings.CutSuffix(r.module, "/"+benchDir); ok {
		gomod = filepath.Join(filepath.Dir(filepath.Dir(gomod)), "go.mod")
		if r.module, err = modulePath(gomod); err == nil && r.module != lib {
			err = fmt.Errorf("%s is module %s, not %s: the bench module is not inside the dlm repository", gomod, r.module, lib)
		}
	}
	r.dir = filepath.Dir(gomod)
	return goVersion, err
}

// benchDir is the bench module's directory in the library's, and the last
// element of its module path.
const benchDir = "bench"

// modulePath reads the module line of a go.mod file.
func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s has no module line", gomod)
}

// run runs one go test and parses what it printed. Figures from a command
// that failed are still returned: one benchmark's b.Fatal should not hide
// the others'. The command and its test binary run in a process group of
// their own that is signalled as a whole on cancel, since stopping only the
// go command would leave the benchmark running.
func (r *runner) run(ctx context.Context, prefix string, c command, count int) ([]result, []string, error) {
	r.p.Println(prefix + " " + c.String())
	r.p.Set(prefix + " building…")
	w := newWatcher(prefix, count, r.p)
	cmd := exec.CommandContext(ctx, r.goBin, c.Args...)
	cmd.Dir = r.dir
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = servers.SysProcAttr()
	cmd.Cancel = func() error {
		servers.SignalGroup(cmd.Process.Pid, false)
		return nil
	}
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil && cmd.Process != nil {
		servers.SignalGroup(cmd.Process.Pid, true) // stragglers
	}
	results, problems, perr := parseOutput(bytes.NewReader(w.all.Bytes()), "./"+c.Dir+"/", r.module+"/"+c.Dir)
	if err != nil && ctx.Err() == nil {
		err = fmt.Errorf("%s: %v; its last lines:\n%s", c.String(), err, w.tail(15))
	} else if perr != nil {
		err = perr
	}
	return results, problems, err
}
