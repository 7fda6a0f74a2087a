package tickbus_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus"
	"github.com/tickbus/tickbus/rdma"
)

// byTopic records what a pattern subscription delivers, per topic.
type byTopic struct {
	mu     sync.Mutex
	got    map[string][]uint64
	events map[string][]tickbus.Event
}

func (b *byTopic) OnMessages(topic string, ms []tickbus.Message) {
	b.mu.Lock()
	for _, m := range ms {
		b.got[topic] = append(b.got[topic], m.Seq)
	}
	b.mu.Unlock()
}

func (b *byTopic) OnEvent(topic string, ev tickbus.Event) {
	b.mu.Lock()
	b.events[topic] = append(b.events[topic], ev)
	b.mu.Unlock()
}

func (b *byTopic) count(topic string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.got[topic])
}

// TestSubscribePattern_ThreeTopicsOneLate_EachKeepsItsOwnSequence: one
// pattern subscription of the public API gets every tick of each matching
// topic, told the topic, each topic in its own unbroken sequence, a topic
// whose publisher starts after the subscription included, and nothing of
// a topic the pattern does not match.
func TestSubscribePattern_ThreeTopicsOneLate_EachKeepsItsOwnSequence(t *testing.T) {
	c := connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := &byTopic{got: map[string][]uint64{}, events: map[string][]tickbus.Event{}}

	early := []string{"md.a.itch", "md.b.itch"}
	pubs := map[string]*tickbus.Publisher{}
	for _, topic := range append(early, "md.a.csv") {
		p, err := c.Publisher(topic)
		require.NoError(t, err)
		pubs[topic] = p
	}
	ps, err := c.SubscribePattern("md.*.itch", h, tickbus.WithPollIdle(rdma.Yield{}))
	require.NoError(t, err)
	late, err := c.Publisher("md.c.itch")
	require.NoError(t, err)
	pubs["md.c.itch"] = late

	matching := append(early, "md.c.itch")
	for _, topic := range matching {
		require.NoError(t, pubs[topic].WaitSubscribers(ctx, 1), topic)
	}
	const n = 300
	for i := range n {
		for topic, p := range pubs {
			_, err := p.PublishTick(&tickbus.Tick{Instrument: uint64(i + 1), Kind: tickbus.Trade, Price: 1, Size: 1})
			require.NoError(t, err, topic)
		}
	}
	require.Eventually(t, func() bool {
		for _, topic := range matching {
			if h.count(topic) < n {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, ps.Close())

	assert.ElementsMatch(t, matching, ps.Topics())
	for _, topic := range matching {
		got := h.got[topic]
		require.Len(t, got, n, topic)
		for i := 1; i < len(got); i++ {
			require.Equal(t, got[i-1]+1, got[i], "%s: one unbroken sequence", topic)
		}
		assert.Empty(t, h.events[topic], topic)
		cs, ok := ps.TopicCounters(topic)
		assert.True(t, ok, topic)
		assert.Equal(t, uint64(n), cs.Received, topic)
	}
	assert.Empty(t, h.got["md.a.csv"], "a topic the pattern does not match")
	_, ok := ps.TopicCounters("md.a.csv")
	assert.False(t, ok)
	assert.Equal(t, uint64(3*n), ps.Counters().Received)
	require.NoError(t, ps.Err())
}

func TestSubscribePattern_BadPatternOrHandler_FailsAndChangesNothing(t *testing.T) {
	c := connect(t)
	_, err := c.SubscribePattern("md.>.itch", &byTopic{})
	assert.ErrorIs(t, err, tickbus.ErrInvalidOption)
	_, err = c.SubscribePattern("md.>", nil)
	assert.ErrorIs(t, err, tickbus.ErrInvalidOption)
	_, err = c.SubscribePattern("md.>", &byTopic{}, nil)
	assert.ErrorIs(t, err, tickbus.ErrInvalidOption)
}
