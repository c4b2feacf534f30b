// Command micro runs the lower layers' Go microbenchmarks and prints one
// summary of them: for each benchmark and unit the median and range of the
// runs, the target the design set, and whether the median meets it.
//
//	go run ./micro [flags]   # in bench/, a Go module of its own
//
// The benchmarks stay in their packages (./master/, ./transport/,
// ./transport/wire/, ./dlm/), where go test -bench still runs them one by
// one; this command runs
//
//	go test -run '^$' -bench <pattern> -benchtime X -count N -benchmem ./<pkg>/
//
// once per package, parses the standard benchmark format with
// golang.org/x/perf/benchfmt, and matches the results against its catalogue
// of benchmarks and targets. A benchmark of the catalogue that does not
// appear in the output (it failed, or was renamed) is reported missing
// rather than dropped, and makes the exit status 1.
//
// Why ratios come from one run: two of the targets are relative to a plain
// Go TCP ping-pong over loopback (BenchmarkLinkRoundTrip ≤ 1.3 × it in
// ./transport/, BenchmarkRemoteLockUnlock ≤ 2 × it in ./dlm/). On a small
// shared machine the ping-pong itself moves by tens of percent with the load
// from one minute to the next, so dividing by a figure from another run, or
// from a document, measures the load as much as the code. Each ratio
// therefore divides figures of the same go test invocation: run i of the
// numerator by run i of the floor, summarised as the median and range of
// those per-run ratios (or the ratio of the medians, when a failed run left
// the counts unequal). A selected benchmark that is one side of a ratio
// always brings the other side into the run.
//
// BenchmarkRecovery (sub-benchmarks locks=10000, 100000 and 1000000) and
// BenchmarkFailoverTCP take tens of seconds each and run only with --slow,
// in a go test of their own with --slow-benchtime (default 1x: a fixed
// number of iterations, since each one takes seconds).
//
// While it runs, a progress line on stderr shows the command and benchmark
// (rewritten in place on a terminal, one line per finished run otherwise).
// At the end it prints an aligned table (to stdout, or to stderr with --json,
// which prints one JSON object to stdout) and, with --out, writes the same
// as a markdown page headed by the exact go test commands, the go version,
// GOOS/GOARCH, the CPU count and the load average at start and end.
//
// Ctrl-C (or SIGTERM) stops the go test that is running, with its test
// binary, and prints the summary of what had finished.
package main
