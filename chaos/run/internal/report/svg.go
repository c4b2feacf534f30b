package report

import (
	"fmt"
	"html"
	"strings"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/run/internal/nemesis"
)

// SVG draws the run on one time axis: a band per fault (coloured by kind,
// process faults above, network ones below), the grants per second as a
// line, the windows in which a majority was up and connected as a green
// strip, and a tick where each fault's next grant came.
func SVG(r Run) string {
	const w, h, left, right = 1200, 360, 60, 20
	end := r.Duration
	for _, e := range r.Events {
		end = max(end, e.Healed)
	}
	if end <= 0 {
		end = time.Second
	}
	x := func(t time.Duration) float64 { return left + float64(t)/float64(end)*(w-left-right) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="16" font-size="13">seed %d: faults, grants per second, recoveries</text>`+"\n", left, r.Seed)
	// Majority strip.
	for _, win := range r.Majority {
		fmt.Fprintf(&b, `<rect x="%.1f" y="28" width="%.1f" height="8" fill="#7fc97f"><title>majority up and connected</title></rect>`+"\n",
			x(win.From), max(0.5, x(win.To)-x(win.From)))
	}
	fmt.Fprintf(&b, `<text x="4" y="36">quorum</text>`+"\n")
	// Fault bands.
	colors := map[nemesis.Kind]string{}
	palette := []string{"#e41a1c", "#377eb8", "#984ea3", "#ff7f00", "#a65628", "#f781bf", "#4daf4a", "#999999", "#66c2a5", "#fc8d62", "#8da0cb", "#e78ac3"}
	for i, k := range nemesis.All() {
		colors[k] = palette[i%len(palette)]
	}
	for _, e := range r.Events {
		if e.At == 0 && e.Healed == 0 {
			continue
		}
		y := 44
		if e.Kind.Network() {
			y = 74
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="24" fill="%s" opacity="0.75"><title>%s</title></rect>`+"\n",
			x(e.At), y, max(1.5, x(e.Healed)-x(e.At)), colors[e.Kind], html.EscapeString(fmt.Sprintf("%.1fs %s: %s", e.At.Seconds(), e.Kind, e.Text)))
	}
	fmt.Fprintf(&b, `<text x="4" y="60">process</text><text x="4" y="90">network</text>`+"\n")
	// Recoveries: a tick at each fault's next grant.
	for _, g := range r.Verdict.Recoveries {
		if g.Took < 0 || g.Grant < 0 {
			continue
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="102" y2="114" stroke="black"><title>%s: next grant after %v</title></line>`+"\n",
			x(g.At+g.Took), x(g.At+g.Took), html.EscapeString(g.Kind), g.Took.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, `<text x="4" y="112">recovered</text>`+"\n")
	// Grants per second.
	secs := int(end/time.Second) + 1
	counts := make([]int, secs)
	peak := 1
	for _, t := range r.Grants {
		if i := int(t / time.Second); i >= 0 && i < secs {
			counts[i]++
			peak = max(peak, counts[i])
		}
	}
	const top, bottom = 130, h - 30
	y := func(c int) float64 { return bottom - float64(c)/float64(peak)*(bottom-top) }
	var pts []string
	for i, c := range counts {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(time.Duration(i)*time.Second+time.Second/2), y(c)))
	}
	fmt.Fprintf(&b, `<polyline fill="none" stroke="#333" stroke-width="1.2" points="%s"/>`+"\n", strings.Join(pts, " "))
	fmt.Fprintf(&b, `<text x="4" y="%d">%d/s</text><text x="4" y="%d">0</text>`+"\n", top+4, peak, bottom)
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#999"/>`+"\n", left, w-right, bottom, bottom)
	step := max(1, secs/12)
	for s := 0; s < secs; s += step {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%ds</text>`+"\n", x(time.Duration(s)*time.Second), bottom+16, s)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
