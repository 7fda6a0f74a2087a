package ring

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A writer without room by a target's credit cell READs the ring's head
// only once the cell has stood still for creditIdle (over tcp the READ
// waits behind every WRITE in flight); a cell that moves puts the READ off
// again, and a READ is followed by another creditIdle of waiting. A mapped
// head is a load: read at once.
func TestTarget_HeadDue_ReadsOnlyAfterTheCellStoodStill(t *testing.T) {
	var cell creditCell
	tg := &target{cell: &cell}
	cell.Next.Store(10)
	assert.False(t, tg.headDue(), "the cell moved (0 -> 10): wait for the next credit")
	assert.False(t, tg.headDue(), "still within creditIdle")

	tg.cellAt = monoNs() - creditIdle // the cell stood still for creditIdle
	assert.True(t, tg.headDue(), "no credit for creditIdle: READ the head")
	assert.False(t, tg.headDue(), "just READ: another creditIdle first")

	tg.cellAt = monoNs() - creditIdle
	cell.Next.Store(20)
	assert.False(t, tg.headDue(), "a credit came: no READ, however long ago the last change")

	var h uint64
	mapped := &target{cell: &cell, dhead: &h}
	assert.True(t, mapped.headDue(), "a mapped head costs a load: at once")
}
