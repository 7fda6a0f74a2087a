package shm

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/internal/shmem"
	"github.com/tickbus/tickbus/rdma"
)

func validFrames() []frame {
	qs := uint64(queueBytes(16, 4096))
	return []frame{
		{typ: frameHello, dstQPN: 3, dstNonce: 0xdeadbeef, srcQPN: 9, srcNonce: 42},
		{typ: frameWelcome, qCap: 16, qMaxSend: 4096, qSlot: slotSize(4096), qSize: qs},
		{typ: frameRefuse, reason: refuseState},
		{typ: frameRegionAdd, rkey: 0x1234abcd, access: rdma.AccessRemote, addr: 0x7f0000001000, length: 8192, fileOff: 4096, units: 1},
		{typ: frameRegionAdd, rkey: 0x1234abcd, access: rdma.AccessRemoteWrite, addr: 0x7f0000001f00, length: 3 << 12, fileOff: 0xf00, units: 4},
		{typ: frameRegionUnit, rkey: 0x1234abcd, length: 4096},
		{typ: frameRegionDel, rkey: 7},
		{typ: frameReady},
		{typ: frameAck, acked: frameRegionAdd, rkey: 7},
	}
}

func TestFrame_RoundTrips(t *testing.T) {
	for _, f := range validFrames() {
		b := f.appendBinary(nil)
		assert.LessOrEqual(t, len(b), maxFrameSize)
		got, err := decodeFrame(b)
		require.NoError(t, err, "%s", f.typ)
		assert.Equal(t, f, got)
	}
}

func TestFrame_Decode_RejectsBadInput(t *testing.T) {
	hello := validFrames()[0].appendBinary(nil)
	add := validFrames()[3].appendBinary(nil)
	mut := func(b []byte, i int, v byte) []byte {
		c := bytes.Clone(b)
		c[i] = v
		return c
	}
	cases := map[string][]byte{
		"empty":           nil,
		"short header":    {1, 1},
		"version 1":       mut(hello, 0, 1),
		"version 3":       mut(hello, 0, 3),
		"type 0":          mut(hello, 1, 0),
		"type 200":        mut(hello, 1, 200),
		"length lies":     mut(hello, 2, 99),
		"truncated":       hello[:len(hello)-1],
		"trailing":        append(bytes.Clone(hello), 0),
		"hello to QPN 0":  (&frame{typ: frameHello}).appendBinary(nil),
		"rkey 0":          (&frame{typ: frameRegionAdd, units: 1, access: rdma.AccessRemote, addr: 4096, length: 1}).appendBinary(nil),
		"access byte":     mut(add, 8, 0xff),
		"no remote right": (&frame{typ: frameRegionAdd, units: 1, rkey: 1, access: rdma.AccessLocalWrite, addr: 4096, length: 1}).appendBinary(nil),
		"unknown access":  (&frame{typ: frameRegionAdd, units: 1, rkey: 1, access: 1 << 9, addr: 4096, length: 1}).appendBinary(nil),
		"zero length":     (&frame{typ: frameRegionAdd, units: 1, rkey: 1, access: rdma.AccessRemote, addr: 4096}).appendBinary(nil),
		"wraps":           (&frame{typ: frameRegionAdd, units: 1, rkey: 1, access: rdma.AccessRemote, addr: ^uint64(0) - 10, length: 100}).appendBinary(nil),
		"offset mismatch": (&frame{typ: frameRegionAdd, units: 1, rkey: 1, access: rdma.AccessRemote, addr: 4096, length: 1, fileOff: 8}).appendBinary(nil),
		"welcome cap 3":   (&frame{typ: frameWelcome, qCap: 3, qMaxSend: 64, qSlot: slotSize(64), qSize: uint64(queueBytes(4, 64))}).appendBinary(nil),
		"welcome slot":    (&frame{typ: frameWelcome, qCap: 4, qMaxSend: 64, qSlot: 8, qSize: uint64(queueBytes(4, 64))}).appendBinary(nil),
		"welcome small":   (&frame{typ: frameWelcome, qCap: 4, qMaxSend: 64, qSlot: slotSize(64), qSize: 100}).appendBinary(nil),
		"del rkey 0":      (&frame{typ: frameRegionDel}).appendBinary(nil),
		"no units":        (&frame{typ: frameRegionAdd, rkey: 1, access: rdma.AccessRemote, addr: 4096, length: 1}).appendBinary(nil),
		"too many units":  (&frame{typ: frameRegionAdd, rkey: 1, access: rdma.AccessRemote, addr: 4096, length: 1, units: maxUnits + 1}).appendBinary(nil),
		"unit rkey 0":     (&frame{typ: frameRegionUnit, length: 4096}).appendBinary(nil),
		"unit of 0 bytes": (&frame{typ: frameRegionUnit, rkey: 1}).appendBinary(nil),
		"huge unit":       (&frame{typ: frameRegionUnit, rkey: 1, length: maxRegion + 1}).appendBinary(nil),
		"ack of hello":    (&frame{typ: frameAck, acked: frameHello, rkey: 1}).appendBinary(nil),
	}
	for name, b := range cases {
		_, err := decodeFrame(b)
		assert.Error(t, err, name)
		assert.True(t, errors.Is(err, rdma.ErrMalformed) || errors.Is(err, rdma.ErrUnknownVersion), "%s: %v", name, err)
	}
}

// FuzzDecodeFrame: the control protocol's decoder takes bytes from another
// process. It must never panic, and whatever it accepts must be a frame
// that encodes back to exactly the same bytes and is within every bound.
func FuzzDecodeFrame(f *testing.F) {
	for _, fr := range validFrames() {
		f.Add(fr.appendBinary(nil))
	}
	f.Add([]byte{2, 4, 36, 0})
	f.Add([]byte{2, 8, 12, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := decodeFrame(b)
		if err != nil {
			return
		}
		assert.Equal(t, b, fr.appendBinary(nil))
		if fr.typ == frameRegionAdd {
			assert.NotZero(t, fr.rkey)
			assert.LessOrEqual(t, fr.length, uint64(maxRegion))
			assert.GreaterOrEqual(t, fr.addr+fr.length, fr.addr)
			assert.True(t, fr.units >= 1 && fr.units <= maxUnits)
		}
		if fr.typ == frameRegionUnit {
			assert.NotZero(t, fr.rkey)
			assert.True(t, fr.length >= 1 && fr.length <= uint64(maxRegion))
		}
		if fr.typ == frameWelcome {
			assert.GreaterOrEqual(t, fr.qSize, uint64(queueBytes(int(fr.qCap), int(fr.qMaxSend))))
		}
	})
}

// FuzzRegionSpans: the geometry of a region a peer sends (its regionAdd and
// the sizes of the memfds that come with it) decides what we map. Whatever
// regionSpans accepts maps each memfd inside its file, the spans back to
// back, and holds the region's bytes: byte 0 at delta, length bytes in all.
func FuzzRegionSpans(f *testing.F) {
	ps := pageSize
	f.Add(uint64(0), uint64(ps), uint8(1), uint8(1), uint8(1), uint64(0), uint64(0))
	f.Add(uint64(0xf00), uint64(3*ps), uint8(2), uint8(1), uint8(2), uint64(ps), uint64(ps))
	f.Add(uint64(ps+8), uint64(ps), uint8(3), uint8(1), uint8(1), uint64(ps), uint64(8))
	f.Fuzz(func(t *testing.T, fileOff, length uint64, p0, p1, p2 uint8, len1, len2 uint64) {
		sizes := []uint8{p0 % 4, p1 % 4, p2 % 4}
		n := 1 + int(sizes[0]%3)
		var fds []int
		defer func() {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}()
		fsize := make([]uint64, n)
		for i := range n {
			m, err := shmem.Alloc("fuzz", int(uint64(1+sizes[i%3])*ps))
			require.NoError(t, err)
			fd, err := unix.Dup(m.Fd())
			require.NoError(t, err)
			require.NoError(t, m.Close())
			fds = append(fds, fd)
			fsize[i] = uint64(1+sizes[i%3]) * ps
		}
		lens := []uint64{0, len1, len2}[:n]
		var rest uint64
		for _, l := range lens[1:] {
			if l == 0 || l >= length-rest || rest+l < rest {
				return // recvRegion refuses these before regionSpans
			}
			rest += l
		}
		if length == 0 || length <= rest {
			return
		}
		lens[0] = length - rest
		fr := frame{typ: frameRegionAdd, rkey: 1, access: rdma.AccessRemote, addr: 0x7f0000000000 + fileOff%ps, length: length, fileOff: fileOff, units: uint32(n)}
		spans, _, mlen, delta, err := regionSpans(fr, fds, lens)
		if err != nil {
			return
		}
		var at uint64
		for i, s := range spans {
			assert.Equal(t, at, s.at, "span %d follows the last", i)
			assert.Zero(t, s.from%ps)
			assert.Zero(t, s.to%ps)
			assert.Less(t, s.from, s.to)
			assert.LessOrEqual(t, s.to, fsize[i], "span %d inside its file", i)
			at = s.at + s.to - s.from
		}
		assert.Equal(t, at, mlen)
		assert.Equal(t, fileOff%ps, delta)
		assert.LessOrEqual(t, delta+length, mlen, "the region fits the mapping")
	})
}
