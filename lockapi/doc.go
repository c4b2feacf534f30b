// Package lockapi is the part of a lock manager a program locks with, as one
// small interface that both ways of using dlm satisfy: a lockspace of an
// embedded node (dlm.Lockspace) and one reached through an agent's client
// port (client.Lockspace). A program written against Lockspace switches
// between embedding a node and connecting to one by the line that opens the
// lockspace:
//
//	var ls lockapi.Lockspace = node.Lockspace("app")   // embedded: *dlm.Lockspace
//	var ls lockapi.Lockspace = conn.Lockspace("app")   // connected: *client.Lockspace
//
//	lk, err := ls.Acquire(ctx, "orders/42", modes.EX, lockapi.OnBlocking(fn))
//	store.Write(lk.Token(), data)
//	err = lk.Unlock()
//
// Options (Try, FailFast, OnBlocking, WithTTL, WithOwner, QueueConvert,
// DemoteOnDeadlock, Expedite) and errors (ErrNotQueued, ErrLockLost, ...)
// are shared too: dlm's and client's sentinel errors are these, so
// errors.Is works the same on both. Mutex (a sync.Locker), RWMutex (PR
// readers, an EX writer, Upgrade and Downgrade in place), LockAll (all or
// none, in one canonical order) and Election (leader election on one lock)
// are built on the interface alone, so they work the same embedded or
// connected, and embedded and connected candidates take part in the same
// election. Lock.Context runs work under a context that ends when the lock
// is lost; FailFast makes a request refuse to wait for quorum.
package lockapi
