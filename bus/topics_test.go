package bus

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckTopic_DottedUpToEightTokens(t *testing.T) {
	for _, ok := range []string{"equities", "md.nasdaq.itch", "a.b.c.d.e.f.g.h", "x:y.z-1_2", strings.Repeat("a", 128)} {
		assert.NoError(t, CheckTopic(ok), ok)
	}
	for _, bad := range []string{"", ".", "a.", ".a", "a..b", "a.b.c.d.e.f.g.h.i", "a b", "a.*", "a.>", "é", strings.Repeat("a", 129)} {
		err := CheckTopic(bad)
		require.Error(t, err, bad)
		assert.True(t, errors.Is(err, ErrInvalidConfig))
		assert.Contains(t, err.Error(), "md.nasdaq.itch", "the error shows what is expected")
	}
}

func TestPattern_Match(t *testing.T) {
	cases := map[string]map[string]bool{
		"md.nasdaq.>":    {"md.nasdaq.itch": true, "md.nasdaq.itch.a": true, "md.nasdaq": false, "md.nyse.itch": false},
		"md.*.itch":      {"md.nasdaq.itch": true, "md.nyse.itch": true, "md.itch": false, "md.a.b.itch": false, "md.nasdaq.csv": false},
		">":              {"a": true, "a.b": true},
		"*":              {"a": true, "a.b": false},
		"md.nasdaq.itch": {"md.nasdaq.itch": true, "md.nasdaq.itch.x": false, "md.nasdaq": false},
		"*.*.>":          {"a.b": false, "a.b.c": true},
	}
	for pat, topics := range cases {
		p, err := ParsePattern(pat)
		require.NoError(t, err, pat)
		for topic, want := range topics {
			assert.Equal(t, want, p.Match(topic), "%s ~ %s", pat, topic)
		}
	}
	for _, bad := range []string{"", "a.>.b", "a..b", "a.b*", "a.b.c.d.e.f.g.h.>", "a b"} {
		_, err := ParsePattern(bad)
		assert.ErrorIs(t, err, ErrInvalidConfig, bad)
	}
	assert.True(t, IsPattern("md.*.itch"))
	assert.False(t, IsPattern("md.nasdaq.itch"))
}
