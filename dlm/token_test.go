package dlm

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestTokenJSON(t *testing.T) {
	const big = 1<<53 - 1
	b, err := json.Marshal(map[string]Token{"t": big})
	if err != nil || string(b) != `{"t":"9007199254740991"}` {
		t.Fatalf("marshal: %s %v", b, err)
	}
	for _, in := range []string{`"9007199254740991"`, `9007199254740991`} {
		var tok Token
		if err := json.Unmarshal([]byte(in), &tok); err != nil || tok != big {
			t.Errorf("unmarshal %s: %d %v", in, tok, err)
		}
	}
	for _, in := range []string{`"x"`, `-1`, `1.5`, `""`, `"18446744073709551616"`, `true`} {
		var tok Token
		if err := json.Unmarshal([]byte(in), &tok); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("unmarshal %s: %v, want ErrInvalidArgument", in, err)
		}
	}
	var tok Token
	text, _ := Token(42).MarshalText()
	if err := tok.UnmarshalText(text); err != nil || tok != 42 || Token(42).String() != "42" {
		t.Fatalf("text round trip: %q %d %v", text, tok, err)
	}
}
