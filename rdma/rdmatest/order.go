package rdmatest

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

var orderTests = []test{
	{"PayloadThenStamp_ReaderNeverSeesStampFirst", testPayloadThenStamp},
}

// Layout of the stamp test in the target region: the stamp word at 0, the
// payload words from 64.
const (
	stampOff     = 0
	payloadOff   = 64
	payloadWords = 6
	// seenOff: where a reader in another process publishes the last stamp
	// it checked, for the writer to READ (see readerPace).
	seenOff = 256
)

// readerPace returns a pace function for writeStamps that READs the word a
// reader in another process publishes at seenOff of rr (through qp, into
// 8 bytes of local at off) until it reaches k.
func readerPace(qp rdma.QueuePair, cq rdma.CompletionQueue, local rdma.MemoryRegion, off int, rr rdma.RemoteRegion) func(uint64) error {
	return func(k uint64) error {
		const readID = 1 << 63
		wr := rdma.WorkRequest{ID: readID, Op: rdma.OpRead, Flags: rdma.FlagSignaled, Local: rdma.LocalSGE(local, off, 8),
			Remote: rdma.RemoteAddr{Addr: rr.Addr + seenOff, RKey: rr.RKey}}
		buf := make([]rdma.Completion, 16)
		var idle rdma.Yield
		for deadline := time.Now().Add(opTimeout); ; {
			if time.Now().After(deadline) {
				return fmt.Errorf("rdmatest: reader in the other process stuck before stamp %d", k)
			}
			err := qp.PostSend(&wr)
			if err != nil && !errors.Is(err, rdma.ErrSendQueueFull) {
				return err
			}
			// Reap until our READ completes (or, if the queue was full,
			// until something completes), checking the writes' statuses.
			for done := false; !done; {
				if time.Now().After(deadline) {
					return fmt.Errorf("rdmatest: no completion for the progress READ")
				}
				n := cq.Poll(buf)
				for _, c := range buf[:n] {
					if c.Status != rdma.StatusSuccess {
						return fmt.Errorf("rdmatest: %s (id %d) completed with %s", c.Op, c.ID, c.Status)
					}
					done = done || c.ID == readID || err != nil
				}
				idle.Idle(n)
			}
			if err == nil && u64(local.Bytes()[off:]) >= k {
				return nil
			}
		}
	}
}

func stampRounds() int {
	if testing.Short() {
		return 2000
	}
	return 20000
}

// writeStamps writes rounds of (payload of words = k, then stamp = k) for
// k = 1..rounds, both inline, on one QP, signalling every 16th, polling
// cq when the send queue is full. If pace is not nil it is called after
// every 256th round (the in-process test waits there for its reader). Safe
// in any goroutine.
func writeStamps(qp rdma.QueuePair, cq rdma.CompletionQueue, rr rdma.RemoteRegion, rounds int, pace func(k uint64) error) error {
	var payload [payloadWords * 8]byte
	var stamp [8]byte
	pay := rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline, Remote: rdma.RemoteAddr{Addr: rr.Addr + payloadOff, RKey: rr.RKey}}
	st := rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline, Remote: rdma.RemoteAddr{Addr: rr.Addr + stampOff, RKey: rr.RKey}}
	buf := make([]rdma.Completion, 32)
	var idle rdma.Yield
	post := func(wr *rdma.WorkRequest) error {
		for spins := 0; ; spins++ {
			err := qp.PostSend(wr)
			if !errors.Is(err, rdma.ErrSendQueueFull) {
				return err
			}
			n := cq.Poll(buf)
			for _, c := range buf[:n] {
				if c.Status != rdma.StatusSuccess {
					return fmt.Errorf("rdmatest: stamp write completed with %s", c.Status)
				}
			}
			if spins > 1e7 {
				return errors.New("rdmatest: send queue stayed full")
			}
			idle.Idle(n)
		}
	}
	for k := uint64(1); k <= uint64(rounds); k++ {
		// Pace the rounds a little and let a reader in this process run,
		// so the reader sees many stamps, not just the last.
		for t0 := time.Now(); time.Since(t0) < time.Microsecond; {
		}
		if k%32 == 0 {
			runtime.Gosched()
		}
		for w := range payloadWords {
			putU64(payload[w*8:], k)
		}
		putU64(stamp[:], k)
		pay.Inline, st.Inline = payload[:], stamp[:]
		st.Flags = rdma.FlagInline
		if k%16 == 0 || k == uint64(rounds) {
			st.Flags |= rdma.FlagSignaled
		}
		st.ID, pay.ID = k, k
		if err := post(&pay); err != nil {
			return err
		}
		if err := post(&st); err != nil {
			return err
		}
		if pace != nil && k%256 == 0 && k < uint64(rounds) {
			if err := pace(k); err != nil {
				return err
			}
		}
	}
	// Drain the last signalled completion.
	_, err := pollN(cq, 1, opTimeout)
	return err
}

// readStamps spins on the stamp word of mem with atomic loads until it
// reads final, and checks each time that every payload word (atomic loads)
// is at least the stamp: the payload of round k was written before stamp k.
// It reports each stamp it checked to seen (if not nil) and returns how
// many stamps it checked.
func readStamps(mem []byte, final uint64, seen func(uint64)) (int, error) {
	stamp := (*uint64)(unsafe.Pointer(&mem[stampOff]))
	var words [payloadWords]*uint64
	for w := range words {
		words[w] = (*uint64)(unsafe.Pointer(&mem[payloadOff+8*w]))
	}
	var idle rdma.Yield
	checked, last := 0, uint64(0)
	for spins := 0; ; spins++ {
		s := atomic.LoadUint64(stamp) // pairs with the provider's atomic 8-byte store
		if s != last {
			if s < last {
				return checked, fmt.Errorf("rdmatest: stamp went back from %d to %d", last, s)
			}
			for w, p := range words {
				if v := atomic.LoadUint64(p); v < s {
					return checked, fmt.Errorf("rdmatest: stamp %d visible before its payload (word %d = %d)", s, w, v)
				}
			}
			checked++
			last = s
			spins = 0
			if seen != nil {
				seen(s)
			}
		}
		if s == final {
			return checked, nil
		}
		if spins > 5e7 {
			return checked, fmt.Errorf("rdmatest: stamp stuck at %d of %d", s, final)
		}
		idle.Idle(0)
	}
}

func testPayloadThenStamp(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{sendDepth: 64})
	clear(x.target.Bytes())
	rounds := stampRounds()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	var seen atomic.Uint64
	go func() {
		n, err := readStamps(x.target.Bytes(), uint64(rounds), seen.Store)
		done <- result{n, err}
	}()
	// Every 256 rounds the writer waits until the reader has checked the
	// latest stamp, so the reader checks interleaved stamps however the
	// machine schedules the two.
	pace := func(k uint64) error {
		var idle rdma.Yield
		for deadline := time.Now().Add(opTimeout); seen.Load() < k; idle.Idle(0) {
			if time.Now().After(deadline) {
				return fmt.Errorf("rdmatest: reader stuck at stamp %d, writer at %d", seen.Load(), k)
			}
		}
		return nil
	}
	err := writeStamps(x.a, x.cqA, x.target.Remote(), rounds, pace)
	r := <-done
	require.NoError(t, err)
	require.NoError(t, r.err)
	t.Logf("%d rounds written, reader checked %d distinct stamps", rounds, r.n)
	require.GreaterOrEqual(t, r.n, rounds/256, "the reader checked stamps all along the run")
}
