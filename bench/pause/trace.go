package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"
)

// startTraces records d of execution trace from each agent's
// /debug/pprof/trace into dir/trace-NAME.out; Wait gives the first error.
func startTraces(ctx context.Context, d time.Duration, dir string, agents ...*agent) *errgroup.Group {
	var g errgroup.Group
	for _, a := range agents {
		g.Go(func() error {
			if err := fetchTrace(ctx, d, a, filepath.Join(dir, "trace-"+a.name+".out")); err != nil {
				return fmt.Errorf("trace of %s: %w", a.name, err)
			}
			return nil
		})
	}
	return &g
}

func fetchTrace(ctx context.Context, d time.Duration, a *agent, path string) error {
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	url := fmt.Sprintf("http://%s/debug/pprof/trace?seconds=%d", a.admin, int((d+time.Second-1)/time.Second))
	resp, err := get(ctx, url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
