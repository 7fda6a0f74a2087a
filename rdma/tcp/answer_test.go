package tcp

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A reqAckNow request is answered when the input runs dry, or once
// ackNowBytes of input came since the last answer while it never does;
// other unanswered requests wait for a signalled one, the input running
// dry, or ackDelay.
func TestResponder_AnswerDue(t *testing.T) {
	var s responder
	assert.False(t, s.answerDue(0, 0), "nothing owed")
	s.ackUpto = 7
	assert.False(t, s.answerDue(0, 0), "unsignalled: answered after ackDelay, not when the input runs dry")
	s.now = true
	assert.False(t, s.answerDue(4096, 0), "ack-now with input buffered and little read since the last answer")
	assert.True(t, s.answerDue(0, 0), "ack-now when the input runs dry")
	s.since = ackNowBytes
	assert.True(t, s.answerDue(4096, 0), "ack-now after ackNowBytes of input, though more is buffered")
	s.now, s.since = false, 0
	s.wanted = true
	assert.False(t, s.answerDue(4096, 0), "signalled: when the input runs dry")
	assert.True(t, s.answerDue(0, 0))
	s.wanted = false
	assert.True(t, s.answerDue(0, 24), "a written answer (READ, atomic, NAK) goes out when the input runs dry")
}
