package ring

import "errors"

// Sentinel errors. Test them with errors.Is. Errors returned on the hot path
// (Publish, PublishBatch, PublishAt, Poll) are these values themselves, never
// wrapped, so returning them allocates nothing.
var (
	// ErrInvalidConfig: a configuration field is out of range; the message
	// names the field, the value and what was expected.
	ErrInvalidConfig = errors.New("ring: invalid configuration")
	// ErrMalformed: a descriptor's bytes are short, long or out of range.
	ErrMalformed = errors.New("ring: malformed descriptor")
	// ErrUnknownVersion: a descriptor of a version this build does not read.
	ErrUnknownVersion = errors.New("ring: unknown descriptor version")
	// ErrPayloadTooLarge: the payload does not fit the slot. Nothing was
	// claimed or written.
	ErrPayloadTooLarge = errors.New("ring: payload larger than the slot")
	// ErrBatchTooLarge: a batch of more ticks than WriterConfig.MaxBatch.
	// Nothing was claimed or written.
	ErrBatchTooLarge = errors.New("ring: batch larger than MaxBatch")
	// ErrLost: PublishAt found the sequence already taken: the other line of
	// an A/B pair published it first. Nothing was written; drop the copy.
	ErrLost = errors.New("ring: sequence already published by another publisher (lost the arbitration)")
	// ErrBackPressure: a reliable subscriber had no room before
	// WriterConfig.Timeout. If it is returned with seq == 0 nothing was
	// claimed; with seq > 0 the sequence was claimed and written to the
	// journal and to every target that had room, and the subscribers without
	// room will report it as a gap unless they recover it from the journal.
	ErrBackPressure = errors.New("ring: reliable subscriber has no room (publish timed out)")
	// ErrTimeout: the home did not answer a claim before WriterConfig.Timeout.
	ErrTimeout = errors.New("ring: timed out waiting for a completion")
	// ErrHomeFailed: the queue pair to the topic's home failed; the writer
	// cannot claim any more sequences.
	ErrHomeFailed = errors.New("ring: queue pair to the home failed")
	// ErrFenced: the claim reached the writer's limit (SetLimit): the
	// sequences lie outside what the topic's home reserved, or the writer
	// learnt that its home's epoch ended. Nothing was written. Retryable:
	// find the topic's home again and publish through a new writer.
	ErrFenced = errors.New("ring: claim outside the home's reservation (fenced; find the home again)")
	// ErrClosed: the writer, reader, ring or home was closed.
	ErrClosed = errors.New("ring: closed")
	// ErrTargetExists: AddTarget with an id already in use.
	ErrTargetExists = errors.New("ring: target id already added")
	// ErrNoTarget: RemoveTarget with an unknown id.
	ErrNoTarget = errors.New("ring: no such target")
	// ErrNoCreditCell: every credit cell of the writer is in use.
	ErrNoCreditCell = errors.New("ring: no free credit cell (raise WriterConfig.MaxTargets)")
	// ErrShortBuffer: ReadInto's buffer is smaller than the tick's payload.
	// The tick stays unread.
	ErrShortBuffer = errors.New("ring: buffer too small for the payload")
	// ErrDeviceAtomics: the device has no remote atomics and cannot host a
	// topic's counter.
	ErrDeviceAtomics = errors.New("ring: device has no remote atomics")
)

// ErrInvalidSequence: PublishAt with sequence 0, past 2^64-3, or more than
// MaxSkip ahead of the topic's counter. Nothing was written.
var ErrInvalidSequence = errors.New("ring: invalid sequence for PublishAt")
