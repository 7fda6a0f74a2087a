package stats

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSubject_SanitisesTokens(t *testing.T) {
	assert.Equal(t, "tickbus.stats.md_AAPL.engine-1", Subject("", "md.AAPL", "engine-1"))
	assert.Equal(t, "prod.tickbus.stats.a_b_c.__", Subject("prod.tickbus", "a*b>c", " \t"))
	assert.Equal(t, "x.stats._._", Subject("x", "", ""))
	assert.Equal(t, "x.stats.caf__", Subject("x", "café", "")[:len("x.stats.caf__")])
	assert.Equal(t, "tickbus.stats.>", SubjectAll(""))
	assert.Equal(t, "a_b.stats.>", SubjectAll("a b"))
}
