package dash

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus"
	"github.com/tickbus/tickbus/stats"
)

// StatConfig configures the terminal view.
type StatConfig struct {
	NATS NATSConfig
	// Client, if set, is used instead of joining the bus (its prefix is
	// the client's; Prefix is ignored); it is not closed.
	Client *tickbus.Client
	// Prefix of the stats subjects (default stats.DefaultPrefix).
	Prefix string
	// Every is the refresh period (default 1 s).
	Every time.Duration
	// Count stops after this many screens; 0 runs until ctx is done.
	Count int
	// Clear redraws in place with ANSI escapes, as on a terminal; false
	// prints one screen after another (for pipes and logs).
	Clear bool
	// Logger for control paths; the zero value logs nothing.
	Logger zerolog.Logger
}

// RegisterFlags adds --nats (and credentials), --prefix, --every, --count
// and --clear.
func (c *StatConfig) RegisterFlags(fs *flag.FlagSet) {
	c.NATS.RegisterFlags(fs)
	fs.StringVar(&c.Prefix, "prefix", c.Prefix, "NATS subject `prefix` of the stats (default "+stats.DefaultPrefix+")")
	fs.DurationVar(&c.Every, "every", c.Every, "refresh `period` (default 1s)")
	fs.IntVar(&c.Count, "count", c.Count, "stop after `n` screens; 0 runs until interrupted")
	fs.BoolVar(&c.Clear, "clear", c.Clear, "redraw in place (ANSI) instead of printing screen after screen")
}

// RunStat prints, every period, one line per topic and subscriber: rate,
// received, gaps, overruns, tail, provider and the last interval's p50, p99,
// p99.9 and max, until ctx is done or Count screens were printed.
func RunStat(ctx context.Context, cfg StatConfig, w io.Writer) error {
	every := cfg.Every
	if every == 0 {
		every = time.Second
	}
	if every < 0 || cfg.Count < 0 {
		return fmt.Errorf("%w: every %v and count %d, want > 0 and >= 0", ErrConfig, cfg.Every, cfg.Count)
	}
	cl := cfg.Client
	if cl == nil {
		if cfg.NATS.Name == "" {
			cfg.NATS.Name = "tickbus-stat"
		}
		var err error
		if cl, err = cfg.NATS.Connect(ctx, cfg.Prefix); err != nil {
			return err
		}
		defer cl.Close()
	}
	st := newStore(cfg.Logger, time.Minute, DefaultMaxSeries, "")
	watch, err := cl.WatchStats("", st.handle)
	if err != nil {
		return fmt.Errorf("dash: subscribe %s: %w", stats.SubjectAll(cfg.Prefix), err)
	}
	defer func() { _ = watch.Stop() }()
	t := time.NewTicker(every)
	defer t.Stop()
	for n := 0; cfg.Count == 0 || n < cfg.Count; n++ {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil
			}
			return ctx.Err()
		case now := <-t.C:
			if err := printStat(w, st, stats.SubjectAll(cfg.Prefix), redactURL(cl.URL()), now, cfg.Clear); err != nil {
				return err
			}
		}
	}
	return nil
}

func printStat(w io.Writer, st *store, subject, url string, now time.Time, clearScreen bool) error {
	var b strings.Builder
	if clearScreen {
		b.WriteString("\x1b[H\x1b[2J")
	}
	accepted, rejected := st.counts()
	var bad uint64
	for _, n := range rejected {
		bad += n
	}
	views := st.views(false)
	fmt.Fprintf(&b, "%s - tickbus stat: %s on %s, %d series, %d messages, %d ignored\n",
		now.UTC().Format("2006-01-02 15:04:05"), subject, url, len(views), accepted, bad)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TOPIC\tSUBSCRIBER\tHOST\tPROVIDER\tRATE/s\tRECEIVED\tGAPS\tOVERRUNS\tTAIL\tP50\tP99\tP99.9\tMAX\tAGE\t")
	for _, v := range views {
		host := v.Host
		if host == "" {
			host = "-"
		}
		if v.CrossHost {
			host += "*"
		}
		age := now.Sub(time.UnixMilli(v.LastEnd)).Round(100 * time.Millisecond)
		lat := []string{"-", "-", "-", "-"} // an interval without ticks has no latency
		if v.Last.Count > 0 {
			lat = []string{FormatNs(v.Last.P50), FormatNs(v.Last.P99), FormatNs(v.Last.P999), FormatNs(v.Last.Max)}
		}
		provider := v.Provider
		if provider == "" {
			provider = "-"
		}
		tail := strconv.FormatUint(v.Tail, 10)
		if v.TailUnknown {
			tail = "?"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			v.Topic, v.Subscriber, host, provider, v.Rate, v.Received, v.Gaps, v.Overruns, tail,
			lat[0], lat[1], lat[2], lat[3], age)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(views) > 0 {
		b.WriteString("latency of the last interval; * = publisher on another host (clock sync matters); tail ? = its Close could not name the tail\n")
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// FormatNs prints nanoseconds with three significant digits and a unit:
// 950ns, 12.3µs, 4.56ms, 1.20s.
func FormatNs(ns int64) string {
	v := float64(ns)
	unit := "ns"
	switch {
	case ns >= 1e9:
		v, unit = v/1e9, "s"
	case ns >= 1e6:
		v, unit = v/1e6, "ms"
	case ns >= 1e3:
		v, unit = v/1e3, "µs"
	default:
		return fmt.Sprintf("%dns", ns)
	}
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f%s", v, unit)
	case v >= 10:
		return fmt.Sprintf("%.1f%s", v, unit)
	default:
		return fmt.Sprintf("%.2f%s", v, unit)
	}
}
