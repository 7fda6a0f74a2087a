package bus_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

func TestCheckTopic_DottedUpToEightTokens(t *testing.T) {
	for _, ok := range []string{"equities", "md.nasdaq.itch", "a.b.c.d.e.f.g.h", "x:y.z-1_2", strings.Repeat("a", 128)} {
		assert.NoError(t, bus.CheckTopic(ok), ok)
	}
	for _, bad := range []string{"", ".", "a.", ".a", "a..b", "a.b.c.d.e.f.g.h.i", "a b", "a.*", "a.>", "é", strings.Repeat("a", 129)} {
		err := bus.CheckTopic(bad)
		require.Error(t, err, bad)
		assert.True(t, errors.Is(err, bus.ErrInvalidConfig))
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
		p, err := bus.ParsePattern(pat)
		require.NoError(t, err, pat)
		for topic, want := range topics {
			assert.Equal(t, want, p.Match(topic), "%s ~ %s", pat, topic)
		}
	}
	for _, bad := range []string{"", "a.>.b", "a..b", "a.b*", "a.b.c.d.e.f.g.h.>", "a b"} {
		_, err := bus.ParsePattern(bad)
		assert.ErrorIs(t, err, bus.ErrInvalidConfig, bad)
	}
	assert.True(t, bus.IsPattern("md.*.itch"))
	assert.False(t, bus.IsPattern("md.nasdaq.itch"))
}

func TestStats_DottedTopics_NeverShareASubject(t *testing.T) {
	a := openNode(t, testConfig("a", ""))
	var mu sync.Mutex
	var got []string
	stop, err := a.SubscribeStats("md.a", func(subject string, msg []byte) {
		mu.Lock()
		got = append(got, string(msg))
		mu.Unlock()
	})
	require.NoError(t, err)
	defer func() { assert.NoError(t, stop()) }()
	all := map[string]bool{}
	for _, topic := range []string{"md.a", "md_a", "md.a.b", "md", "md:a"} {
		subj := a.StatsSubject(topic, "s1")
		assert.False(t, all[subj], "topic %s shares subject %s", topic, subj)
		all[subj] = true
		require.NoError(t, a.PublishStats(topic, "s1", []byte(topic)))
	}
	require.NoError(t, a.PublishStats("md.a", "s2", []byte("md.a/s2")))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 2
	}, 5*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond) // anything misrouted would have arrived too
	mu.Lock()
	defer mu.Unlock()
	assert.ElementsMatch(t, []string{"md.a", "md.a/s2"}, got, "only md.a's stats")
}
