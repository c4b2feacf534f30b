package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// tracing is the execution traces being recorded from some agents.
type tracing struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

// startTraces records d of execution trace from each agent's
// /debug/pprof/trace into dir/trace-NAME.out.
func startTraces(ctx context.Context, d time.Duration, dir string, agents ...*agent) *tracing {
	t := &tracing{}
	for _, a := range agents {
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			if err := fetchTrace(ctx, d, a, filepath.Join(dir, "trace-"+a.name+".out")); err != nil {
				t.mu.Lock()
				t.errs = append(t.errs, fmt.Errorf("trace of %s: %w", a.name, err))
				t.mu.Unlock()
			}
		}()
	}
	return t
}

// wait waits for every trace and returns the first error.
func (t *tracing) wait() error {
	t.wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.errs) > 0 {
		return t.errs[0]
	}
	return nil
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
