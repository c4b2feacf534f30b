package main

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/seed-a6839e30/dlm/bench/statusline"
)

// progress shows on stderr what is running, in bench/compare's manner: on a
// terminal one status line rewritten in place, naming the benchmark that is
// running now; on other outputs (CI logs) one line per finished run, so that
// a log has no carriage returns and stays short.
type progress = statusline.Line

func newProgress(w io.Writer, tty bool) *progress { return statusline.New(w, tty) }

// watcher is the stdout and stderr of one go test: it keeps all the output
// for the parser and for error messages, and reports progress as it comes.
// go test streams benchmark output, and the test binary prints a result's
// name before the run and its figures after it, so an incomplete line that
// starts with "Benchmark" names the benchmark running now.
type watcher struct {
	prefix string // "[2/5] ./transport/"
	count  int    // runs of each benchmark (-count)
	p      *progress

	all  bytes.Buffer
	line []byte         // the incomplete last line
	runs map[string]int // finished runs by printed name
	last string         // the last figure, for the status line
}

func newWatcher(prefix string, count int, p *progress) *watcher {
	return &watcher{prefix: prefix, count: count, p: p, runs: map[string]int{}}
}

// Write is called by one goroutine at a time (os/exec guarantees it when
// Stdout and Stderr are the same writer).
func (w *watcher) Write(b []byte) (int, error) {
	w.all.Write(b)
	n := len(b)
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			w.line = append(w.line, b...)
			break
		}
		w.line = append(w.line, b[:i]...)
		w.lineDone(string(w.line))
		w.line = w.line[:0]
		b = b[i+1:]
	}
	if f := strings.Fields(string(w.line)); len(f) > 0 && strings.HasPrefix(f[0], "Benchmark") {
		s := fmt.Sprintf("%s %s run %d/%d…", w.prefix, f[0], w.runs[f[0]]+1, w.count)
		if w.last != "" {
			s += " (last: " + w.last + ")"
		}
		w.p.Set(s)
	}
	return n, nil
}

// lineDone reports a finished result line, and passes on the lines that say
// why a benchmark stopped.
func (w *watcher) lineDone(line string) {
	f := strings.Fields(line)
	if len(f) >= 4 && strings.HasPrefix(f[0], "Benchmark") {
		if _, err := strconv.Atoi(f[1]); err == nil {
			w.runs[f[0]]++
			w.last = f[0] + " " + f[2] + " " + f[3]
			msg := fmt.Sprintf("%s %s run %d/%d: %s %s", w.prefix, f[0], w.runs[f[0]], w.count, f[2], f[3])
			if w.p.TTY() {
				w.p.Set(msg)
			} else {
				w.p.Println(msg)
			}
			return
		}
	}
	if i := strings.Index(line, "--- FAIL"); i >= 0 {
		w.p.Println(w.prefix + " " + line[i:])
	} else if strings.HasPrefix(line, "panic:") {
		w.p.Println(w.prefix + " " + line)
	}
}

// tail returns the last n lines of the output, for the message of a failed
// command.
func (w *watcher) tail(n int) string {
	lines := strings.Split(strings.TrimRight(w.all.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
