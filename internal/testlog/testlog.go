// Package testlog holds the log sinks tests share: a buffer several
// goroutines write, and a zerolog logger whose lines a test prints only
// when it fails (so a failure under load says what the control paths did).
package testlog

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

// Buf is a log sink safe from any goroutine.
type Buf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Count is how many times s is in what was written.
func (l *Buf) Count(s string) int { return strings.Count(l.String(), s) }

// OnFailure returns a logger of info and above whose lines t prints if it
// fails, and only then.
func OnFailure(t testing.TB) *zerolog.Logger {
	l := &Buf{}
	lg := zerolog.New(l).With().Timestamp().Logger().Level(zerolog.InfoLevel)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", l.String())
		}
	})
	return &lg
}
