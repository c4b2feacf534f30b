// Package client takes dlm locks without running a node: it connects to an
// agent's client port (dlmnode agent --client-addr) and holds its locks
// there, in one session per connection.
//
//	c, err := client.Dial(ctx, "10.0.0.1:7946", "10.0.0.2:7946")
//	defer c.Close()                      // releases the session's locks
//	ls := c.Lockspace("app")
//	lk, err := ls.Lock(ctx, "orders/42", modes.EX)
//	store.Write(lk.Token(), data)        // the store refuses older tokens
//	err = lk.Unlock()
//
// A Lockspace satisfies lockapi.Lockspace, as an embedded dlm.Lockspace
// does: code written against the interface switches between connecting and
// embedding by the line that opens the lockspace. Options and errors are
// lockapi's (Try, OnBlocking, WithTTL, WithOwner, ...; ErrNotQueued,
// ErrLockLost, ...). Mutex, RWMutex, LockAll and Election work over it as
// over an embedded lockspace (they are lockapi's, one implementation for
// both), on the same locks and in the same elections.
//
// Semaphores (Lockspace.Semaphore, Acquire, TryAcquire, Permit.Release)
// are the cluster's counting semaphores, shared with embedded nodes: FIFO,
// a fencing token per acquisition, permits held in the session and lost
// with it. Lock.Context (and Permit.Context) is a context cancelled the
// moment the lock is lost or unlocked, to run the protected work under.
// Readers share PR locks in two ways: lockapi.Cached asks for a hold on
// the agent's cache (one lock per resource for all the agent's clients, a
// round trip each), and Lockspace.NewCache makes a cache in this process
// (lockapi.Cache: one lock per resource for this client, a hold costs no
// round trip; a writer elsewhere revokes it through its blocking
// notification). Describe asks the resource's master who holds, converts
// and waits. A request made while the agent has no quorum waits for it to
// return, within its context, unless lockapi.FailFast asks to fail at once.
//
// # Trust, sessions and failures
//
// The session is kept alive by the client (a keep-alive every third of the
// shorter of its TTL and the agent's lease). Each answer says how long the
// client may trust its locks from the moment it sent the request: no longer
// than the session lives at the resource masters, nor than the agent holds
// its quorum lease (the cluster re-grants a dead agent's locks only after
// that). The client counts that time on its own clock, shortened by
// Config.ClockDrift as TTL locks are (dlm/ttl.go): when it runs out without
// a newer answer, every lock is lost (Lost closes, Err wraps ErrLockLost),
// before any master could re-grant it. The client gives those locks back
// to the agent Config.LostGrace later (100 ms), not at once: others are
// granted them sooner than the agent's session would end, but not before
// a program watching Lost has had the time to stop. Fencing tokens cover the rest: a
// client paused past that point finds its locks lost when it wakes, and a
// store that checks tokens refuses its late writes.
//
// A connection that drops is resumed with the same agent while the
// client's trust lasts: the session, its locks and its waiting requests
// carry on, and what the agent sent meanwhile arrives, with what the dead
// connection swallowed (a grant, an unlock's answer, a blocking
// notification, a lost lock): the client names what it read and what it
// waits for, and the agent gives it again (client protocol 2). If the agent cannot
// be reached in that time, its locks are lost, and the client opens a new
// session with the next of its addresses for the requests that follow.
package client
