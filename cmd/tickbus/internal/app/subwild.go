package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/config"
	"github.com/tickbus/tickbus/link"
	"github.com/tickbus/tickbus/subscriber"
)

// runWildcard is `tickbus sub --topic PATTERN`: one subscriber per
// matching topic, present and future, polled together.
func runWildcard(ctx context.Context, c *config.Config, node *bus.Node, devs *link.Devices, scfg subscriber.Config, h *subHandler,
	out io.Writer, stderr io.Writer, total *hdrhistogram.Histogram, totalMu *sync.Mutex, log zerolog.Logger) int {
	w, err := subscriber.NewWildcard(ctx, node, devs, scfg, wildHandler{s: h})
	if err != nil {
		fmt.Fprintf(stderr, "tickbus sub: %v\n", err)
		return ExitFailed
	}
	if c.JSON {
		fmt.Fprintf(out, `{"event":"ready","pattern":%q,"nats":%q}`+"\n", c.Topic, node.ClientURL())
	} else {
		fmt.Fprintf(out, "subscribed to every topic matching %s on %s (Ctrl-C stops)\n", c.Topic, node.ClientURL())
	}
	runCtx := ctx
	if c.Sub.Duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, c.Sub.Duration)
		defer cancel()
	}
	_ = w.Run(runCtx)
	topics := w.Topics()
	var providers []string
	for _, t := range topics {
		if s := w.Subscriber(t); s != nil {
			if p := s.ProvidersUsed(); p != "" && !strings.Contains(strings.Join(providers, "+"), p) {
				providers = append(providers, p)
			}
		}
	}
	closeErr := w.Close()
	if h.seqLog != nil {
		if err := h.seqLog.Flush(); err != nil {
			fmt.Fprintf(stderr, "tickbus sub: sequence log: %v\n", err)
		}
	}
	cn := w.Counters()
	totalMu.Lock()
	sum := summary(scfg.ID, cn, h, total)
	totalMu.Unlock()
	sum.Provider = strings.Join(providers, "+")
	if c.JSON {
		_ = json.NewEncoder(out).Encode(struct {
			subSummary
			Topics []string `json:"topics"`
		}{sum, topics})
	} else {
		fmt.Fprintf(out, "%d topic(s) %s: received %d, gaps %d, overruns %d, lost %d (order hash %s) via %s; latency p50 %s p99 %s p99.9 %s max %s\n",
			len(topics), strings.Join(topics, ","), sum.Received, sum.Gaps, sum.Overruns, sum.Lost, sum.Hash, orDash(sum.Provider),
			fmtNs(sum.P50), fmtNs(sum.P99), fmtNs(sum.P999), fmtNs(sum.Max))
	}
	if closeErr != nil {
		log.Warn().Err(closeErr).Msg("subscriber close")
	}
	return ExitOK
}
