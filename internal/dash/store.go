package dash

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/stats"
)

// Defaults for the store's bounds.
const (
	DefaultHistory   = 10 * time.Minute
	DefaultMaxSeries = 256
	maxPoints        = 3600
)

// Reasons a message is rejected, as labels of tickbus_dash_rejected_total.
const (
	reasonMalformed  = "malformed"
	reasonVersion    = "version"
	reasonInvalid    = "invalid"
	reasonHistogram  = "histogram"
	reasonTooLarge   = "too_large"
	reasonSeries     = "series_limit"
	reasonOutOfOrder = "out_of_order"
	reasonDropped    = "dropped" // NATS dropped messages we were too slow to take
)

// Point is one interval of one series, as the charts plot it. Latencies are
// nanoseconds; T is the interval's end in Unix milliseconds.
type Point struct {
	T    int64   `json:"t"`
	N    int64   `json:"n"`
	P50  int64   `json:"p50"`
	P99  int64   `json:"p99"`
	P999 int64   `json:"p999"`
	Max  int64   `json:"max"`
	Rate float64 `json:"rate"`
}

// Percentiles summarise a histogram in nanoseconds.
type Percentiles struct {
	Count int64   `json:"count"`
	Min   int64   `json:"min"`
	Mean  float64 `json:"mean"`
	P50   int64   `json:"p50"`
	P90   int64   `json:"p90"`
	P99   int64   `json:"p99"`
	P999  int64   `json:"p999"`
	P9999 int64   `json:"p9999"`
	Max   int64   `json:"max"`
}

func percentilesOf(h *hdrhistogram.Histogram) Percentiles {
	if h.TotalCount() == 0 {
		return Percentiles{}
	}
	return Percentiles{
		Count: h.TotalCount(), Min: h.Min(), Mean: h.Mean(),
		P50: h.ValueAtQuantile(50), P90: h.ValueAtQuantile(90), P99: h.ValueAtQuantile(99),
		P999: h.ValueAtQuantile(99.9), P9999: h.ValueAtQuantile(99.99), Max: h.Max(),
	}
}

// CurvePoint is one point of a percentile distribution: Q in percent, V in
// nanoseconds, as HdrHistogram's percentile output lists them.
type CurvePoint struct {
	Q float64 `json:"q"`
	V int64   `json:"v"`
}

func curveOf(h *hdrhistogram.Histogram) []CurvePoint {
	if h.TotalCount() == 0 {
		return nil
	}
	br := h.CumulativeDistributionWithTicks(5)
	out := make([]CurvePoint, 0, len(br))
	for _, b := range br {
		out = append(out, CurvePoint{Q: b.Quantile, V: b.ValueAt})
	}
	return out
}

// SeriesView is one topic and subscriber as /api/state and /events carry it.
type SeriesView struct {
	Key        string `json:"key"`
	Topic      string `json:"topic"`
	Subscriber string `json:"subscriber"`
	Host       string `json:"host"`
	Provider   string `json:"provider"`
	CrossHost  bool   `json:"cross_host"`
	Received   uint64 `json:"received"`
	Gaps       uint64 `json:"gaps"`
	Overruns   uint64 `json:"overruns"`
	Tail       uint64 `json:"tail"` // named lost at the subscriber's Close (its last message)
	// TailUnknown: that Close could name no tail (Tail 0 is not "none").
	TailUnknown bool         `json:"tail_unknown"`
	Rate        float64      `json:"rate"`
	Negative    uint64       `json:"negative"`  // clamped latencies since the dashboard started
	Saturated   uint64       `json:"saturated"` // idem
	Intervals   uint64       `json:"intervals"`
	LastEnd     int64        `json:"last_end"` // Unix ms
	IntervalMs  int64        `json:"interval_ms"`
	Last        Percentiles  `json:"last"`       // the last interval
	Total       Percentiles  `json:"total"`      // merged since the dashboard started
	Curve       []CurvePoint `json:"curve"`      // of Total
	LastCurve   []CurvePoint `json:"last_curve"` // of Last
	Points      []Point      `json:"points,omitempty"`
}

// series is the store's state for one topic and subscriber.
type series struct {
	view    SeriesView
	last    *hdrhistogram.Histogram
	total   *hdrhistogram.Histogram
	start   time.Time // first interval's start, for the hlog
	lastEnd time.Time
	seen    time.Time // when its last message arrived
	hlog    *hlogFile
}

// store holds every series; safe for concurrent use.
type store struct {
	log       zerolog.Logger
	history   time.Duration
	maxSeries int
	hlogDir   string
	onUpdate  func(key string) // called without the lock held

	mu       sync.Mutex
	series   map[string]*series
	accepted uint64
	rejected map[string]uint64
	logged   map[string]bool
	closed   bool
}

func newStore(log zerolog.Logger, history time.Duration, maxSeries int, hlogDir string) *store {
	return &store{
		log: log, history: history, maxSeries: maxSeries, hlogDir: hlogDir,
		series: map[string]*series{}, rejected: map[string]uint64{}, logged: map[string]bool{},
	}
}

func seriesKey(topic, subscriber string) string { return topic + "/" + subscriber }

// reject counts a rejected message and logs the first of each kind.
func (s *store) reject(reason, subject string, err error) { s.rejectN(reason, subject, 1, err) }

func (s *store) rejectN(reason, subject string, n uint64, err error) {
	s.mu.Lock()
	s.rejected[reason] += n
	first := !s.logged[reason]
	s.logged[reason] = true
	s.mu.Unlock()
	if first {
		s.log.Warn().Err(err).Str("subject", subject).Str("reason", reason).
			Msg("stats message ignored; further ones of this kind are counted in tickbus_dash_rejected_total, not logged")
	}
}

func reasonOf(err error) string {
	switch {
	case errors.Is(err, stats.ErrTooLarge):
		return reasonTooLarge
	case errors.Is(err, stats.ErrVersion):
		return reasonVersion
	case errors.Is(err, stats.ErrHistogram):
		return reasonHistogram
	case errors.Is(err, stats.ErrInvalid):
		return reasonInvalid
	default:
		return reasonMalformed
	}
}

// handle decodes and applies one message off the wire.
func (s *store) handle(subject string, data []byte) {
	m, err := stats.Decode(data)
	if err != nil {
		s.reject(reasonOf(err), subject, err)
		return
	}
	if reason, err := s.apply(m); err != nil {
		s.reject(reason, subject, err)
		return
	}
	if s.onUpdate != nil {
		s.onUpdate(seriesKey(m.Topic, m.Subscriber))
	}
}

// apply adds a decoded message to its series.
func (s *store) apply(m *stats.Message) (string, error) {
	h, err := m.LatencyHistogram()
	if err != nil {
		return reasonHistogram, err
	}
	key := seriesKey(m.Topic, m.Subscriber)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return reasonDropped, ErrClosed
	}
	se := s.series[key]
	if se == nil {
		if len(s.series) >= s.maxSeries && !s.evictStale(time.Now()) {
			return reasonSeries, fmt.Errorf("dash: %d series already, the limit, none silent for %v: %s ignored",
				len(s.series), s.history, key)
		}
		se = &series{total: stats.NewHistogram(), start: m.Start}
		se.view.Key, se.view.Topic, se.view.Subscriber = key, m.Topic, m.Subscriber
		s.series[key] = se
		if s.hlogDir != "" {
			f, err := openHlog(s.hlogDir, m.Topic, m.Subscriber, m.Start)
			if err != nil {
				s.log.Error().Err(err).Str("series", key).Msg("hlog not written for this series")
			} else {
				se.hlog = f
			}
		}
	} else if !m.End.After(se.lastEnd) {
		return reasonOutOfOrder, fmt.Errorf("dash: %s interval ending %v is not after the last one (%v)",
			key, m.End, se.lastEnd)
	}
	se.lastEnd = m.End
	se.seen = time.Now()
	v := &se.view
	v.Host, v.Provider, v.CrossHost = m.Host, m.Provider, m.CrossHost
	v.Received, v.Gaps, v.Overruns, v.Tail, v.Rate = m.Received, m.Gaps, m.Overruns, m.Tail, m.Rate
	v.TailUnknown = m.TailUnknown
	v.Negative += m.Negative
	v.Saturated += m.Saturated
	v.Intervals++
	v.LastEnd = m.End.UnixMilli()
	v.IntervalMs = m.End.Sub(m.Start).Milliseconds()
	se.last = h
	se.total.Merge(h)
	v.Last = percentilesOf(h)
	v.Total = percentilesOf(se.total)
	v.Curve = curveOf(se.total)
	v.LastCurve = curveOf(h)
	v.Points = append(v.Points, Point{T: v.LastEnd, N: v.Last.Count, P50: v.Last.P50, P99: v.Last.P99,
		P999: v.Last.P999, Max: v.Last.Max, Rate: m.Rate})
	cut := 0
	for cut < len(v.Points) && (len(v.Points)-cut > maxPoints || v.LastEnd-v.Points[cut].T > s.history.Milliseconds()) {
		cut++
	}
	if cut > 0 {
		v.Points = append(v.Points[:0], v.Points[cut:]...)
	}
	s.accepted++
	if se.hlog != nil {
		if err := se.hlog.write(h, m.Start, m.End); err != nil {
			s.log.Error().Err(err).Str("series", key).Msg("hlog write failed; no more intervals go to this file")
			_ = se.hlog.close()
			se.hlog = nil
		}
	}
	return "", nil
}

// evictStale drops the series silent for longest if it has been silent for
// longer than the history (a subscriber that went away), to make room for a
// new one. Caller holds s.mu.
func (s *store) evictStale(now time.Time) bool {
	var oldest *series
	for _, se := range s.series {
		if oldest == nil || se.seen.Before(oldest.seen) {
			oldest = se
		}
	}
	if oldest == nil || now.Sub(oldest.seen) <= s.history {
		return false
	}
	if oldest.hlog != nil {
		if err := oldest.hlog.close(); err != nil {
			s.log.Error().Err(err).Str("series", oldest.view.Key).Msg("hlog close")
		}
	}
	delete(s.series, oldest.view.Key)
	s.log.Info().Str("series", oldest.view.Key).Dur("silent", now.Sub(oldest.seen)).Msg("series dropped to make room")
	return true
}

// views returns copies of every series, sorted by topic and subscriber;
// with points only if withPoints.
func (s *store) views(withPoints bool) []SeriesView {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SeriesView, 0, len(s.series))
	for _, se := range s.series {
		out = append(out, se.copyView(withPoints))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Subscriber < out[j].Subscriber
	})
	return out
}

// viewSince returns one series with the points after since (Unix ms).
func (s *store) viewSince(key string, since int64) (SeriesView, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.series[key]
	if se == nil {
		return SeriesView{}, false
	}
	v := se.copyView(false)
	pts := se.view.Points
	i := sort.Search(len(pts), func(i int) bool { return pts[i].T > since })
	v.Points = append([]Point(nil), pts[i:]...)
	return v, true
}

func (se *series) copyView(withPoints bool) SeriesView {
	v := se.view
	v.Points = nil
	if withPoints {
		v.Points = append([]Point(nil), se.view.Points...)
	}
	// Curves are replaced, never modified in place, so sharing them is safe.
	return v
}

// counts returns the accepted total and a copy of the rejected counts.
func (s *store) counts() (uint64, map[string]uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := make(map[string]uint64, len(s.rejected))
	for k, v := range s.rejected {
		r[k] = v
	}
	return s.accepted, r
}

// close closes every hlog file.
func (s *store) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	for _, se := range s.series {
		if se.hlog != nil {
			errs = append(errs, se.hlog.close())
			se.hlog = nil
		}
	}
	return errors.Join(errs...)
}
