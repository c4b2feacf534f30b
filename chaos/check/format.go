package check

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// fmtTime formats an offset from the start of the history.
func fmtTime(d time.Duration) string {
	if d == Infinity {
		return "∞"
	}
	return d.String()
}

// describe names a record briefly, for messages: `acquire #12 (client 3 on
// n1, "r", EX)`.
func (r *Record) describe() string {
	switch r.Kind {
	case Acquire, Convert:
		if r.Limit > 0 {
			return fmt.Sprintf("%s #%d (client %d on %s, %q, %d of %d permits)", r.Kind, r.Seq, r.Client, r.Node, r.Resource, r.Permits, r.Limit)
		}
		return fmt.Sprintf("%s #%d (client %d on %s, %q, %v)", r.Kind, r.Seq, r.Client, r.Node, r.Resource, r.Mode)
	case Write:
		return fmt.Sprintf("write #%d (client %d on %s, key %q, token %d, value %d)", r.Seq, r.Client, r.Node, r.Resource, r.Token, r.Value)
	case Crash:
		if r.Err == frozen {
			return fmt.Sprintf("freeze #%d of %s", r.Seq, r.Node)
		}
		return fmt.Sprintf("crash #%d of %s", r.Seq, r.Node)
	case Note:
		return fmt.Sprintf("note #%d [%s] %s", r.Seq, r.Node, r.Err)
	default:
		return fmt.Sprintf("%s #%d (client %d on %s, %q)", r.Kind, r.Seq, r.Client, r.Node, r.Resource)
	}
}

// result describes how a record ended: "granted EX token 7".
func (r *Record) result() string {
	var s string
	switch {
	case r.Kind == Note || r.Kind == Crash || r.Kind == Lost:
		return ""
	case r.Outcome == OK && r.Shared:
		s = fmt.Sprintf("granted a share of %v token %d", r.Granted, r.Token)
	case r.Outcome == OK && (r.Kind == Acquire || r.Kind == Convert):
		s = fmt.Sprintf("granted %v token %d", r.Granted, r.Token)
	case r.Outcome == OK && r.Kind == Release:
		s = "released"
	case r.Outcome == OK && r.Kind == Write:
		s = "accepted"
	case r.Outcome == OK && r.Kind == Read:
		s = fmt.Sprintf("read %d", r.Value)
	default:
		s = r.Outcome.String()
	}
	if r.Err != "" {
		s += " (" + r.Err + ")"
	}
	return s
}

// summary says what the record did and when, for messages: `acquire #1
// (client 2 on n2, "r", EX) called at 1s, returned at 1s: granted EX token 5`.
func (r *Record) summary() string {
	s := fmt.Sprintf("%s called at %s, returned at %s", r.describe(), fmtTime(r.Call), fmtTime(r.Return))
	if r.Call == r.Return {
		s = fmt.Sprintf("%s at %s", r.describe(), fmtTime(r.Call))
	}
	if res := r.result(); res != "" {
		s += ": " + res
	}
	return s
}

// String formats the record on one line, as in a history dump.
func (r Record) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%-4d %10s", r.Seq, fmtTime(r.Call))
	if r.Return != r.Call {
		fmt.Fprintf(&b, " .. %-10s", fmtTime(r.Return))
	} else {
		fmt.Fprintf(&b, "    %-10s", "")
	}
	switch r.Kind {
	case Crash:
		if r.Err == frozen {
			fmt.Fprintf(&b, " FREEZE %s", r.Node)
			return b.String()
		}
		fmt.Fprintf(&b, " CRASH %s", r.Node)
		return b.String()
	case Note:
		fmt.Fprintf(&b, " [%s] %s", r.Node, r.Err)
		return b.String()
	}
	fmt.Fprintf(&b, " client %d@%s %s %q", r.Client, r.Node, r.Kind, r.Resource)
	switch r.Kind {
	case Acquire:
		if r.Limit > 0 {
			fmt.Fprintf(&b, " %d of %d permits", r.Permits, r.Limit)
		} else {
			fmt.Fprintf(&b, " %v", r.Mode)
		}
	case Convert:
		if r.Held {
			fmt.Fprintf(&b, " %v->%v", r.From, r.Mode)
		} else {
			fmt.Fprintf(&b, " ->%v (not held)", r.Mode)
		}
	case Release:
		if !r.Held {
			b.WriteString(" (not held)")
		}
	case Lost:
		if r.Err != "" {
			fmt.Fprintf(&b, " (%s)", r.Err)
		}
		if !r.Held {
			b.WriteString(" (not held)")
		}
	case Write:
		fmt.Fprintf(&b, " token %d value %d", r.Token, r.Value)
	}
	if res := r.result(); res != "" {
		b.WriteString(" -> " + res)
	}
	return b.String()
}

// String formats the interval: `client 1 on n1 held EX token 7 from 1s to
// 3s (acquire #4 .. release #9)`.
func (iv Interval) String() string {
	fin := "still held at the end"
	if iv.Finish >= 0 {
		fin = fmt.Sprintf("%s #%d", iv.Why, iv.Finish)
	}
	held := iv.Mode.String()
	if iv.Limit > 0 {
		held = fmt.Sprintf("%d of %d permits", iv.Permits, iv.Limit)
	}
	return fmt.Sprintf("client %d on %s held %s token %d from %s to %s (%s #%d .. %s)",
		iv.Client, iv.Node, held, iv.Token, fmtTime(iv.Start), fmtTime(iv.End), iv.beginKind, iv.Begin, fin)
}

// WriteTo writes the history, one record a line, in call order.
func (h *History) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, r := range h.Records() {
		k, err := fmt.Fprintln(w, r.String())
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
