// Package servers runs the peer lock services as child processes for the
// comparison harness: it picks free loopback ports, starts a binary in its own
// process group with its output in a log file, polls a readiness probe under
// a deadline, and stops the whole group (SIGTERM, then SIGKILL).
//
// Why process groups: etcd and the JVM start helper threads and, in the JVM's
// case, may fork; signalling the group is the only way to be sure nothing
// outlives the harness. On Linux each child also gets PR_SET_PDEATHSIG, so a
// harness killed with SIGKILL (which runs no deferred teardown) still takes
// its servers with it. SysProcAttr and SignalGroup are exported so that other
// harness commands (bench/micro, which runs go test and its test binary) put
// their children in a group the same way.
//
// Ports are chosen by binding 127.0.0.1:0 and closing the listener. Another
// process could take the port in between; the readiness probe then fails and
// Start reports the server's log, which is rare enough not to warrant retries.
package servers
