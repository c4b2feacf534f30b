// Package report turns a comparison run into what people and programs read:
// a plain-text table for the terminal, one JSON object, a markdown page and a
// hand-written SVG bar chart. Every writer is a pure function of a Report,
// with no clock and no map iteration, so its output is byte-for-byte
// reproducible and tested against golden files (cd bench && go test ./report
// -update rewrites them).
//
// Ratios compare a reference system (dlm, when it ran) with each peer, per
// workload: throughput as reference ÷ peer and acquire p99 as peer ÷
// reference, so that in both columns a number above 1 means the reference
// did better.
//
// The chart draws one group of bars per workload and one bar per system, on
// a logarithmic axis: the peers span three orders of magnitude, and a linear
// axis would flatten the slow ones to nothing.
package report
