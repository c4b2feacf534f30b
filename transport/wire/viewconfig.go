package wire

import "fmt"

// ViewConfig is the cluster configuration a view is agreed under: the
// member set and its version, and, during a change, the old set too (a
// joint configuration, in which a quorum is a majority of each). Propose,
// Promise and Commit carry it as an optional last field: a message without
// it decodes with the zero ViewConfig, which recovery reads as "none said".
type ViewConfig struct {
	Version uint64
	Members []string // sorted, unique; empty only in the zero ViewConfig
	Old     []string // sorted, unique; non-empty only in a joint configuration
}

const viewConfigFields = 3

// IsZero reports whether c says nothing.
func (c ViewConfig) IsZero() bool { return c.Version == 0 && len(c.Members) == 0 && len(c.Old) == 0 }

// maxConfigEnc is a ViewConfig at its largest: two lists of MaxMembers
// names of MaxNodeName bytes.
const maxConfigEnc = 1 + maxUint64Enc + 2*(3+MaxMembers*(2+MaxNodeName))

func checkNameList(field string, names []string) error {
	if len(names) > MaxMembers {
		return fmt.Errorf("%w: %s: %d names, limit %d", ErrInvalid, field, len(names), MaxMembers)
	}
	for i, n := range names {
		if err := checkName(field, n, MaxNodeName); err != nil {
			return err
		}
		if i > 0 && names[i-1] >= n {
			return fmt.Errorf("%w: %s: %q after %q: must be sorted, each once", ErrInvalid, field, n, names[i-1])
		}
	}
	return nil
}

func (c ViewConfig) validate() error {
	if c.IsZero() {
		return nil
	}
	if len(c.Members) == 0 {
		return fmt.Errorf("%w: configuration of no members", ErrInvalid)
	}
	if err := checkNameList("configuration member", c.Members); err != nil {
		return err
	}
	return checkNameList("old configuration member", c.Old)
}

func appendNames(b []byte, names []string) []byte {
	b = appendArrayLen(b, len(names))
	for _, n := range names {
		b = appendStr(b, n)
	}
	return b
}

func appendViewConfig(b []byte, c ViewConfig) []byte {
	b = appendArrayLen(b, viewConfigFields)
	b = appendUint(b, c.Version)
	b = appendNames(b, c.Members)
	return appendNames(b, c.Old)
}

func (d *Decoder) names(r *reader, field string) ([]string, error) {
	n, err := r.arrayLen()
	if err != nil {
		return nil, err
	}
	if n > MaxMembers {
		return nil, fmt.Errorf("%w: %s: %d names, limit %d", ErrInvalid, field, n, MaxMembers)
	}
	if n == 0 {
		return nil, nil
	}
	out := make([]string, n)
	for i := range out {
		if out[i], err = d.stringField(r, field, MaxNodeName); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (d *Decoder) viewConfig(r *reader) (c ViewConfig, err error) {
	if err = r.expectArray(viewConfigFields); err != nil {
		return c, err
	}
	if c.Version, err = r.uint64(); err != nil {
		return c, err
	}
	if c.Members, err = d.names(r, "configuration member"); err != nil {
		return c, err
	}
	c.Old, err = d.names(r, "old configuration member")
	return c, err
}

// fieldsOrOne reads a message's array header: want fields, or want−1 from
// a sender that leaves out the optional last field. It reports whether the
// last field is there.
func (r *reader) fieldsOrOne(want int) (bool, error) {
	got, err := r.arrayLen()
	if err != nil {
		return false, err
	}
	switch got {
	case want:
		return true, nil
	case want - 1:
		return false, nil
	}
	return false, fmt.Errorf("%w: %d fields, want %d or %d", ErrMalformed, got, want-1, want)
}
