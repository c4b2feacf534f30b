// Package clientport serves an agent's client port: programs that run no
// node take locks through it, over the client protocol (package wire's
// client messages, docs/protocol.md byte by byte; package client is the Go
// side).
//
// Each connection carries one session (a dlm.Session of the agent's node):
// the client's locks are the node's locks in that session, so they live on
// the agent the client is connected to, and end with it. A session
// outlives its connection by up to its TTL: a client that reconnects in
// time (ClientHello with the session's id and key) resumes it with its
// locks. A client of protocol 2 (the Go client) names in its hello the last
// reply it read and the requests it still waits for, and receives again
// what the dead connection swallowed: the session keeps a small note of
// each frame sent until the client acknowledges it (ClientAck), and
// rebuilds a grant from its lock's state. Lost-lock pushes wait while
// those notes take half of Config.MaxOutbox, and go out as the client
// acknowledges. A protocol 1 client receives what was sent while it was
// away.
//
// An idle connection costs the agent its books, not a goroutine: on Linux
// a plain (not TLS) connection whose reader has been blocked between
// frames for Config.ParkAfter, or that has nothing more to read after its
// Welcome, is parked: one goroutine per server watches every parked
// socket with epoll and starts a reader again when one has something to
// read or was hung up. Writes to a parked connection (grants, blocking
// notifications, lost locks) go out as to any other; its session's TTL
// and keep-alives are the session's, not the reader's. A TLS connection
// keeps its reader (crypto/tls may hold bytes its socket no longer
// shows), as does every connection on other systems.
// dlm_client_connections_parked counts the parked ones.
//
// Every limit is enforced before the work it bounds, refused with a clear
// error and counted in dlm_client_refused_total{reason}:
//
//	connections   Config.MaxConnections per agent: the connection is told
//	              (a one-way ClientError) and closed
//	locks         Config.MaxLocks held or waited for per session
//	pending       Config.MaxPending unanswered requests per session
//	frame         Config.MaxFrame per frame: refused before it is read
//	handshake     no ClientHello within Config.HelloTimeout (slowloris),
//	              or, with TLS, a handshake that failed: no certificate,
//	              another CA's, an expired one
//	certificate   with TLS, a certificate of the CA that is not a client
//	              certificate of the agent's cluster (a node's, say)
//	unauthorized  a ClientHello without the token, or a resume with a wrong key
//	protocol      a frame that does not decode, or breaks the protocol
//	slow_client   more than Config.MaxOutbox bytes waiting for a client
//	              that does not read
//	unacknowledged  a protocol 2 session whose client did not acknowledge
//	              what it read before the agent kept Config.MaxOutbox of
//	              notes for it: the session ends
//	unknown_request  a resume named a request the agent has no answer of
//	              (answered with CodeUnknownRequest)
//
// A refused frame ends its connection (the frames after it cannot be
// trusted to be in step); a refused request ends only itself.
package clientport
