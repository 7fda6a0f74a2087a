// Package membarrier is an asymmetric memory barrier: Fence makes every
// thread of this process run a full barrier (Linux membarrier(2),
// MEMBARRIER_CMD_PRIVATE_EXPEDITED), so a hot path can hand off with plain
// stores and loads (no locked instruction) while a rare control path pays
// the syscall. The classic use is a Dekker-style handshake: the hot side
// stores its flag and then loads the other's with no fence between; the
// control side stores its flag, calls Fence, then loads the hot side's
// flag. Either the hot side sees the control side's flag, or the control
// side sees the hot side's.
package membarrier
