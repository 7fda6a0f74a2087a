package tickbus

import "time"

// Wrap and PubErr are the error mappings, for the table test of every
// error of the packages below.
var (
	Wrap   = wrap
	PubErr = pubErr
)

// UnheardHold is the hold the client's bus node uses.
func UnheardHold(c *Client) time.Duration { return c.node.UnheardHold() }
