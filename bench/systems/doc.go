// Package systems implements lockbench.System for the peers dlm is compared
// with, each with its standard Go client and the locking recipe its users
// reach for:
//
//	redis      one redis-server; SET key value NX PX ttl to lock, a Lua
//	           compare-and-delete to unlock (github.com/redis/go-redis/v9);
//	           on contention the client sleeps a jittered delay and retries
//	redlock    github.com/go-redsync/redsync/v4 over three redis-servers
//	etcd       a three-member etcd cluster; concurrency.Mutex with one session
//	           (lease) per client (go.etcd.io/etcd/client/v3); shared locks
//	           through the experimental recipes.RWMutex
//	zookeeper  one standalone ZooKeeper server (a JVM); go-zookeeper's
//	           zk.Lock, the ephemeral-sequential-node recipe
//
// Every server runs as a child process on 127.0.0.1 with free ports chosen at
// start and data in a temporary directory (package servers), and each client
// has its own connections, as separate application processes would.
//
// # Registering a system
//
// The registry is the method set of the unexported type catalog: each
// system's file adds one method
//
//	func (catalog) Name() Entry { return Entry{Name: "name", Rank: n, New: ...} }
//
// and All finds the methods by reflection. Adding a system is therefore
// adding one file, and there is no package-level registry to mutate. Rank
// orders the default list (dlm first, then the peers from fastest to
// slowest in the usual case).
//
// # Limits stated in Info
//
// What a peer's client cannot do is declared, not emulated: Redis and
// Redlock grants carry a random value, not a fencing token; go-zookeeper's
// lock has no shared mode, no token accessor and ignores contexts; etcd's
// RWMutex recipe ignores contexts. The harness prints these next to the
// figures.
package systems
