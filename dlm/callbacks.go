package dlm

import (
	"sync"

	"github.com/seed-a6839e30/dlm/modes"
)

// dispatcher runs blocking callbacks on one library goroutine, in the order
// they were queued, so that no callback ever runs under a shard's mutex and
// the callbacks of one lock arrive in order. The queue is unbounded: a
// blocking notification must never be dropped, and the table sends at most
// a few per lock per blocking episode.
type dispatcher struct {
	mu    sync.Mutex
	queue []callback
	wake  chan struct{}
	done  chan struct{}
}

type callback struct {
	fn   func(modes.Mode)
	mode modes.Mode
	done *Lock // instead of fn: an asynchronous operation's end (lock_async.go)
}

func newDispatcher() *dispatcher {
	return &dispatcher{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (d *dispatcher) push(fn func(modes.Mode), mode modes.Mode) {
	d.add(callback{fn: fn, mode: mode})
}

// pushDone queues the end of lk's asynchronous operation.
func (d *dispatcher) pushDone(lk *Lock) { d.add(callback{done: lk}) }

func (d *dispatcher) add(cb callback) {
	d.mu.Lock()
	d.queue = append(d.queue, cb)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// run delivers callbacks until stop is closed; then it delivers what is
// queued and returns.
func (d *dispatcher) run(stop <-chan struct{}) {
	defer close(d.done)
	var batch []callback
	for {
		d.mu.Lock()
		batch, d.queue = d.queue, batch[:0]
		d.mu.Unlock()
		for i, cb := range batch {
			cb.call()
			batch[i] = callback{}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-d.wake:
		case <-stop:
			d.mu.Lock()
			rest := d.queue
			d.queue = nil
			d.mu.Unlock()
			for _, cb := range rest {
				cb.call()
			}
			return
		}
	}
}

func (cb callback) call() {
	if cb.done != nil {
		cb.done.asyncDone()
		return
	}
	cb.fn(cb.mode)
}
