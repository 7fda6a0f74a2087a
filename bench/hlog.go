package bench

import (
	"errors"
	"fmt"
	"os"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// writeHlog writes r's latency histogram as a standard HdrHistogram
// interval log (values in ns), one interval covering the run.
func writeHlog(path string, r *Result) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: hlog: %w", err)
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	lw := hdrhistogram.NewHistogramLogWriter(f)
	h := r.hist.Clone()
	h.SetTag(r.Case)
	h.SetStartTimeMs(r.startMs)
	h.SetEndTimeMs(r.endMs)
	lw.SetBaseTime(r.startMs)
	for _, step := range []func() error{
		func() error {
			return lw.OutputComment(fmt.Sprintf("tickbus bench %s, %s latency in ns", r.Case, r.Mode))
		},
		lw.OutputLogFormatVersion,
		func() error { return lw.OutputStartTime(r.startMs) },
		lw.OutputLegend,
		func() error { return lw.OutputIntervalHistogram(h) },
	} {
		if err := step(); err != nil {
			return fmt.Errorf("bench: hlog %s: %w", path, err)
		}
	}
	return nil
}
