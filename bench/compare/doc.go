// Command compare measures lock services side by side: same machine, same
// run, same workloads, real servers, the same number of clients.
//
//	go run ./compare [flags]   # in bench/, a Go module of its own
//
// For each selected system it starts the servers (loopback ports, temporary
// directories), runs each selected workload for --duration with --clients
// fresh clients, and stops the servers before the next system starts, so
// that no idle server competes for the CPU. A system whose server is not
// installed is skipped with one line saying how to install it
// (bench/install-peers.sh).
//
// While it runs, a progress line on stderr shows the system, workload, phase
// and cycle rate (updated in place on a terminal, one line every few seconds
// otherwise). At the end it prints a table (to stdout, or to stderr with
// --json, which prints one JSON object to stdout), and writes compare.md and
// compare.svg to --out.
//
// Servers are stopped on every exit path: normal end, error, and SIGINT or
// SIGTERM (the first signal stops the run and tears down; a second one kills
// the harness, and the kernel then kills the servers, which were started
// with a parent-death signal).
//
// The workloads and what is measured are described in package workload; the
// systems and their limits in package systems; the System interface a new
// system implements in package lockbench.
package main
