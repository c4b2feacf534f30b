package membership

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
)

// Meta is what every node gossips about itself in memberlist's NodeMeta.
//
// Encoding (compact, well under memberlist's 512-byte limit, trap T8):
//
//	byte 0        meta format (1)
//	byte 1        protocol version of the node's links
//	bytes 2-9     boot ID, big-endian
//	byte 10       n = len(ClusterID), 1..64, then n bytes
//	next byte     m = len(LinkAddr), 1..255, then m bytes
//	then, only if the node has tags:
//	next byte     k = number of tags, 1..MaxTags, then k times, by key:
//	              a byte of key length (1..MaxTagKey) and the key, a byte
//	              of value length (0..MaxTagValue) and the value
//
// The tags take at most MaxTagBytes, so the whole is at most
// 2 + 8 + 1 + 64 + 1 + 255 + 1 + 160 = 492 bytes. A node without tags
// encodes as it did before tags existed.
type Meta struct {
	Version   uint8  // protocol version of the node's links
	BootID    uint64 // random per process start, never 0
	ClusterID string // 1..64 bytes
	LinkAddr  string // "host:port" of the node's links, 1..255 bytes
	// Tags are small key/value pairs a node says about itself for others
	// to read (the agent's admin address, say); membership does not
	// interpret them. Nil or empty: none.
	Tags map[string]string
}

// Limits on Meta.Tags.
const (
	MaxTags     = 8   // tags per node
	MaxTagKey   = 32  // bytes of a key, at least 1
	MaxTagValue = 128 // bytes of a value
	MaxTagBytes = 160 // bytes of every key and value, with their lengths
)

const (
	metaFormat     = 1
	maxClusterID   = 64
	maxLinkAddr    = 255
	maxMetaSize    = 2 + 8 + 1 + maxClusterID + 1 + maxLinkAddr + 1 + MaxTagBytes
	metaHeaderSize = 2 + 8
)

// ErrBadMeta is returned (wrapped) for node metadata that does not decode or
// breaks a rule.
var ErrBadMeta = errors.New("membership: bad node metadata")

// Validate reports whether m can be encoded and would be accepted.
func (m Meta) Validate() error {
	switch {
	case m.Version == 0:
		return fmt.Errorf("%w: protocol version 0", ErrBadMeta)
	case m.BootID == 0:
		return fmt.Errorf("%w: boot ID 0", ErrBadMeta)
	case len(m.ClusterID) == 0 || len(m.ClusterID) > maxClusterID:
		return fmt.Errorf("%w: cluster ID of %d bytes, want 1..%d", ErrBadMeta, len(m.ClusterID), maxClusterID)
	case len(m.LinkAddr) == 0 || len(m.LinkAddr) > maxLinkAddr:
		return fmt.Errorf("%w: link address of %d bytes, want 1..%d", ErrBadMeta, len(m.LinkAddr), maxLinkAddr)
	}
	if _, _, err := net.SplitHostPort(m.LinkAddr); err != nil {
		return fmt.Errorf("%w: link address %q: %v", ErrBadMeta, m.LinkAddr, err)
	}
	return ValidateTags(m.Tags)
}

// ValidateTags reports whether tags fit the limits of Meta.Tags.
func ValidateTags(tags map[string]string) error {
	if len(tags) > MaxTags {
		return fmt.Errorf("%w: %d tags, at most %d", ErrBadMeta, len(tags), MaxTags)
	}
	size := 0
	for k, v := range tags {
		if len(k) == 0 || len(k) > MaxTagKey {
			return fmt.Errorf("%w: tag key %q of %d bytes, want 1..%d", ErrBadMeta, k, len(k), MaxTagKey)
		}
		if len(v) > MaxTagValue {
			return fmt.Errorf("%w: tag %q has a value of %d bytes, at most %d", ErrBadMeta, k, len(v), MaxTagValue)
		}
		size += 2 + len(k) + len(v)
	}
	if size > MaxTagBytes {
		return fmt.Errorf("%w: tags take %d bytes, at most %d", ErrBadMeta, size, MaxTagBytes)
	}
	return nil
}

// Encode returns the wire form of m, which must be valid.
func (m Meta) Encode() []byte {
	b := make([]byte, 0, metaHeaderSize+2+len(m.ClusterID)+len(m.LinkAddr))
	b = append(b, metaFormat, m.Version)
	b = binary.BigEndian.AppendUint64(b, m.BootID)
	b = append(b, byte(len(m.ClusterID)))
	b = append(b, m.ClusterID...)
	b = append(b, byte(len(m.LinkAddr)))
	b = append(b, m.LinkAddr...)
	if len(m.Tags) == 0 {
		return b
	}
	b = append(b, byte(len(m.Tags)))
	for _, k := range slices.Sorted(maps.Keys(m.Tags)) {
		b = append(b, byte(len(k)))
		b = append(b, k...)
		b = append(b, byte(len(m.Tags[k])))
		b = append(b, m.Tags[k]...)
	}
	return b
}

// DecodeMeta parses and validates node metadata.
func DecodeMeta(b []byte) (Meta, error) {
	if len(b) < metaHeaderSize+1 || len(b) > maxMetaSize {
		return Meta{}, fmt.Errorf("%w: %d bytes", ErrBadMeta, len(b))
	}
	if b[0] != metaFormat {
		return Meta{}, fmt.Errorf("%w: format %d", ErrBadMeta, b[0])
	}
	m := Meta{Version: b[1], BootID: binary.BigEndian.Uint64(b[2:])}
	rest := b[metaHeaderSize:]
	var err error
	if m.ClusterID, rest, err = lenPrefixed(rest); err != nil {
		return Meta{}, err
	}
	if m.LinkAddr, rest, err = lenPrefixed(rest); err != nil {
		return Meta{}, err
	}
	if m.Tags, rest, err = decodeTags(rest); err != nil {
		return Meta{}, err
	}
	if len(rest) != 0 {
		return Meta{}, fmt.Errorf("%w: %d trailing bytes", ErrBadMeta, len(rest))
	}
	return m, m.Validate()
}

// decodeTags reads the optional tags section (nothing left: no tags).
func decodeTags(b []byte) (map[string]string, []byte, error) {
	if len(b) == 0 {
		return nil, b, nil
	}
	k := int(b[0])
	if k == 0 || k > MaxTags {
		return nil, nil, fmt.Errorf("%w: %d tags, want 1..%d", ErrBadMeta, k, MaxTags)
	}
	b = b[1:]
	tags := make(map[string]string, k)
	for range k {
		key, rest, err := lenPrefixed(b)
		if err != nil {
			return nil, nil, err
		}
		val, rest, err := lenPrefixed(rest)
		if err != nil {
			return nil, nil, err
		}
		if _, dup := tags[key]; dup {
			return nil, nil, fmt.Errorf("%w: tag %q twice", ErrBadMeta, key)
		}
		tags[key], b = val, rest
	}
	return tags, b, nil
}

func lenPrefixed(b []byte) (string, []byte, error) {
	if len(b) < 1 || int(b[0]) > len(b)-1 {
		return "", nil, fmt.Errorf("%w: truncated field", ErrBadMeta)
	}
	n := int(b[0])
	return string(b[1 : 1+n]), b[1+n:], nil
}
