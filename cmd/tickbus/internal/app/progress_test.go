package app

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tickbus/tickbus/feed"
)

func TestProgressBar_PercentRateAndTimeLeft(t *testing.T) {
	var b strings.Builder
	p := &progressBar{w: &b, total: 4 << 20}
	p.update(feed.Result{Bytes: 1 << 20, Messages: 2_500_000, Elapsed: 2 * time.Second})
	p.end()
	out := b.String()
	assert.True(t, strings.HasPrefix(out, "\r[#######......................."), out)
	assert.Contains(t, out, " 25.0% ")
	assert.Contains(t, out, "2.50M msgs 1.25M msg/s")
	assert.Contains(t, out, "6s left")
	assert.True(t, strings.HasSuffix(out, "\n"))

	var none strings.Builder
	(&progressBar{w: &none}).end()
	assert.Empty(t, none.String(), "nothing drawn, nothing to end")
}
