package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/config"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
)

func init() {
	register("pub", command{
		synopsis: "publish a feed on a topic: synthetic (random walk), an ITCH 5.0 file or a CSV file",
		about: `Publishes synthetic ticks on --topic at --rate per second (0: as fast as
possible), paced from each tick's intended send time so that a stall shows
in the subscribers' latency. With --nats it joins a running NATS server;
without, it runs an embedded one and prints its URL.

--feed itch --file PATH replays a Nasdaq TotalView-ITCH 5.0 file as level-1
ticks (instrument = stock locate, xseq = message number; --date or the
file's MMDDYYYY name gives the day); --feed csv --file PATH replays a CSV
file whose header is time,instrument,kind,price,size,exchange_seq. --speed
0 replays as fast as flow control allows, 1 at the original pace, N N times
faster. --line A and --line B on two publishers replaying the same file
onto a fresh topic arbitrate each tick's sequence: subscribers see every
tick once while either line delivers it. A bad message stops the replay
with its byte offset (itch) or line and column (csv).`,
		run: runPub,
	})
}

// pubSummary is pub's last line (--json) and what the demo reads.
type pubSummary struct {
	Event     string  `json:"event"` // "published"
	Node      string  `json:"node"`
	Published uint64  `json:"published"`
	First     uint64  `json:"first"`
	Last      uint64  `json:"last"`
	Seconds   float64 `json:"seconds"`
	Rate      float64 `json:"rate"`
	BehindNs  int64   `json:"max_behind_ns"`
	// Unpublished: ticks the run ended with while no home answered (a
	// failover under way at its end); they got no sequence.
	Unpublished uint64 `json:"unpublished,omitempty"`
	Error       string `json:"error,omitempty"`
	// A replay (--feed itch|csv) also reports these.
	Feed     string `json:"feed,omitempty"`
	Messages uint64 `json:"messages,omitempty"`
	Lost     uint64 `json:"lost_arbitration,omitempty"`
	Line     string `json:"line,omitempty"`
}

func runPub(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := config.Load("pub", commands["pub"].about, args, stderr)
	if err != nil {
		return usageError(stderr, "pub", err)
	}
	log, _ := c.Logger(stderr)
	idle, _ := rdma.ParseIdle(c.Idle)
	var (
		walk *publisher.Feed
		src  *replaySource
	)
	if c.Feed.Kind == config.FeedITCH || c.Feed.Kind == config.FeedCSV {
		if src, err = openReplay(c); err != nil {
			fmt.Fprintf(stderr, "tickbus pub: %v\n", err)
			return ExitUsage
		}
		defer src.close()
	} else if walk, err = publisher.NewFeed(c.Pub.FeedConfig()); err != nil {
		return usageError(stderr, "pub", err)
	}
	node, devs, err := openNode(ctx, c, log)
	if err != nil {
		fmt.Fprintf(stderr, "tickbus pub: %v\n", err)
		return ExitFailed
	}
	defer node.Close()
	defer devs.Close()
	if len(c.Bus.NATS) == 0 {
		dir, _ := bus.RuntimeDir()
		fmt.Fprintf(stderr, "tickbus pub: embedded NATS at %s (tickbus sub --nats %s --topic %s); it requires the token in %s/%s,"+
			" which tickbus commands of this user on this host find; hand it to others as a secret (--nats nats://<token>@host:port, bus.token)\n",
			node.ServerURL(), node.ServerURL(), c.Topic, dir, bus.EmbeddedSecretFile)
	}
	journal := c.Ring.Journal
	if journal == 0 {
		journal = -1 // publisher.Config: -1 is none, 0 its default
	}
	p, err := publisher.New(ctx, node, devs, publisher.Config{Topic: c.Topic, Provider: provider(c), SlotSize: c.Ring.SlotSize,
		JournalSlots: journal, MaxBatch: max(64, c.Pub.Batch), Timeout: c.Pub.Timeout, Idle: idle, ArbitrationWindow: c.Feed.LineWindow, Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "tickbus pub: %v\n", err)
		return ExitFailed
	}
	defer p.Close()
	if c.JSON {
		fmt.Fprintf(stdout, `{"event":"ready","node":%q,"home":%t}`+"\n", node.ID(), p.IsHome())
	}
	if c.Pub.Wait > 0 && c.Pub.WaitSubscribers > 0 {
		wctx, cancel := context.WithTimeout(ctx, c.Pub.Wait)
		err := p.WaitSubscribers(wctx, c.Pub.WaitSubscribers)
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "tickbus pub: %v\n", err)
			return ExitFailed
		}
	}
	if src != nil {
		return replay(ctx, c, p, node.ID(), src, idle, stdout, stderr, log)
	}
	res, runErr := publisher.RunFeed(ctx, p, walk, publisher.FeedRun{Rate: c.Pub.Rate, Duration: c.Pub.Duration, Batch: c.Pub.Batch, Idle: idle})
	sum := pubSummary{Event: "published", Node: node.ID(), Published: res.Published, First: res.First, Last: res.Last,
		Seconds: res.Elapsed.Seconds(), Rate: res.Rate(), BehindNs: int64(res.MaxBehind), Unpublished: res.Unpublished}
	if res.Unpublished > 0 {
		log.Warn().Uint64("unpublished", res.Unpublished).Msg("publisher: the run ended while the topic had no home; its last ticks were not published")
	}
	if runErr != nil {
		sum.Error = runErr.Error()
	}
	if err := p.Close(); err != nil && runErr == nil {
		log.Warn().Err(err).Msg("publisher close")
	}
	if c.JSON {
		_ = json.NewEncoder(stdout).Encode(sum)
	} else {
		fmt.Fprintf(stdout, "published %d ticks (seq %d..%d) in %.2fs: %.0f/s; furthest behind schedule %v\n",
			sum.Published, sum.First, sum.Last, sum.Seconds, sum.Rate, time.Duration(sum.BehindNs).Round(time.Microsecond))
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "tickbus pub: %v\n", runErr)
		return ExitFailed
	}
	return ExitOK
}
