package membership_test

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed-a6839e30/dlm/transport/membership"
)

func validMeta() membership.Meta {
	return membership.Meta{Version: 1, BootID: 7, ClusterID: "c", LinkAddr: "127.0.0.1:7947"}
}

// TestMetaRoundTrip: meta with and without tags decodes to what was
// encoded, and a node without tags encodes exactly as before tags existed
// (no trailing section), so older peers still read it.
func TestMetaRoundTrip(t *testing.T) {
	plain := validMeta()
	b := plain.Encode()
	if want := 2 + 8 + 1 + len(plain.ClusterID) + 1 + len(plain.LinkAddr); len(b) != want {
		t.Fatalf("meta without tags is %d bytes, want %d", len(b), want)
	}
	got, err := membership.DecodeMeta(b)
	if err != nil || got.Tags != nil || got.LinkAddr != plain.LinkAddr || got.BootID != plain.BootID {
		t.Fatalf("decode %+v, %v", got, err)
	}
	tagged := validMeta()
	tagged.Tags = map[string]string{"admin": "http://127.0.0.1:7948", "zone": "", "a": "1"}
	got, err = membership.DecodeMeta(tagged.Encode())
	if err != nil || !maps.Equal(got.Tags, tagged.Tags) {
		t.Fatalf("decode %+v, %v", got, err)
	}
	// Map iteration order changes from one range to the next: encodings
	// of the same tags must not.
	first := string(tagged.Encode())
	for range 20 {
		if string(tagged.Encode()) != first {
			t.Fatal("encoding depends on map order")
		}
	}
	full := validMeta()
	full.ClusterID = strings.Repeat("c", 64)
	full.LinkAddr = strings.Repeat("h", 249) + ":65535"
	full.Tags = map[string]string{"admin": strings.Repeat("v", 128), "key": strings.Repeat("v", 20)}
	if err := full.Validate(); err != nil {
		t.Fatal(err)
	}
	if n := len(full.Encode()); n > 512 {
		t.Fatalf("largest meta is %d bytes, over memberlist's 512", n)
	}
	if _, err := membership.DecodeMeta(full.Encode()); err != nil {
		t.Fatal(err)
	}
}

// TestMetaRefusesBadTags: tags past the limits are refused by Validate, and
// encodings that break them by DecodeMeta.
func TestMetaRefusesBadTags(t *testing.T) {
	for name, tags := range map[string]map[string]string{
		"empty key":  {"": "x"},
		"long key":   {strings.Repeat("k", membership.MaxTagKey+1): ""},
		"long value": {"k": strings.Repeat("v", membership.MaxTagValue+1)},
		"too many":   {"a": "", "b": "", "c": "", "d": "", "e": "", "f": "", "g": "", "h": "", "i": ""},
		"too big":    {"a": strings.Repeat("v", 100), "b": strings.Repeat("v", 100)},
	} {
		m := validMeta()
		m.Tags = tags
		if err := m.Validate(); !errors.Is(err, membership.ErrBadMeta) {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
	base := validMeta().Encode()
	for name, tail := range map[string][]byte{
		"zero count":    {0},
		"count only":    {1},
		"truncated key": {1, 5, 'a'},
		"no value":      {1, 1, 'a'},
		"duplicate":     {2, 1, 'a', 0, 1, 'a', 0},
		"trailing":      {1, 1, 'a', 0, 9},
		"empty key":     {1, 0, 0},
	} {
		if _, err := membership.DecodeMeta(append(append([]byte{}, base...), tail...)); !errors.Is(err, membership.ErrBadMeta) {
			t.Errorf("%s: DecodeMeta = %v", name, err)
		}
	}
}

// FuzzDecodeMeta: whatever the bytes, DecodeMeta returns a valid meta
// that encodes back to the same bytes, or an error.
func FuzzDecodeMeta(f *testing.F) {
	m := validMeta()
	f.Add(m.Encode())
	m.Tags = map[string]string{"admin": "http://127.0.0.1:7948"}
	f.Add(m.Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := membership.DecodeMeta(b)
		if err != nil {
			if !errors.Is(err, membership.ErrBadMeta) {
				t.Fatalf("error not ErrBadMeta: %v", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("decoded an invalid meta: %v", err)
		}
		if string(m.Encode()) != string(b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", m.Encode(), b)
		}
	})
}

// TestTagsGossiped: a node's tags reach its peers in their events and in
// Members.
func TestTagsGossiped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		all := names(3)
		c := newClusterWith(t, "tags", func(cfg *membership.Config) {
			cfg.Tags = map[string]string{"admin": "http://" + cfg.Name + ":7948"}
		}, all...)
		defer c.closeAll()
		c.waitUntil(10*time.Second, "convergence", all, c.converged(all))
		for _, name := range all {
			for _, m := range c.nodes[name].m.Members() {
				if got, want := m.Tags["admin"], "http://"+m.Name+":7948"; got != want {
					t.Errorf("%s sees %s's admin tag %q, want %q", name, m.Name, got, want)
				}
			}
			for _, ev := range c.nodes[name].rec.snapshot() {
				if ev.Kind != membership.Leave && ev.Member.Tags["admin"] == "" {
					t.Errorf("%s: event %v without the admin tag", name, ev)
				}
			}
		}
	})
}
