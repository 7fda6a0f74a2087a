// Package release has Store64, a 64-bit store with release semantics and no
// more: the publishing half of a hand-off (a stamp, a queue slot's sequence,
// a counter that only frees room) whose reader uses a sync/atomic load.
//
// sync/atomic's Store is sequentially consistent, which on amd64 is an
// XCHG: a full fence that also drains the store buffer before later loads.
// A hand-off needs only that every earlier load and store be visible before
// the word is, which x86-TSO gives any plain MOV. Store64 is that MOV on
// amd64 (an assembly function, so the compiler cannot move Go stores across
// it either) and sync/atomic's Store elsewhere and under the race detector,
// which cannot see an assembly store and would miss the happens-before it
// carries.
//
// Not for Dekker-style handshakes (store my flag, then load yours): a later
// load of the storing goroutine may be satisfied before the store is
// visible to others.
package release
