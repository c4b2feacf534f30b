package membership

import (
	"fmt"
	"maps"
	"time"
)

// SetTags replaces the tags this node gossips and tells the cluster,
// waiting up to timeout for the update to be sent. Local keeps the tags
// given at Start.
func (m *Membership) SetTags(tags map[string]string, timeout time.Duration) error {
	meta := m.local.Meta
	meta.Tags = maps.Clone(tags)
	if err := meta.Validate(); err != nil {
		return err
	}
	m.d.metaMu.Lock()
	m.d.meta = meta.Encode()
	m.d.metaMu.Unlock()
	if err := m.ml.UpdateNode(timeout); err != nil {
		return fmt.Errorf("membership: gossiping new tags: %w", err)
	}
	return nil
}
