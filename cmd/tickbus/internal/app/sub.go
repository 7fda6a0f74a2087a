package app

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tickbus/tickbus/bus"
	"github.com/tickbus/tickbus/internal/config"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/ring"
	"github.com/tickbus/tickbus/stats"
	"github.com/tickbus/tickbus/subscriber"
	"github.com/tickbus/tickbus/tick"
)

func init() {
	register("sub", command{
		synopsis: "subscribe to a topic: one line per second with rate, losses and latency percentiles",
		about: `Subscribes to --topic and prints one status line per --interval: ticks per second,
totals received, gaps and overruns, and the interval's latency p50, p99,
p99.9 and max (receive time minus each tick's publish time). --print shows
every tick. On SIGINT or SIGTERM it withdraws, drains its ring, prints a
summary (with a hash of the sequence order, equal across subscribers that
saw the same ticks in the same order) and unmaps everything.

--topic takes a pattern too: md.nasdaq.> subscribes to every topic below
md.nasdaq, md.*.itch to every topic with any one token there, present and
future; each topic keeps its own sequence, and --print then starts each
line with the topic.`,
		run: runSub,
	})
}

// subSummary is sub's last line (--json) and what the demo reads.
type subSummary struct {
	Event      string `json:"event"` // "summary"
	Subscriber string `json:"subscriber"`
	Received   uint64 `json:"received"`
	Gaps       uint64 `json:"gaps"`
	Overruns   uint64 `json:"overruns"`
	Skips      uint64 `json:"skips"`
	Corrupt    uint64 `json:"corrupt"`
	Lost       uint64 `json:"lost"`
	JoinedAt   uint64 `json:"joined_at"`
	BeforeJoin uint64 `json:"before_join"`
	StartedAt  uint64 `json:"started_at"`
	First      uint64 `json:"first"`
	Last       uint64 `json:"last"`
	Hash       string `json:"hash"` // FNV-1a over every delivered sequence and payload, in order
	// Provider is every provider publishers connected over during the run
	// ("shm", "tcp", "shm+tcp").
	Provider string `json:"provider"`
	Count    int64  `json:"latency_count"`
	P50      int64  `json:"p50_ns"`
	P99      int64  `json:"p99_ns"`
	P999     int64  `json:"p999_ns"`
	Max      int64  `json:"max_ns"`
}

// syncWriter serialises the status lines (stats goroutine) and --print
// (poll goroutine) on stdout.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// subHandler hashes the order, keeps the sequence log and prints ticks.
// The poll goroutine owns it; Close drains on the caller's goroutine after
// Run returned, so the fields are never touched concurrently.
type subHandler struct {
	print       bool
	json        bool
	out         io.Writer
	seqLog      *bufio.Writer
	h           hashState
	first, last uint64
	line        []byte
	tk          tick.Tick
	topic       string // the topic of the ticks at hand, for a pattern subscription
}

// wildHandler tells subHandler each batch's topic (a pattern
// subscription): --print lines then start with it.
type wildHandler struct{ s *subHandler }

func (w wildHandler) OnTicks(topic string, ts []ring.Tick) {
	w.s.topic = topic
	w.s.OnTicks(ts)
}

func (w wildHandler) OnEvent(topic string, ev ring.Event) {
	w.s.topic = topic
	w.s.OnEvent(ev)
}

type hashState struct{ v uint64 }

const fnvOffset, fnvPrime = 14695981039346656037, 1099511628211

func (h *hashState) add(b []byte) {
	v := h.v
	for _, c := range b {
		v ^= uint64(c)
		v *= fnvPrime
	}
	h.v = v
}

func (s *subHandler) OnTicks(ts []ring.Tick) {
	var sb [8]byte
	for i := range ts {
		t := &ts[i]
		binary.LittleEndian.PutUint64(sb[:], t.Seq)
		s.h.add(sb[:])
		s.h.add(t.Payload)
		if s.first == 0 {
			s.first = t.Seq
		}
		s.last = t.Seq
		if s.seqLog != nil {
			s.line = strconv.AppendUint(s.line[:0], t.Seq, 10)
			s.line = append(s.line, '\n')
			_, _ = s.seqLog.Write(s.line)
		}
		if s.print {
			s.line = s.line[:0]
			if s.topic != "" {
				s.line = append(append(s.line, s.topic...), ' ')
			}
			s.line = strconv.AppendUint(s.line, t.Seq, 10)
			s.line = append(s.line, ' ')
			if t.Type == tick.MessageType && tick.Decode(t.Payload, &s.tk) == nil {
				s.line = s.tk.AppendText(s.line)
			} else {
				s.line = append(s.line, "type="...)
				s.line = strconv.AppendUint(s.line, uint64(t.Type), 10)
				s.line = append(s.line, " len="...)
				s.line = strconv.AppendInt(s.line, int64(len(t.Payload)), 10)
			}
			s.line = append(s.line, '\n')
			_, _ = s.out.Write(s.line)
		}
	}
}

func (s *subHandler) OnEvent(ev ring.Event) {
	if s.json {
		if s.topic != "" {
			fmt.Fprintf(s.out, `{"event":%q,"topic":%q,"from":%d,"to":%d}`+"\n", ev.Kind.String(), s.topic, ev.From, ev.To)
			return
		}
		fmt.Fprintf(s.out, `{"event":%q,"from":%d,"to":%d}`+"\n", ev.Kind.String(), ev.From, ev.To)
		return
	}
	if s.topic != "" {
		fmt.Fprintf(s.out, "LOSS %s %s: %d sequence(s) %d..%d\n", s.topic, ev.Kind, ev.Count(), ev.From, ev.To)
		return
	}
	fmt.Fprintf(s.out, "LOSS %s: %d sequence(s) %d..%d\n", ev.Kind, ev.Count(), ev.From, ev.To)
}

func fmtNs(ns int64) string {
	switch {
	case ns < 1_000:
		return strconv.FormatInt(ns, 10) + "ns"
	case ns < 1_000_000:
		return strconv.FormatFloat(float64(ns)/1e3, 'f', 1, 64) + "µs"
	case ns < 1_000_000_000:
		return strconv.FormatFloat(float64(ns)/1e6, 'f', 2, 64) + "ms"
	}
	return strconv.FormatFloat(float64(ns)/1e9, 'f', 2, 64) + "s"
}

func runSub(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := config.Load("sub", commands["sub"].about, args, stderr)
	if err != nil {
		return usageError(stderr, "sub", err)
	}
	log, _ := c.Logger(stderr)
	idle, _ := rdma.ParseIdle(c.Idle)
	out := &syncWriter{w: stdout}
	h := &subHandler{print: c.Sub.Print, json: c.JSON, out: out, h: hashState{v: fnvOffset}}
	if c.Sub.SeqLog != "" {
		f, err := os.Create(c.Sub.SeqLog)
		if err != nil {
			fmt.Fprintf(stderr, "tickbus sub: sub.seq_log: %v\n", err)
			return ExitUsage
		}
		defer f.Close()
		h.seqLog = bufio.NewWriterSize(f, 1<<16)
	}
	node, devs, err := openNode(ctx, c, log)
	if err != nil {
		fmt.Fprintf(stderr, "tickbus sub: %v\n", err)
		return ExitFailed
	}
	defer node.Close()
	defer devs.Close()

	wild := bus.IsPattern(c.Topic)
	total := stats.NewHistogram()
	var totalMu sync.Mutex
	start := time.Now()
	onStats := func(m *stats.Message) {
		hist, err := m.LatencyHistogram()
		if err != nil {
			return
		}
		totalMu.Lock()
		total.Merge(hist)
		totalMu.Unlock()
		if c.JSON {
			ev := map[string]any{"event": "stats", "received": m.Received, "gaps": m.Gaps,
				"overruns": m.Overruns, "rate": m.Rate, "provider": m.Provider, "cross_host": m.CrossHost, "p50_ns": hist.ValueAtQuantile(50), "p99_ns": hist.ValueAtQuantile(99),
				"p999_ns": hist.ValueAtQuantile(99.9), "max_ns": hist.Max()}
			if wild {
				ev["topic"] = m.Topic // a pattern subscription: one stats line per topic
			}
			_ = json.NewEncoder(out).Encode(ev)
			return
		}
		lat := "no ticks this interval"
		if hist.TotalCount() > 0 {
			lat = "p50=" + fmtNs(hist.ValueAtQuantile(50)) + " p99=" + fmtNs(hist.ValueAtQuantile(99)) +
				" p99.9=" + fmtNs(hist.ValueAtQuantile(99.9)) + " max=" + fmtNs(hist.Max())
		}
		topic := ""
		if wild {
			topic = m.Topic + " "
		}
		fmt.Fprintf(out, "%6.1fs %s%9.0f/s recv=%d gaps=%d overruns=%d via=%s  %s\n",
			time.Since(start).Seconds(), topic, m.Rate, m.Received, m.Gaps, m.Overruns, orDash(m.Provider), lat)
	}
	mode, _ := ring.ParseMode(c.Ring.Mode)
	scfg := subscriber.Config{Topic: c.Topic, Mode: mode, Slots: c.Ring.Slots, SlotSize: c.Ring.SlotSize,
		GapTimeout: c.Ring.GapTimeout, Provider: provider(c), Idle: idle, StatsInterval: c.Sub.Interval, OnStats: onStats, Logger: log}
	if wild {
		return runWildcard(ctx, c, node, devs, scfg, h, out, stderr, total, &totalMu, log)
	}
	s, err := subscriber.New(ctx, node, devs, scfg, h)
	if err != nil {
		fmt.Fprintf(stderr, "tickbus sub: %v\n", err)
		return ExitFailed
	}
	if c.JSON {
		fmt.Fprintf(out, `{"event":"ready","subscriber":%q,"nats":%q}`+"\n", s.ID(), node.ClientURL())
	} else {
		fmt.Fprintf(out, "subscribed to %s as %s on %s (Ctrl-C stops)\n", c.Topic, s.ID(), node.ServerURL())
	}
	runCtx := ctx
	if c.Sub.Duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, c.Sub.Duration)
		defer cancel()
	}
	_ = s.Run(runCtx)
	closeErr := s.Close() // withdraw, drain, last stats, unmap
	if h.seqLog != nil {
		if err := h.seqLog.Flush(); err != nil {
			fmt.Fprintf(stderr, "tickbus sub: sequence log: %v\n", err)
		}
	}
	cn := s.Counters()
	totalMu.Lock()
	sum := summary(s.ID(), cn, h, total)
	totalMu.Unlock()
	sum.Provider = s.ProvidersUsed()
	if c.JSON {
		_ = json.NewEncoder(out).Encode(sum)
	} else {
		fmt.Fprintf(out, "received %d, gaps %d, overruns %d, lost %d (first %d, last %d, order hash %s) via %s; latency p50 %s p99 %s p99.9 %s max %s\n",
			sum.Received, sum.Gaps, sum.Overruns, sum.Lost, sum.First, sum.Last, sum.Hash, orDash(sum.Provider),
			fmtNs(sum.P50), fmtNs(sum.P99), fmtNs(sum.P999), fmtNs(sum.Max))
		if sum.StartedAt > 0 || sum.BeforeJoin > 0 {
			fmt.Fprintf(out, "joined a running topic at sequence %d (%d sequence(s) lost while publishers were still connecting to this ring)\n", sum.JoinedAt, sum.BeforeJoin)
		}
	}
	if closeErr != nil {
		log.Warn().Err(closeErr).Msg("subscriber close")
	}
	return ExitOK
}

func summary(id string, cn subscriber.Counters, h *subHandler, total *hdrhistogram.Histogram) subSummary {
	return subSummary{Event: "summary", Subscriber: id, Received: cn.Received, Gaps: cn.Gaps, Overruns: cn.Overruns,
		Skips: cn.Skips, Corrupt: cn.Corrupt, Lost: cn.Lost(), JoinedAt: cn.JoinedAt, BeforeJoin: cn.BeforeJoin, StartedAt: cn.StartedAt,
		First: h.first, Last: h.last, Hash: fmt.Sprintf("%016x", h.h.v), Count: total.TotalCount(),
		P50: total.ValueAtQuantile(50), P99: total.ValueAtQuantile(99), P999: total.ValueAtQuantile(99.9), Max: total.Max()}
}

// orDash is s, or "-" when empty (no publisher connected).
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
