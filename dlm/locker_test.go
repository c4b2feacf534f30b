package dlm

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/internal/forever"
	"github.com/seed-a6839e30/dlm/lockapi"
)

func TestMutex(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		res := c.resourceOn(2, "mutex")
		a, b := c.ls[0].Mutex(res), c.ls[1].Mutex(res)
		var l sync.Locker = a
		l.Lock()
		if a.Token() == 0 {
			t.Fatal("no token while locked")
		}
		if b.TryLock() {
			t.Fatal("TryLock of a locked Mutex")
		}
		ctx, cancel := context.WithTimeout(bg, time.Second)
		if err := b.LockContext(ctx); !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("LockContext on a locked Mutex: %v", err)
		}
		cancel()
		done := make(chan error, 1)
		go func() { done <- b.LockContext(bg) }()
		tok := a.Token()
		l.Unlock()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if b.Token() <= tok || a.Token() != 0 {
			t.Fatalf("tokens: %d after %d, released Mutex says %d", b.Token(), tok, a.Token())
		}
		b.Unlock()
		defer func() {
			if recover() == nil {
				t.Fatal("Unlock of an unlocked Mutex did not panic")
			}
		}()
		b.Unlock()
	})
}

// TestMutexClosedNode: on a closed node LockContext returns ErrClosed; Lock,
// which cannot return it, neither panics nor returns without the lock: it
// waits (here until the test lets it go). Unlock of a Mutex locked before
// the close does not panic either.
func TestMutexClosedNode(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c := startMem(t, 3, nil)
		defer c.close()
		held := c.ls[0].Mutex("closing")
		held.Lock()
		rw := c.ls[0].RWMutex("closing-rw")
		rw.RLock()
		m := c.ls[0].Mutex("closed")
		if err := c.nodes[0].Close(); err != nil {
			t.Fatal(err)
		}
		if err := m.LockContext(bg); !errors.Is(err, ErrClosed) {
			t.Fatalf("LockContext on a closed node: %v", err)
		}
		never := make(chan struct{})
		returned := make(chan bool, 1)
		go func() {
			returned <- forever.Lock(func(ctx context.Context) error { return m.LockContext(ctx) }, lockapi.Incurable, nil, never)
		}()
		time.Sleep(10 * time.Second)
		select {
		case got := <-returned:
			t.Fatalf("Lock on a closed node returned (took the lock: %v)", got)
		default:
		}
		close(never)
		if <-returned {
			t.Fatal("Lock on a closed node took the lock")
		}
		held.Unlock() // lost with the node: no panic
		rw.RUnlock()
		if m.TryLock() {
			t.Fatal("TryLock on a closed node")
		}
		c.nodes[0] = nil
	})
}
