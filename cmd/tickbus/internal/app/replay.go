package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/feed"
	"github.com/tickbus/tickbus/feed/csv"
	"github.com/tickbus/tickbus/feed/itch"
	"github.com/tickbus/tickbus/internal/config"
	"github.com/tickbus/tickbus/publisher"
	"github.com/tickbus/tickbus/rdma"
)

// replaySource is an opened --feed itch|csv file.
type replaySource struct {
	f    *os.File
	size int64
	src  feed.Source
}

func (r *replaySource) close() { _ = r.f.Close() }

func openReplay(c *config.Config) (*replaySource, error) {
	f, err := os.Open(c.Feed.File)
	if err != nil {
		return nil, fmt.Errorf("feed.file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("feed.file: %w", err)
	}
	r := &replaySource{f: f, size: st.Size()}
	switch c.Feed.Kind {
	case config.FeedITCH:
		day, err := c.Feed.ITCHDate()
		if err != nil {
			_ = f.Close()
			return nil, err
		}
		r.src = itch.NewFeed(f, day)
	case config.FeedCSV:
		cr, err := csv.NewReader(f, c.Pub.Venue)
		if err != nil {
			_ = f.Close()
			return nil, err
		}
		r.src = cr
	}
	return r, nil
}

// replay runs a file replay through p and prints its summary.
func replay(ctx context.Context, c *config.Config, p *publisher.Publisher, nodeID string, r *replaySource, idle rdma.IdleStrategy,
	stdout, stderr io.Writer, log zerolog.Logger) int {
	line, _ := feed.ParseLine(c.Feed.Line) // validated
	cfg := feed.Config{Speed: c.Feed.Speed, Line: line, Idle: idle}
	var bar *progressBar
	if c.Feed.Progress && r.size > progressMin && !c.JSON {
		bar = &progressBar{w: stderr, total: r.size}
		cfg.Progress = bar.update
	}
	res, runErr := feed.Replay(ctx, p, r.src, cfg)
	if bar != nil {
		bar.end()
	}
	sum := pubSummary{Event: "published", Node: nodeID, Published: res.Published, Seconds: res.Elapsed.Seconds(), Rate: res.Rate(),
		Feed: c.Feed.Kind, Messages: res.Messages, Lost: res.Lost}
	if line != feed.NoLine {
		sum.Line = line.String()
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
		fmt.Fprintf(stdout, "replayed %d messages of %s: published %d ticks in %.2fs (%.0f messages/s)", res.Messages, c.Feed.File,
			res.Published, sum.Seconds, sum.Rate)
		if line != feed.NoLine {
			fmt.Fprintf(stdout, "; line %s lost the arbitration for %d ticks the other line published first", line, res.Lost)
		}
		fmt.Fprintln(stdout)
	}
	if line != feed.NoLine && res.Published == 0 && res.Lost > 0 {
		fmt.Fprintf(stderr, "tickbus pub: line %s published nothing: every sequence was taken (a line replay needs a fresh topic, or the other line was first throughout)\n", line)
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "tickbus pub: %v\n", runErr)
		return ExitFailed
	}
	return ExitOK
}
