package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// ErrBadReport: a child process's report line could not be decoded.
var ErrBadReport = errors.New("bench: malformed child report")

// report is one line a child writes on stdout, as JSON: first a ready line
// (Ready set, Info carrying what the parent needs, e.g. a server URL), at
// the end a done line with its figures. It crosses a process boundary, so
// decodeReport checks everything.
type report struct {
	Ready   bool   `json:"ready,omitempty"`
	Done    bool   `json:"done,omitempty"`
	Info    string `json:"info,omitempty"`
	Count   int64  `json:"count"`
	Sent    int64  `json:"sent"`
	Unsent  int64  `json:"unsent"`
	Lost    int64  `json:"lost"`
	StartNs int64  `json:"start_ns"`
	LastNs  int64  `json:"last_ns"`
	CPUNs   int64  `json:"cpu_ns"`         // the process's user+system time over its run loop
	Hist    string `json:"hist,omitempty"` // HdrHistogram V2 compressed, base64
	Err     string `json:"err,omitempty"`

	hist *hdrhistogram.Histogram
}

const maxReportLine = 4 << 20

// decodeReport parses one report line and its histogram, if any.
func decodeReport(line []byte) (report, error) {
	var r report
	if len(line) > maxReportLine {
		return r, fmt.Errorf("%w: %d bytes, want at most %d", ErrBadReport, len(line), maxReportLine)
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return report{}, fmt.Errorf("%w: %v", ErrBadReport, err)
	}
	if r.Ready == r.Done {
		return report{}, fmt.Errorf("%w: want exactly one of ready and done", ErrBadReport)
	}
	if r.Count < 0 || r.Sent < 0 || r.Unsent < 0 || r.Lost < 0 || r.CPUNs < 0 {
		return report{}, fmt.Errorf("%w: negative count (count %d, sent %d, lost %d)", ErrBadReport, r.Count, r.Sent, r.Lost)
	}
	if r.Hist != "" {
		h, err := hdrhistogram.Decode([]byte(r.Hist))
		if err != nil {
			return report{}, fmt.Errorf("%w: histogram: %v", ErrBadReport, err)
		}
		r.hist = h
	}
	return r, nil
}

// writeReport writes r as one line.
func writeReport(w io.Writer, r report) error {
	if r.hist != nil && r.hist.TotalCount() > 0 {
		enc, err := r.hist.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
		if err != nil {
			return fmt.Errorf("bench: encode histogram: %w", err)
		}
		r.Hist = string(enc)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("bench: encode report: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
