package dash

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tickbus/tickbus/stats"
)

// hlogFile is one series' HdrHistogram interval log (format 1.3): a version
// comment, StartTime and BaseTime lines, the legend, then one line per
// interval with its start relative to BaseTime, its length, its max in
// milliseconds and the V2 compressed histogram of nanoseconds.
type hlogFile struct {
	f *os.File
	w *hdrhistogram.HistogramLogWriter
}

// hlogName is the file for a series: <topic>.<subscriber>.hlog with every
// byte other than letters, digits, '-' and '_' made '_'. An existing file
// is never overwritten: the name gets -1, -2, ... instead.
func openHlog(dir, topic, subscriber string, start time.Time) (*hlogFile, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("dash: hlog dir: %w", err)
	}
	base := stats.Token(topic) + "." + stats.Token(subscriber)
	var f *os.File
	var err error
	for i := 0; i < 1000; i++ {
		name := base + ".hlog"
		if i > 0 {
			name = fmt.Sprintf("%s-%d.hlog", base, i)
		}
		f, err = os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil || !errors.Is(err, os.ErrExist) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("dash: hlog file: %w", err)
	}
	h := &hlogFile{f: f, w: hdrhistogram.NewHistogramLogWriter(f)}
	// Whole seconds: the BaseTime line holds seconds, and readers add the
	// interval's relative start to it.
	ms := start.Unix() * 1000
	h.w.SetBaseTime(ms)
	err = errors.Join(
		h.w.OutputLogFormatVersion(),
		h.w.OutputComment(fmt.Sprintf("[tickbus latency in ns: topic %q subscriber %q]", topic, subscriber)),
		h.w.OutputStartTime(ms),
		h.w.OutputBaseTime(ms),
		h.w.OutputLegend(),
	)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("dash: hlog header: %w", err)
	}
	return h, nil
}

func (h *hlogFile) write(hist *hdrhistogram.Histogram, start, end time.Time) error {
	hist.SetStartTimeMs(start.UnixMilli())
	hist.SetEndTimeMs(end.UnixMilli())
	return h.w.OutputIntervalHistogram(hist)
}

func (h *hlogFile) close() error { return h.f.Close() }
