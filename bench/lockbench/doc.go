// Package lockbench defines what the comparison harness needs from a lock
// service, so that every system — Redis, Redlock, etcd, ZooKeeper, and dlm
// itself — is driven by the same workload code.
//
// # Shape
//
// A System owns its servers: Start launches them (on 127.0.0.1, in
// temporary directories) and returns once they serve; Close stops them. A
// System hands out Clients, each standing for one independent application
// process with its own connection(s) and, where the system has them, its own
// session. A Client takes a lock on a named resource in a Mode and returns a
// Held lock, which carries the Fence the system issued (if any) and is
// released with Unlock.
//
//	System ──Start/Close──▶ servers (child processes or in-process nodes)
//	   │
//	   └─NewClient──▶ Client ──Lock(ctx, resource, mode)──▶ Held ──Unlock
//	                                                         └─Fence()
//
// The interfaces are deliberately small: every peer must be able to
// implement them with its standard client library and nothing more, so that
// what is measured is what users of that library get. What a system cannot
// do is declared in its Info (no shared mode, no fencing token, no
// cancellable wait) rather than papered over, and the harness prints it.
//
// # Contracts
//
//   - Lock blocks until the lock is granted, ctx ends, or the system fails.
//     Systems whose client library cannot abandon a wait say so with
//     Info.Cancelable = false; the harness then drains them by releasing
//     every held lock at the end of a run.
//   - A Client is used by one goroutine at a time. Different Clients are used
//     concurrently.
//   - Held.Unlock is called exactly once per successful Lock, possibly after
//     the run's context has ended, so it takes its own context.
//   - Fence.Monotonic is true only if tokens strictly increase across
//     successive exclusive grants of one resource; a storage can then refuse
//     a write whose token is lower than the highest it has seen.
//   - Start returns an error wrapping ErrUnavailable when a server binary is
//     missing; the harness and the tests then skip the system with that
//     error's message.
package lockbench
