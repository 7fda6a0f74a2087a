package bench

import (
	"encoding/json"
	"fmt"
	"os"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Result is one case's figures, as written to the JSON file. A figure the
// case does not have (a case that could not run, the jitter probe's
// throughput) is null, and Note says why.
type Result struct {
	Case string `json:"case"`
	// Mode is "one-way" or "round-trip" (ping-pong).
	Mode string `json:"mode"`

	P50     *int64 `json:"p50_ns"`
	P90     *int64 `json:"p90_ns"`
	P99     *int64 `json:"p99_ns"`
	P999    *int64 `json:"p999_ns"`
	P9999   *int64 `json:"p9999_ns"`
	Max     *int64 `json:"max_ns"`
	Samples int64  `json:"samples"`

	Throughput        *float64 `json:"throughput_per_s"`
	BatchedThroughput *float64 `json:"batched_throughput_per_s"`
	CPUPerMillion     *float64 `json:"cpu_s_per_million"`

	// Lost counts sequences a subscriber never saw, over all runs.
	Lost int64 `json:"lost"`
	// Unsent counts paced ticks the publisher had not sent when the
	// latency run stopped (it fell behind the rate); each is in the
	// percentiles as a lower bound.
	Unsent int64 `json:"unsent"`
	// Cores is the most hot threads (or processes) a run of the case used.
	Cores int `json:"cores"`
	// Ratio is each figure divided by tickbus-shm's (null where either is
	// missing).
	Ratio map[string]*float64 `json:"ratio_to_tickbus_shm"`
	Note  string              `json:"note,omitempty"`

	hist           *hdrhistogram.Histogram
	startMs, endMs int64 // wall clock around the latency run, for the hlog
}

func (r *Result) addNote(s string) {
	if r.Note != "" {
		r.Note += "; "
	}
	r.Note += s
}

func i64(v int64) *int64     { return &v }
func f64(v float64) *float64 { return &v }

// setLatency fills the percentiles from h.
func (r *Result) setLatency(h *hdrhistogram.Histogram) {
	r.hist = h
	r.Samples = h.TotalCount()
	r.P50 = i64(h.ValueAtQuantile(50))
	r.P90 = i64(h.ValueAtQuantile(90))
	r.P99 = i64(h.ValueAtQuantile(99))
	r.P999 = i64(h.ValueAtQuantile(99.9))
	r.P9999 = i64(h.ValueAtQuantile(99.99))
	r.Max = i64(h.Max())
}

// figures names each ratio-able figure and reads it.
var figures = []struct {
	key string
	get func(*Result) *float64
}{
	{"p50_ns", func(r *Result) *float64 { return asF(r.P50) }},
	{"p90_ns", func(r *Result) *float64 { return asF(r.P90) }},
	{"p99_ns", func(r *Result) *float64 { return asF(r.P99) }},
	{"p999_ns", func(r *Result) *float64 { return asF(r.P999) }},
	{"p9999_ns", func(r *Result) *float64 { return asF(r.P9999) }},
	{"max_ns", func(r *Result) *float64 { return asF(r.Max) }},
	{"throughput_per_s", func(r *Result) *float64 { return r.Throughput }},
	{"batched_throughput_per_s", func(r *Result) *float64 { return r.BatchedThroughput }},
	{"cpu_s_per_million", func(r *Result) *float64 { return r.CPUPerMillion }},
}

func asF(v *int64) *float64 {
	if v == nil {
		return nil
	}
	return f64(float64(*v))
}

// setRatios divides each result's figures by the reference's.
func setRatios(results []*Result, ref *Result) {
	for _, r := range results {
		r.Ratio = make(map[string]*float64, len(figures))
		for _, f := range figures {
			r.Ratio[f.key] = nil
			if ref == nil {
				continue
			}
			a, b := f.get(r), f.get(ref)
			if a != nil && b != nil && *b != 0 {
				r.Ratio[f.key] = f64(*a / *b)
			}
		}
	}
}

// writeJSON writes the results, one object per case, as a JSON array.
func writeJSON(path string, results []*Result) error {
	b, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encode results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("bench: write %s: %w", path, err)
	}
	return nil
}
