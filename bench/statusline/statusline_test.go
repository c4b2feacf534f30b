package statusline

import (
	"bytes"
	"testing"
)

func TestTerminal(t *testing.T) {
	var out bytes.Buffer
	l := New(&out, true)
	l.Set("running ünit 1")
	l.Set("run 2")
	l.Println("finished 1")
	l.Set("run 3")
	l.Done()
	l.Done() // a second Done prints nothing
	want := "\rrunning ünit 1" + "\rrun 2" + "         " + "\r" + "     " + "\r" + "finished 1\n" + "\rrun 3" + "\n"
	if got := out.String(); got != want {
		t.Fatalf("terminal output\n got %q\nwant %q", got, want)
	}
}

func TestNotATerminal(t *testing.T) {
	var out bytes.Buffer
	l := New(&out, false)
	l.Set("running 1")
	l.Println("finished 1")
	l.Set("running 2")
	l.Done()
	if got, want := out.String(), "finished 1\n"; got != want {
		t.Fatalf("log output %q, want %q", got, want)
	}
	if l.TTY() {
		t.Fatal("TTY() is true for a log")
	}
}
