package membership

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
)

// Meta is what every node gossips about itself in memberlist's NodeMeta.
//
// Encoding (compact, well under memberlist's 512-byte limit, trap T8):
//
//	byte 0        meta format (metaFormat)
//	byte 1        protocol version of the node's links
//	bytes 2-9     boot ID, big-endian
//	byte 10       n = len(ClusterID), 1..64, then n bytes
//	next byte     m = len(LinkAddr), 1..255, then m bytes
//
// At most 2 + 8 + 1 + 64 + 1 + 255 = 331 bytes.
type Meta struct {
	Version   uint8  // protocol version of the node's links
	BootID    uint64 // random per process start, never 0
	ClusterID string // 1..64 bytes
	LinkAddr  string // "host:port" of the node's links, 1..255 bytes
}

const (
	metaFormat     = 1
	maxClusterID   = 64
	maxLinkAddr    = 255
	maxMetaSize    = 2 + 8 + 1 + maxClusterID + 1 + maxLinkAddr
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
	return append(b, m.LinkAddr...)
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
	if len(rest) != 0 {
		return Meta{}, fmt.Errorf("%w: %d trailing bytes", ErrBadMeta, len(rest))
	}
	return m, m.Validate()
}

func lenPrefixed(b []byte) (string, []byte, error) {
	if len(b) < 1 || int(b[0]) > len(b)-1 {
		return "", nil, fmt.Errorf("%w: truncated field", ErrBadMeta)
	}
	n := int(b[0])
	return string(b[1 : 1+n]), b[1+n:], nil
}
