package report

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-a6839e30/dlm/chaos/check"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/nemesis"
	"github.com/seed-a6839e30/dlm/chaos/run/internal/verdict"
)

func sample() Run {
	return Run{Command: "go -C chaos/run run . -seed 3", Seed: 3, Nodes: 5, Duration: 20 * time.Second,
		Events: []nemesis.Event{
			{Kind: nemesis.KillHolder, Text: "kill-holder n2 (reg/0)", At: 2 * time.Second, Healed: 3 * time.Second},
			{Kind: nemesis.PartRing, Text: "majorities ring <&>", At: 8 * time.Second, Healed: 14 * time.Second},
		},
		Majority: []check.Window{{From: 0, To: 8 * time.Second}, {From: 14 * time.Second, To: 20 * time.Second}},
		Grants:   []time.Duration{time.Second, 1500 * time.Millisecond, 5 * time.Second},
		Verdict: verdict.Verdict{OK: false, Violations: []string{"[overlap] two holders"},
			Recoveries: []check.GrantAfter{{Fault: check.Fault{At: 2 * time.Second, Kind: "kill-holder"}, Took: 2100 * time.Millisecond, Grant: 7}},
			ByKind:     map[string]verdict.RecoveryStats{"kill-holder": {Count: 1, Median: 2100 * time.Millisecond, P99: 2100 * time.Millisecond, Max: 2100 * time.Millisecond}}},
	}
}

func TestWriteAllThree(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, sample()); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, want := range []string{"# Chaos run: FAIL", "violation: [overlap] two holders", "| kill-holder | 1 | 2100 ms | 2100 ms |", "![timeline](timeline.svg)", "majorities ring"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	svg, _ := os.ReadFile(filepath.Join(dir, "timeline.svg"))
	d := xml.NewDecoder(strings.NewReader(string(svg)))
	rects := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("timeline.svg is not well-formed: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			rects++
		}
	}
	if rects != 1+2+2 { // background, two majority windows, two faults
		t.Errorf("%d rects in the timeline", rects)
	}
	var back Run
	b, _ := os.ReadFile(filepath.Join(dir, "result.json"))
	if err := json.Unmarshal(b, &back); err != nil || back.Seed != 3 || len(back.Events) != 2 || back.Verdict.OK {
		t.Fatalf("result.json: %v %+v", err, back)
	}
}
