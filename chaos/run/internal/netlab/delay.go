package netlab

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/florianl/go-nfqueue"
)

// maxDelay bounds a delay: a held packet is kernel memory, and the queue
// holds at most queueLen of them.
const maxDelay = 5 * time.Second

// queueLen is the most packets one delayer holds; past it the kernel lets
// packets through undelayed (fail-open) rather than drop them, so a burst
// makes the delay shorter, never the network lossier.
const queueLen = 16384

// Delayer holds the packets one namespace queues to it (NFQUEUE) and lets
// each one go after the delay, in arrival order.
type Delayer struct {
	nf     *nfqueue.Nfqueue
	delay  atomic.Int64 // nanoseconds
	cancel context.CancelFunc
	log    *slog.Logger

	mu      sync.Mutex
	held    []heldPacket // in arrival order; due times never decrease
	wake    chan struct{}
	closing bool
	done    chan struct{}

	passed, failed atomic.Int64
}

type heldPacket struct {
	id  uint32
	due time.Time
}

// startDelayer binds queue in network namespace ns.
func startDelayer(ns string, queue uint16, d time.Duration, log *slog.Logger) (*Delayer, error) {
	f, err := os.Open("/run/netns/" + ns)
	if err != nil {
		return nil, fmt.Errorf("netlab: delayer: %w", err)
	}
	defer f.Close()
	nf, err := nfqueue.Open(&nfqueue.Config{
		NetNS:        int(f.Fd()),
		NfQueue:      queue,
		MaxQueueLen:  queueLen,
		Copymode:     nfqueue.NfQnlCopyMeta, // the verdict needs only the id
		Flags:        nfqueue.NfQaCfgFlagFailOpen,
		WriteTimeout: time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("netlab: delayer in %s: %w", ns, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	dl := &Delayer{nf: nf, cancel: cancel, log: log, wake: make(chan struct{}, 1), done: make(chan struct{})}
	dl.delay.Store(int64(d))
	err = nf.RegisterWithErrorFunc(ctx, dl.hold, func(err error) int {
		if ctx.Err() != nil {
			return 1
		}
		log.Warn("delayer: receive", "err", err)
		return 0
	})
	if err != nil {
		cancel()
		_ = nf.Close()
		return nil, fmt.Errorf("netlab: delayer in %s: %w", ns, err)
	}
	go dl.release()
	return dl, nil
}

// SetDelay changes the delay of packets queued from now on.
func (dl *Delayer) SetDelay(d time.Duration) { dl.delay.Store(int64(d)) }

// hold is called for each queued packet.
func (dl *Delayer) hold(a nfqueue.Attribute) int {
	if a.PacketID == nil {
		return 0
	}
	due := time.Now().Add(time.Duration(dl.delay.Load()))
	dl.mu.Lock()
	if n := len(dl.held); n > 0 && due.Before(dl.held[n-1].due) {
		due = dl.held[n-1].due // keep the order after a shorter SetDelay
	}
	dl.held = append(dl.held, heldPacket{id: *a.PacketID, due: due})
	first := len(dl.held) == 1
	dl.mu.Unlock()
	if first {
		select {
		case dl.wake <- struct{}{}:
		default:
		}
	}
	return 0
}

// release accepts every held packet when it is due.
func (dl *Delayer) release() {
	defer close(dl.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		dl.mu.Lock()
		var next *heldPacket
		if len(dl.held) > 0 {
			next = &heldPacket{}
			*next = dl.held[0]
		}
		closing := dl.closing
		dl.mu.Unlock()
		if next == nil {
			if closing {
				return
			}
			<-dl.wake
			continue
		}
		if wait := time.Until(next.due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-dl.wake:
				if !timer.Stop() {
					<-timer.C
				}
				continue
			}
		}
		if err := dl.nf.SetVerdict(next.id, nfqueue.NfAccept); err != nil {
			dl.failed.Add(1)
		} else {
			dl.passed.Add(1)
		}
		dl.mu.Lock()
		dl.held = dl.held[1:]
		dl.mu.Unlock()
	}
}

// Passed is how many packets the delayer let go, and how many verdicts
// failed (the kernel then drops the packet).
func (dl *Delayer) Passed() (passed, failed int64) { return dl.passed.Load(), dl.failed.Load() }

// Close lets every held packet go when it is due, then unbinds the queue.
// The rule that queues packets must be gone already, or packets queued
// after Close are dropped.
func (dl *Delayer) Close() error {
	dl.mu.Lock()
	dl.closing = true
	dl.mu.Unlock()
	select {
	case dl.wake <- struct{}{}:
	default:
	}
	select {
	case <-dl.done:
	case <-time.After(maxDelay + 2*time.Second):
		dl.log.Warn("delayer: packets still held at close")
	}
	dl.cancel()
	return dl.nf.Close()
}
