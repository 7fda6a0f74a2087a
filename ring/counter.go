package ring

import (
	"sync/atomic"
	"unsafe"

	"github.com/tickbus/tickbus/internal/release"
)

// addOwn adds n to a word only the calling goroutine writes (a writer's
// published count, a reader's delivered count and head): a load and a
// release store (release.Store64, a plain MOV on amd64) instead of a
// LOCK XADD. Other goroutines read it with an atomic Load, which pairs with
// the store; a second writer would lose updates, so never use it for a
// word two goroutines write.
func addOwn(a *atomic.Uint64, n uint64) { release.Store64(word(a), a.Load()+n) }

// storeOwn stores v in a word only the calling goroutine writes, with
// release semantics (see addOwn).
func storeOwn(a *atomic.Uint64, v uint64) { release.Store64(word(a), v) }

// word is the 64-bit word of an atomic.Uint64.
func word(a *atomic.Uint64) *uint64 { return (*uint64)(unsafe.Pointer(a)) }

// atomic.Uint64 must be one bare uint64 for word: both lines fail to
// compile otherwise.
var (
	_ [unsafe.Sizeof(atomic.Uint64{}) - 8]byte
	_ [8 - unsafe.Sizeof(atomic.Uint64{})]byte
)
