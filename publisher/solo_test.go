package publisher_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/publisher"
)

// A lone publisher that is its topic's home claims from runs reserved
// ahead (ring's solo claims). Publishers of other nodes join it (its home
// Shares the counter before it grants it), publish beside it, leave, and
// join again, with pauses longer than the subscriber's gap timeout between:
// every sequence handed out is delivered once, in order, none skipped, no
// event.
func TestSolo_PublishersJoinAndLeaveALoneHome_EverySequenceOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fr := newFailoverRig(t, ctx, "solo")
	pa, err := publisher.New(ctx, fr.a.node, fr.a.devs, publisher.Config{Topic: "solo", ID: "a"})
	require.NoError(t, err)
	defer pa.Close()
	require.True(t, pa.IsHome())
	require.NoError(t, pa.WaitSubscribers(ctx, 1))

	sent := publishN(t, pa, 300)
	require.True(t, pa.Stats().Solo, "a lone home publisher claims solo")
	time.Sleep(200 * time.Millisecond) // idle: the run reserved ahead is no gap
	for round := 0; round < 2; round++ {
		pb, err := publisher.New(ctx, fr.b.node, fr.b.devs, publisher.Config{Topic: "solo", ID: "b"})
		require.NoError(t, err)
		require.False(t, pb.IsHome())
		require.NoError(t, pb.WaitSubscribers(ctx, 1))
		assert.False(t, pa.Stats().Solo, "shared once another publisher joined")
		for range 5 {
			sent = append(sent, publishN(t, pa, 40)...)
			sent = append(sent, publishN(t, pb, 40)...)
		}
		require.NoError(t, pb.Close())
		sent = append(sent, publishN(t, pa, 100)...)
		time.Sleep(200 * time.Millisecond)
	}

	want := slices.Clone(sent)
	slices.Sort(want)
	for i, s := range want {
		require.Equal(t, uint64(i+1), s, "sequences handed out: 1.. with no hole and none twice")
	}
	require.Eventually(t, func() bool { return fr.rec.has(sent) }, 10*time.Second, 5*time.Millisecond)
	got, events := fr.rec.snapshot()
	assert.Empty(t, events, "no gap, skip or epoch event")
	assert.Equal(t, want, got, "every sequence once, in order")
}
