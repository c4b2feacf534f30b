package report

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/seed-a6839e30/dlm/bench/workload"
)

// Chart geometry, in SVG user units.
const (
	chartW    = 960
	chartH    = 440
	marginL   = 70
	marginR   = 160 // legend
	marginT   = 50
	marginB   = 60
	groupGap  = 0.25 // share of a group's width left empty
	fontStyle = `font-family="DejaVu Sans, Helvetica, Arial, sans-serif"`
)

// SVG writes a grouped bar chart of cycles/s: one group per workload, one
// bar per system, on a log axis.
func SVG(w io.Writer, r *Report) error {
	kinds, systems := axes(r)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" %s font-size="12">`+"\n",
		chartW, chartH, chartW, chartH, fontStyle)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold">Lock+unlock cycles per second (log scale, higher is better)</text>`+"\n", marginL)
	fmt.Fprintf(&b, `<text x="%d" y="40" fill="#555">%s clients, %s per run; %s</text>`+"\n",
		marginL, esc(r.Flags["clients"]), esc(r.Flags["duration"]), esc(r.Machine.String()))
	if len(kinds) == 0 || len(systems) == 0 {
		b.WriteString(`<text x="480" y="220" text-anchor="middle">no results</text>` + "\n</svg>\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	lo, hi := decades(r.Results)
	y := func(v float64) float64 {
		v = math.Max(v, math.Pow(10, lo))
		f := (math.Log10(v) - lo) / (hi - lo)
		return float64(chartH-marginB) - f*float64(chartH-marginT-marginB)
	}
	drawGrid(&b, lo, hi, y)
	drawBars(&b, r, kinds, systems, y)
	drawLegend(&b, systems)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// axes lists the workloads and systems in the order they first appear.
func axes(r *Report) ([]workload.Kind, []string) {
	var kinds []workload.Kind
	var systems []string
	seenK, seenS := map[workload.Kind]bool{}, map[string]bool{}
	for _, res := range r.Results {
		if !seenK[res.Workload] {
			seenK[res.Workload] = true
			kinds = append(kinds, res.Workload)
		}
		if !seenS[res.System] {
			seenS[res.System] = true
			systems = append(systems, res.System)
		}
	}
	return kinds, systems
}

// decades returns the log10 range covering every positive rate, in whole
// decades, at least one decade wide.
func decades(results []workload.Result) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, res := range results {
		if res.OpsPerSec > 0 {
			l := math.Log10(res.OpsPerSec)
			lo, hi = math.Min(lo, l), math.Max(hi, l)
		}
	}
	if math.IsInf(lo, 1) {
		return 0, 1
	}
	lo, hi = math.Floor(lo), math.Ceil(hi)
	if hi <= lo {
		hi = lo + 1
	}
	return lo, hi
}

func drawGrid(b *strings.Builder, lo, hi float64, y func(float64) float64) {
	for d := lo; d <= hi; d++ {
		v := math.Pow(10, d)
		yy := y(v)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#dddddd"/>`+"\n", marginL, yy, chartW-marginR, yy)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", marginL-6, yy+4, fmtShort(v))
	}
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333333"/>`+"\n", marginL, chartH-marginB, chartW-marginR, chartH-marginB)
}

func drawBars(b *strings.Builder, r *Report, kinds []workload.Kind, systems []string, y func(float64) float64) {
	groupW := float64(chartW-marginL-marginR) / float64(len(kinds))
	barW := groupW * (1 - groupGap) / float64(len(systems))
	base := float64(chartH - marginB)
	for gi, k := range kinds {
		x0 := float64(marginL) + float64(gi)*groupW + groupW*groupGap/2
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" font-size="13">%s</text>`+"\n",
			float64(marginL)+(float64(gi)+0.5)*groupW, chartH-marginB+20, esc(string(k)))
		for si, s := range systems {
			res, ok := find(r.Results, k, s)
			if !ok {
				continue
			}
			x := x0 + float64(si)*barW
			top := y(res.OpsPerSec)
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s cycles/s</title></rect>`+"\n",
				x+1, top, barW-2, base-top, colour(si), esc(s), esc(string(k)), fmtOps(res.OpsPerSec))
			label := fmtShort(res.OpsPerSec)
			if res.SharedAsExclusive {
				label += "*"
			}
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%s</text>`+"\n",
				x+barW/2, top-3, label)
		}
	}
	if slices.ContainsFunc(r.Results, func(res workload.Result) bool { return res.SharedAsExclusive }) {
		fmt.Fprintf(b, `<text x="%d" y="%d" fill="#555">* no shared mode: shared requests were served as exclusive</text>`+"\n",
			marginL, chartH-12)
	}
}

func drawLegend(b *strings.Builder, systems []string) {
	x := chartW - marginR + 20
	for i, s := range systems {
		yy := marginT + 10 + i*22
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="14" height="14" fill="%s"/>`+"\n", x, yy, colour(i))
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", x+20, yy+11, esc(s))
	}
}

func find(results []workload.Result, k workload.Kind, s string) (workload.Result, bool) {
	for _, r := range results {
		if r.Workload == k && r.System == s {
			return r, true
		}
	}
	return workload.Result{}, false
}

// colour picks the i-th system's colour, in run order (dlm, first by
// default, gets the blue). The palette stays distinguishable in grey.
func colour(i int) string {
	palette := [...]string{"#1b6ca8", "#d1495b", "#edae49", "#00798c", "#66a182", "#8d6a9f", "#4d4d4d"}
	return palette[i%len(palette)]
}

func esc(s string) string { return html.EscapeString(s) }
