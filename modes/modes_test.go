package modes

import (
	"errors"
	"strings"
	"testing"
)

// anchorsMatrix is the compatibility table of ../shared/reference/anchors.md §1,
// copied as text so the test reads like the source it checks.
const anchorsMatrix = `
| held \ requested | NL | CR | CW | PR | PW | EX |
| NL | Y | Y | Y | Y | Y | Y |
| CR | Y | Y | Y | Y | Y | N |
| CW | Y | Y | Y | N | N | N |
| PR | Y | Y | N | Y | N | N |
| PW | Y | Y | N | N | N | N |
| EX | Y | N | N | N | N | N |
`

func TestCompatibilityMatrix(t *testing.T) {
	rows := strings.Split(strings.TrimSpace(anchorsMatrix), "\n")[1:]
	if len(rows) != Count {
		t.Fatalf("table has %d rows", len(rows))
	}
	pairs := 0
	for _, row := range rows {
		cells := strings.Split(strings.Trim(row, "| "), "|")
		held, err := Parse(cells[0])
		if err != nil {
			t.Fatal(err)
		}
		for j, want := range cells[1:] {
			req := Mode(j)
			got := Compatible(held, req)
			if got != (strings.TrimSpace(want) == "Y") {
				t.Errorf("Compatible(%v, %v) = %v, anchors.md says %s", held, req, got, want)
			}
			if got != Compatible(req, held) {
				t.Errorf("matrix not symmetric at %v/%v", held, req)
			}
			pairs++
		}
	}
	if pairs != 36 {
		t.Fatalf("checked %d pairs, want 36", pairs)
	}
}

func TestInvalidModes(t *testing.T) {
	bad := Mode(Count)
	if bad.Valid() || Compatible(bad, NL) || Compatible(NL, bad) {
		t.Fatal("invalid mode treated as valid")
	}
	if err := bad.Validate(); !errors.Is(err, ErrInvalidMode) {
		t.Fatalf("Validate = %v", err)
	}
	if _, err := bad.MarshalText(); !errors.Is(err, ErrInvalidMode) {
		t.Fatalf("MarshalText = %v", err)
	}
	if got := bad.String(); got != "Mode(6)" {
		t.Fatalf("String = %q", got)
	}
	for _, s := range []string{"", "XX", "N L", "exclusiv", "6"} {
		if _, err := Parse(s); !errors.Is(err, ErrInvalidMode) {
			t.Errorf("Parse(%q) = %v, want ErrInvalidMode", s, err)
		}
	}
}

func TestParseAndText(t *testing.T) {
	cases := map[string]Mode{
		"NL": NL, "cr": CR, "Cw": CW, "PR": PR, "pw": PW, "EX": EX,
		"null": NL, "concurrent-read": CR, "concurrent_write": CW,
		"Protected Read": PR, "protected-write": PW, " exclusive ": EX,
	}
	for s, want := range cases {
		got, err := Parse(s)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, m := range All() {
		b, err := m.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Mode
		if err := back.UnmarshalText(b); err != nil || back != m {
			t.Errorf("text round trip of %v gave %v, %v", m, back, err)
		}
		if p, _ := Parse(m.Long()); p != m {
			t.Errorf("Parse(Long(%v)) = %v", m, p)
		}
	}
	var m Mode
	if err := m.UnmarshalText([]byte("ZZ")); !errors.Is(err, ErrInvalidMode) || m != NL {
		t.Fatalf("UnmarshalText of junk = %v, left %v", err, m)
	}
}

func TestConversionKinds(t *testing.T) {
	// Expected kind of every conversion from -> to: d = down, u = up,
	// m = middle (PR<->CW, treated as up), . = same mode.
	want := map[Mode]string{
		//    NL CR CW PR PW EX
		NL: ". u u u u u",
		CR: "d . u u u u",
		CW: "d d . m u u",
		PR: "d d m . u u",
		PW: "d d d d . u",
		EX: "d d d d d .",
	}
	for from, row := range want {
		for i, k := range strings.Fields(row) {
			to := Mode(i)
			up, down, mid := IsUp(from, to), IsDown(from, to), IsMiddle(from, to)
			var got string
			switch {
			case from == to:
				got = "."
			case mid:
				got = "m"
			case down:
				got = "d"
			case up:
				got = "u"
			}
			if got != k {
				t.Errorf("%v->%v: got %s want %s", from, to, got, k)
			}
			if mid && !up {
				t.Errorf("%v->%v: middle conversions must count as up", from, to)
			}
			if up && down {
				t.Errorf("%v->%v is both up and down", from, to)
			}
		}
	}
	// A down-conversion must never add a conflict: everything compatible
	// with the old mode stays compatible with the new one.
	for _, from := range All() {
		for _, to := range All() {
			if !IsDown(from, to) {
				continue
			}
			for _, other := range All() {
				if Compatible(from, other) && !Compatible(to, other) {
					t.Errorf("down %v->%v adds a conflict with %v", from, to, other)
				}
			}
		}
	}
	if Max(PR, CW) != PR || Max(NL, EX) != EX {
		t.Fatal("Max")
	}
}
