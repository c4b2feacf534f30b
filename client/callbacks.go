package client

import (
	"sync"

	"github.com/seed-a6839e30/dlm/modes"
)

// dispatcher runs the blocking callbacks on one goroutine of the client's,
// in the order the agent sent the notifications: never on the goroutine
// reading the connection, so a callback may call the lock API.
type dispatcher struct {
	mu    sync.Mutex
	queue []callback
	wake  chan struct{}
}

type callback struct {
	fn   func(modes.Mode)
	mode modes.Mode
}

func newDispatcher() *dispatcher { return &dispatcher{wake: make(chan struct{}, 1)} }

func (d *dispatcher) push(fn func(modes.Mode), mode modes.Mode) {
	d.mu.Lock()
	d.queue = append(d.queue, callback{fn, mode})
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// run delivers callbacks until stop closes.
func (d *dispatcher) run(stop <-chan struct{}) {
	var batch []callback
	for {
		d.mu.Lock()
		batch, d.queue = d.queue, batch[:0]
		d.mu.Unlock()
		for i, cb := range batch {
			cb.fn(cb.mode)
			batch[i] = callback{}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-d.wake:
		case <-stop:
			return
		}
	}
}
