// Package modes defines the six lock modes of the VMS lock manager, their
// compatibility matrix and the rules for converting a lock from one mode to
// another.
//
// # Modes
//
// In increasing order of restriction:
//
//	NL  Null              grants nothing; holds a place and keeps the resource
//	                      (and its lock value block) alive
//	CR  Concurrent Read   read, letting others read and write
//	CW  Concurrent Write  write, letting others read and write
//	PR  Protected Read    read, letting others only read
//	PW  Protected Write   write, letting others only read concurrently (CR)
//	EX  Exclusive         read and write, letting nobody else in but NL
//
// # Compatibility
//
// Two locks on one resource can be granted at the same time only if their
// modes are compatible. The matrix is symmetric and identical in OpenVMS and
// the Linux DLM:
//
//	held \ requested   NL  CR  CW  PR  PW  EX
//	NL                 Y   Y   Y   Y   Y   Y
//	CR                 Y   Y   Y   Y   Y   N
//	CW                 Y   Y   Y   N   N   N
//	PR                 Y   Y   N   Y   N   N
//	PW                 Y   Y   N   N   N   N
//	EX                 Y   N   N   N   N   N
//
// # Conversions
//
// A mode is stronger than another when every mode compatible with it is also
// compatible with the other (it shuts out a superset). That order is partial:
// PR and CW are incomparable, since PR admits PR and not CW, and CW admits CW
// and not PR. A conversion is therefore one of:
//
//   - down: to a weaker mode (EX to PR, PW to CR, anything to NL). It never
//     needs to wait, because it only removes conflicts.
//   - up: to a stronger mode (NL to anything, PR to EX).
//   - middle: between PR and CW. Like an up-conversion it can conflict with
//     other holders, so the lock manager treats it as one (it may queue, it
//     gets a new fencing token, and QUECVT is valid for it, as in the Linux
//     DLM's quecvt matrix).
//
// The numeric order of the constants (NL=0 ... EX=5) is the order the Linux
// DLM and VMS use on the wire and in dumps; it is a total order that agrees
// with "stronger" everywhere except between CW and PR.
package modes
