// Package statusline keeps one status line at the bottom of a terminal, for
// the bench commands' progress: Set rewrites it in place, Println prints a
// message above it, Done ends it. On an output that is not a terminal (a
// CI log) there is no status line: Set prints nothing, so that logs carry
// no carriage returns, and Println prints plainly.
//
// A Line is safe for concurrent use.
package statusline

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"
)

// Line is the status line of one output.
type Line struct {
	w   io.Writer
	tty bool

	mu    sync.Mutex
	width int // in runes, of the line on screen, to blank it
}

// New returns the status line of w; tty says whether w is a terminal.
func New(w io.Writer, tty bool) *Line { return &Line{w: w, tty: tty} }

// TTY reports whether the output is a terminal, that is, has a status line.
func (l *Line) TTY() bool { return l.tty }

// Set replaces the status line with line; nothing on other outputs.
func (l *Line) Set(line string) {
	if !l.tty {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := utf8.RuneCountInString(line)
	fmt.Fprintf(l.w, "\r%s%s", line, strings.Repeat(" ", max(0, l.width-n)))
	l.width = n
}

// Println prints msg on a line of its own, blanking the status line first;
// the next Set draws the status line again below it.
func (l *Line) Println(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tty && l.width > 0 {
		fmt.Fprintf(l.w, "\r%s\r", strings.Repeat(" ", l.width))
		l.width = 0
	}
	fmt.Fprintln(l.w, msg)
}

// Done ends the status line, leaving its last text on screen.
func (l *Line) Done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tty && l.width > 0 {
		fmt.Fprintln(l.w)
		l.width = 0
	}
}
