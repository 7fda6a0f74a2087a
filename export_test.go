package tickbus

// Wrap and PubErr are the error mappings, for the table test of every
// error of the packages below.
var (
	Wrap   = wrap
	PubErr = pubErr
)
