package lockapi

import (
	"errors"
	"testing"

	"github.com/seed-a6839e30/dlm/modes"
)

func TestCacheConfigBadInput(t *testing.T) {
	for _, c := range []struct {
		cfg  CacheConfig
		want error
	}{
		{CacheConfig{Mode: modes.NL}, ErrInvalidMode},
		{CacheConfig{Mode: modes.EX}, ErrInvalidMode},
		{CacheConfig{Mode: modes.PW}, ErrInvalidMode},
		{CacheConfig{Mode: 9}, ErrInvalidMode},
		{CacheConfig{Mode: modes.PR, MaxIdle: -1}, ErrInvalidArgument},
		{CacheConfig{Mode: modes.PR, Shards: -1}, ErrInvalidArgument},
		{CacheConfig{Mode: modes.PR, Shards: 1<<16 + 1}, ErrInvalidArgument},
	} {
		if _, err := NewCache(nil, c.cfg); !errors.Is(err, c.want) {
			t.Errorf("%+v: %v, want %v", c.cfg, err, c.want)
		}
	}
	for _, m := range []modes.Mode{modes.CR, modes.CW, modes.PR} {
		if err := (CacheConfig{Mode: m}).Validate(); err != nil {
			t.Errorf("%v: %v", m, err)
		}
	}
}
