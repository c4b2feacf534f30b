package wire

import (
	"bytes"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// TestProtocolDocExamples decodes every example frame of docs/protocol.md
// with the client port's decoder and encodes it again to the same bytes:
// the page a client is written from says what the code does, byte by
// byte. A block whose last frame is cut short ("...") is checked up to
// there.
func TestProtocolDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := strings.Split(string(doc), "```")
	frames := 0
	for i := 1; i < len(sections); i += 2 {
		block := strings.TrimSpace(sections[i])
		if !strings.HasPrefix(block, "00 ") {
			continue
		}
		cut := strings.Contains(block, "...")
		raw, err := hex.DecodeString(strings.Join(strings.Fields(strings.ReplaceAll(block, "...", "")), ""))
		if err != nil {
			t.Fatalf("example %q: %v", block, err)
		}
		for len(raw) > 0 {
			if len(raw) < 4 {
				t.Fatalf("example %q: %d stray bytes", block, len(raw))
			}
			n := 4 + (int(raw[0])<<24 | int(raw[1])<<16 | int(raw[2])<<8 | int(raw[3]))
			if n > len(raw) {
				if !cut {
					t.Fatalf("example %q: a frame of %d bytes, %d given", block, n, len(raw))
				}
				break
			}
			h, m, err := NewClientDecoder(DefaultLimits()).Decode(raw[4:n])
			if err != nil {
				t.Fatalf("example frame % x: %v", raw[:n], err)
			}
			again, err := AppendFrame(nil, h, m, new(DefaultLimits()))
			if err != nil || !bytes.Equal(again, raw[:n]) {
				t.Fatalf("example frame % x encodes again as % x (%v)", raw[:n], again, err)
			}
			frames++
			raw = raw[n:]
		}
	}
	if frames < 10 {
		t.Fatalf("only %d example frames found in docs/protocol.md", frames)
	}
}
