package bus

import (
	"errors"
	"sync"
	"time"
)

// rateLog lets one log line through per key per interval and counts what it
// held back, so bad input cannot become a log storm.
type rateLog struct {
	every time.Duration

	mu      sync.Mutex
	last    map[string]time.Time
	dropped map[string]int
}

func newRateLog(every time.Duration) *rateLog {
	return &rateLog{every: every, last: map[string]time.Time{}, dropped: map[string]int{}}
}

// allow reports whether a line for key may be logged now and how many were
// held back since the last one.
func (r *rateLog) allow(key string, now time.Time) (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.last[key]; ok && now.Sub(t) < r.every {
		r.dropped[key]++
		return false, 0
	}
	if len(r.last) > 4096 { // keys are bounded by kinds × classes; guard anyway
		clear(r.last)
	}
	r.last[key] = now
	n := r.dropped[key]
	delete(r.dropped, key)
	return true, n
}

// errClass names the sentinel an error wraps, for log keys and stats.
func errClass(err error) string {
	switch {
	case errors.Is(err, ErrTooLarge):
		return "too-large"
	case errors.Is(err, ErrUnknownVersion):
		return "unknown-version"
	case errors.Is(err, ErrUnauthenticated):
		return "unauthenticated"
	case errors.Is(err, ErrReplayed):
		return "replayed"
	case errors.Is(err, ErrIdentity):
		return "identity"
	case errors.Is(err, ErrForbidden):
		return "forbidden"
	case errors.Is(err, ErrRejected):
		return "rejected"
	case errors.Is(err, ErrMalformed):
		return "malformed"
	}
	return "other"
}
