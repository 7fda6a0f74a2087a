package app

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tickbus/tickbus/feed"
)

// progressMin is the file size above which a replay draws a progress bar.
const progressMin = 1 << 20

// progressBar draws a one-line bar on stderr (carriage return, no
// terminal library): percent of the file, messages per second, time left.
type progressBar struct {
	w     io.Writer
	total int64 // file size in bytes
	drawn bool
}

func (p *progressBar) update(r feed.Result) {
	if p.total <= 0 {
		return
	}
	frac := min(float64(r.Bytes)/float64(p.total), 1)
	const width = 30
	full := int(frac * width)
	left := "?"
	if r.Bytes > 0 && r.Elapsed > 0 {
		rem := time.Duration(float64(r.Elapsed) * (float64(p.total-r.Bytes) / float64(r.Bytes)))
		left = rem.Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "\r[%s%s] %5.1f%% %s msgs %s msg/s, %s left ", strings.Repeat("#", full), strings.Repeat(".", width-full),
		100*frac, si(float64(r.Messages)), si(r.Rate()), left)
	p.drawn = true
}

func (p *progressBar) end() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}

// si formats n with k, M or G.
func si(n float64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fG", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fk", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}
