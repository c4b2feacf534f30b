package workload

import (
	"context"
	"math"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"

	"github.com/seed-a6839e30/dlm/bench/lockbench"
)

// memSystem is an in-process lock service for testing the runner: FIFO
// reader/writer locks from x/sync/semaphore, with a global counter as a
// monotonic token. Knobs turn it into the failure modes the runner must
// report: leaky grants everything at once (a lease that expired under its
// holder), noCancel ignores ctx while waiting, opaque hides the token order.
type memSystem struct {
	leaky, noCancel, opaque, noShared bool

	mu     sync.Mutex
	res    map[string]*semaphore.Weighted
	token  atomic.Uint64
	closed atomic.Bool
}

// full is the weight of an exclusive grant; shared grants weigh 1.
const full = math.MaxInt32

func (m *memSystem) Info() lockbench.Info {
	f := lockbench.FencingMonotonic
	if m.opaque {
		f = lockbench.FencingOpaque
	}
	return lockbench.Info{Name: "mem", Servers: 0, Shared: !m.noShared, Fencing: f, Cancelable: !m.noCancel}
}

func (m *memSystem) Start(context.Context) error {
	m.res = map[string]*semaphore.Weighted{}
	return nil
}

func (m *memSystem) Close() error { m.closed.Store(true); return nil }

func (m *memSystem) NewClient(context.Context, lockbench.ClientConfig) (lockbench.Client, error) {
	if m.res == nil {
		return nil, lockbench.ErrNotStarted
	}
	return &memClient{sys: m}, nil
}

func (m *memSystem) sem(name string) *semaphore.Weighted {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.res[name]
	if !ok {
		s = semaphore.NewWeighted(full)
		m.res[name] = s
	}
	return s
}

type memClient struct {
	sys    *memSystem
	closed atomic.Bool
}

func (c *memClient) Lock(ctx context.Context, name string, mode lockbench.Mode) (lockbench.Held, error) {
	if c.closed.Load() {
		return nil, lockbench.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h := &memHeld{c: c, weight: full}
	if mode == lockbench.Shared && !c.sys.noShared {
		h.weight = 1
	}
	if !c.sys.leaky {
		h.sem = c.sys.sem(name)
		wctx := ctx
		if c.sys.noCancel {
			wctx = context.Background()
		}
		if err := h.sem.Acquire(wctx, h.weight); err != nil {
			return nil, err
		}
	}
	h.fence = lockbench.Fence{Token: c.sys.token.Add(1), Monotonic: !c.sys.opaque}
	return h, nil
}

func (c *memClient) Close() error { c.closed.Store(true); return nil }

type memHeld struct {
	c      *memClient
	sem    *semaphore.Weighted
	weight int64
	fence  lockbench.Fence
}

func (h *memHeld) Fence() lockbench.Fence { return h.fence }

func (h *memHeld) Unlock(context.Context) error {
	if h.sem != nil {
		h.sem.Release(h.weight)
	}
	return nil
}
