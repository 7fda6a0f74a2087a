package stats

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSubject_SanitisesTokens(t *testing.T) {
	assert.Equal(t, "tickbus.stats.md.AAPL.engine-1", Subject("", "md.AAPL", "engine-1"), "a dotted topic keeps its tokens")
	assert.NotEqual(t, Subject("", "md.AAPL", "e"), Subject("", "md_AAPL", "e"))
	assert.NotEqual(t, Subject("", "a:b", "e"), Subject("", "a_b", "e"))
	assert.Equal(t, "prod.tickbus.stats.a_b_c.__", Subject("prod.tickbus", "a*b>c", " \t"))
	assert.Equal(t, "x.stats._._", Subject("x", "", ""))
	assert.Equal(t, "x.stats.caf__", Subject("x", "café", "")[:len("x.stats.caf__")])
	assert.Equal(t, "tickbus.stats.>", SubjectAll(""))
	assert.Equal(t, "a_b.stats.>", SubjectAll("a b"))
}
