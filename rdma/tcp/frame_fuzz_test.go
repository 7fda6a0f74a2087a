package tcp

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

func encodeRequest(r request) []byte {
	b := make([]byte, reqHeaderLen)
	r.put(b)
	return b
}

func encodeResponse(r response) []byte {
	b := make([]byte, respHeaderLen)
	r.put(b)
	return b
}

func TestDecodeRequest_RoundTripsEveryOp(t *testing.T) {
	for _, r := range []request{
		{op: rdma.OpWrite, len: 8, seq: 1, raddr: 0x7f0000001000, rkey: 0x12345678},
		{op: rdma.OpWrite, flags: reqSignaled, len: 8, seq: 1, raddr: 64, rkey: 1},
		{op: rdma.OpSend, flags: reqSignaled, len: 1, seq: 7},
		{op: rdma.OpWrite, flags: reqAckNow, len: 8, seq: 9, raddr: 64, rkey: 1},
		{op: opWriteList, len: 3*listElemLen + 72, seq: 10, rkey: 1, imm: 3},
		{op: rdma.OpWriteImm, flags: reqSignaled | reqAckNow, len: 8, seq: 9, raddr: 64, rkey: 1, imm: 5},
		{op: rdma.OpWriteImm, len: 0, seq: 2, raddr: 1, rkey: 2, imm: 3},
		{op: rdma.OpRead, len: 100, seq: 3, raddr: 1, rkey: 2},
		{op: rdma.OpCompareAndSwap, seq: 4, raddr: 8, rkey: 9, arg1: 10, arg2: 11},
		{op: rdma.OpFetchAndAdd, seq: 5, raddr: 8, rkey: 9, arg1: 1},
		{op: rdma.OpSend, len: 5, seq: 6, imm: 7},
	} {
		got, err := decodeRequest(encodeRequest(r), 1<<20)
		require.NoError(t, err, r.op)
		assert.Equal(t, r, got)
	}
}

func TestDecodeRequest_RejectsGarbage(t *testing.T) {
	good := request{op: rdma.OpWrite, len: 8, seq: 1, raddr: 64, rkey: 1 << 20}
	cases := map[string][]byte{
		"short":           encodeRequest(good)[:47],
		"long":            append(encodeRequest(good), 0),
		"unknown op":      encodeRequest(request{op: 99, seq: 1}),
		"op zero":         encodeRequest(request{seq: 1}),
		"seq zero":        encodeRequest(request{op: rdma.OpWrite}),
		"len over limit":  encodeRequest(request{op: rdma.OpWrite, len: 1<<20 + 1, seq: 1}),
		"read over limit": encodeRequest(request{op: rdma.OpRead, len: 1<<20 + 1, seq: 1}),
		"atomic with len": encodeRequest(request{op: rdma.OpFetchAndAdd, len: 8, seq: 1}),
		"write with imm":  encodeRequest(request{op: rdma.OpWrite, seq: 1, imm: 1}),
		"send with rkey":  encodeRequest(request{op: rdma.OpSend, seq: 1, rkey: 1}),
		"faa with swap":   encodeRequest(request{op: rdma.OpFetchAndAdd, seq: 1, arg2: 1}),
		"signalled read":  encodeRequest(request{op: rdma.OpRead, flags: reqSignaled, len: 8, seq: 1}),
		"signalled cas":   encodeRequest(request{op: rdma.OpCompareAndSwap, flags: reqSignaled, seq: 1}),
		"unknown flag":    encodeRequest(request{op: rdma.OpWrite, flags: 4, seq: 1}),
		"ack-now read":    encodeRequest(request{op: rdma.OpRead, flags: reqAckNow, len: 8, seq: 1}),
		"list of none":    encodeRequest(request{op: opWriteList, seq: 1, rkey: 1}),
		"list too long":   encodeRequest(request{op: opWriteList, len: listMaxBytes + 1, seq: 1, rkey: 1, imm: 1}),
		"list too many":   encodeRequest(request{op: opWriteList, len: listMaxBytes, seq: 1, rkey: 1, imm: listMaxCount + 1}),
		"list too short":  encodeRequest(request{op: opWriteList, len: 2*listElemLen - 1, seq: 1, rkey: 1, imm: 2}),
		"list flags":      encodeRequest(request{op: opWriteList, flags: reqSignaled, len: listElemLen, seq: 1, rkey: 1, imm: 1}),
		"list raddr":      encodeRequest(request{op: opWriteList, len: listElemLen, seq: 1, raddr: 8, rkey: 1, imm: 1}),
	}
	reserved := encodeRequest(good)
	reserved[2] = 1
	cases["reserved bytes"] = reserved
	for name, b := range cases {
		_, err := decodeRequest(b, 1<<20)
		assert.ErrorIs(t, err, ErrFrame, name)
	}
}

func TestDecodeResponse_RejectsGarbage(t *testing.T) {
	cases := map[string][]byte{
		"short":           make([]byte, 23),
		"unknown kind":    encodeResponse(response{kind: 0x90, seq: 1}),
		"seq zero":        encodeResponse(response{kind: respAck}),
		"ack with status": encodeResponse(response{kind: respAck, seq: 1, status: rdma.StatusRemoteAccess}),
		"nak of success":  encodeResponse(response{kind: respNak, seq: 1}),
		"nak of flushed":  encodeResponse(response{kind: respNak, seq: 1, status: rdma.StatusFlushed}),
		"read too long":   encodeResponse(response{kind: respRead, seq: 1, len: 1<<20 + 1}),
		"atomic with len": encodeResponse(response{kind: respAtomic, seq: 1, len: 8}),
	}
	for name, b := range cases {
		_, err := decodeResponse(b, 1<<20)
		assert.ErrorIs(t, err, ErrFrame, name)
	}
}

func TestHandshake_RoundTripAndRejects(t *testing.T) {
	h := hello{host: "host-a", dstQPN: 1, srcQPN: 2, srcNonce: 4, maxMsg: 5}
	h.sign(3)
	got, err := readHello(bytes.NewReader(h.marshal()))
	require.NoError(t, err)
	assert.Equal(t, h, got)
	assert.True(t, got.verify(3), "the target's nonce")
	assert.False(t, got.verify(4), "another nonce")
	for _, off := range []int{8, 12, 16, 24, 32, 36} { // every field the MAC covers, and itself
		b := h.marshal()
		b[off] ^= 1
		tampered, err := readHello(bytes.NewReader(b))
		if err == nil {
			assert.False(t, tampered.verify(3), "byte %d changed, MAC still verifies", off)
		}
	}
	assert.NotContains(t, string(h.marshal()), string([]byte{3, 0, 0, 0, 0, 0, 0, 0}), "the nonce itself never travels")

	b := h.marshal()
	b[4] = 1
	_, err = readHello(bytes.NewReader(b))
	assert.ErrorIs(t, err, ErrHandshakeVersion)
	b[4] = 4 // the last version: WRITE lists without runs
	_, err = readHello(bytes.NewReader(b))
	assert.ErrorIs(t, err, ErrHandshakeVersion)
	assert.ErrorContains(t, err, "v4: WRITE lists without runs", "the old version refused by name")
	_, _, _, err = decodeReply(func() []byte { r := marshalReply(hsOK, 9, [8]byte{1}); r[4] = 4; return r }())
	assert.ErrorContains(t, err, "v4: WRITE lists without runs")
	b = h.marshal()
	b[0] = 'X'
	_, err = readHello(bytes.NewReader(b))
	assert.ErrorIs(t, err, ErrHandshake)
	_, err = readHello(bytes.NewReader(h.marshal()[:40])) // host id cut short
	assert.ErrorIs(t, err, ErrHandshake)

	st, max, mac, err := decodeReply(marshalReply(hsRefused, 9, [8]byte{}))
	require.NoError(t, err)
	assert.Equal(t, hsRefused, st)
	assert.Equal(t, uint32(9), max)
	assert.Zero(t, mac)
	_, _, _, err = decodeReply(marshalReply(7, 9, [8]byte{}))
	assert.ErrorIs(t, err, ErrHandshake)
	_, _, _, err = decodeReply(marshalReply(hsRefused, 9, [8]byte{1}))
	assert.ErrorIs(t, err, ErrHandshake, "a MAC on a refusal")
	ok := replyMAC(3, hsOK, 9, &h)
	_, _, mac, err = decodeReply(marshalReply(hsOK, 9, ok))
	require.NoError(t, err)
	assert.Equal(t, ok, mac)
	assert.NotEqual(t, ok, replyMAC(4, hsOK, 9, &h))
}

// FuzzDecodeRequest: any 48 bytes either fail with ErrFrame or decode to a
// request that encodes to the same bytes and respects the limit.
func FuzzDecodeRequest(f *testing.F) {
	f.Add(encodeRequest(request{op: rdma.OpWrite, len: 8, seq: 1, raddr: 64, rkey: 1 << 20}))
	f.Add(encodeRequest(request{op: rdma.OpCompareAndSwap, seq: 9, raddr: 64, rkey: 1 << 20, arg1: 1, arg2: 2}))
	f.Add(encodeRequest(request{op: rdma.OpSend, len: 3, seq: 2, imm: 4}))
	f.Add(encodeRequest(request{op: rdma.OpWrite, flags: reqSignaled, len: 8, seq: 3, raddr: 64, rkey: 1}))
	f.Add(encodeRequest(request{op: rdma.OpWrite, flags: reqSignaled | reqAckNow, len: 8, seq: 4, raddr: 64, rkey: 1}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRequest(b, 4096)
		if err != nil {
			if !bytes.Contains([]byte(err.Error()), []byte("tcp: malformed frame")) {
				t.Fatalf("error does not wrap ErrFrame: %v", err)
			}
			return
		}
		if r.len > 4096 || r.seq == 0 {
			t.Fatalf("accepted out of range request %+v", r)
		}
		if again := encodeRequest(r); !bytes.Equal(again, b) {
			t.Fatalf("round trip changed bytes:\n%x\n%x", b, again)
		}
	})
}

func FuzzDecodeResponse(f *testing.F) {
	f.Add(encodeResponse(response{kind: respAck, seq: 5}))
	f.Add(encodeResponse(response{kind: respNak, status: rdma.StatusRemoteAccess, seq: 5}))
	f.Add(encodeResponse(response{kind: respRead, len: 8, seq: 5}))
	f.Add(encodeResponse(response{kind: respAtomic, seq: 5, value: 77}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeResponse(b, 4096)
		if err != nil {
			return
		}
		if r.len > 4096 || r.seq == 0 || (r.kind == respNak) != (r.status != rdma.StatusSuccess) {
			t.Fatalf("accepted bad response %+v", r)
		}
		if again := encodeResponse(r); !bytes.Equal(again, b) {
			t.Fatalf("round trip changed bytes:\n%x\n%x", b, again)
		}
	})
}

func FuzzReadHello(f *testing.F) {
	f.Add((&hello{host: "h", dstQPN: 1, srcQPN: 2, mac: [8]byte{3}, srcNonce: 4, maxMsg: 5}).marshal())
	f.Add([]byte("TBQP"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rd := bytes.NewReader(b)
		h, err := readHello(rd)
		if err != nil {
			return
		}
		used := len(b) - rd.Len()
		if again := h.marshal(); !bytes.Equal(again, b[:used]) {
			t.Fatalf("round trip changed bytes:\n%x\n%x", b[:used], again)
		}
	})
}

func FuzzDecodeReply(f *testing.F) {
	f.Add(marshalReply(hsOK, 4096, [8]byte{1, 2}))
	f.Add(marshalReply(hsNotFound, 0, [8]byte{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, max, mac, err := decodeReply(b)
		if err != nil {
			return
		}
		if again := marshalReply(st, max, mac); !bytes.Equal(again, b) {
			t.Fatalf("round trip changed bytes:\n%x\n%x", b, again)
		}
	})
}

func encodeList(es []listElem, payload func(i int) []byte) []byte {
	var b []byte
	for i, e := range es {
		var eh [listElemLen]byte
		e.put(eh[:])
		b = append(append(b, eh[:]...), payload(i)...)
	}
	return b
}

func TestCheckList_RoundTripsAndRejectsGarbage(t *testing.T) {
	es := []listElem{{raddr: 0x7f0000001008, len: 8120}, {raddr: 0x7f0000001000, len: 8, flags: reqSignaled}, {raddr: 64, len: 0, flags: reqAckNow},
		{raddr: 0x7f0000001000, len: 24, count: 3, stride: 96, flags: reqSignaled}}
	pay := func(i int) []byte { return bytes.Repeat([]byte{byte(i + 1)}, int(es[i].len)) }
	list := encodeList(es, pay)
	require.NoError(t, checkList(list, 6))
	rest := list
	for i, want := range es {
		e, p, r, err := nextElem(rest)
		require.NoError(t, err)
		assert.Equal(t, want, e)
		assert.Equal(t, pay(i), p)
		rest = r
	}
	assert.Empty(t, rest)
	bad := func(edit func(b []byte) []byte) []byte { return edit(append([]byte(nil), list...)) }
	run := len(list) - listElemLen - 24 // the run's entry
	for name, b := range map[string][]byte{
		"count too high":      list,
		"short entry":         list[:listElemLen-1],
		"unknown flag":        bad(func(b []byte) []byte { b[12] = 4; return b }),
		"reserved byte":       bad(func(b []byte) []byte { b[15] = 1; return b }),
		"unknown kind":        bad(func(b []byte) []byte { b[13] = 2; return b }),
		"payload too long":    bad(func(b []byte) []byte { b[8] = 0xff; b[9] = 0xff; return b }),
		"trailing bytes":      append(append([]byte(nil), list...), 0),
		"run of one":          bad(func(b []byte) []byte { b[run+14] = 1; return b }),
		"run past the count":  bad(func(b []byte) []byte { b[run+14] = 4; return append(b, make([]byte, 8)...) }),
		"run overlapping":     bad(func(b []byte) []byte { b[run+8] = 7; return b }),
		"run longer than all": bad(func(b []byte) []byte { b[run+15] = 1; return b }),
		"run flags":           bad(func(b []byte) []byte { b[run+12] = 8; return b }),
	} {
		n := uint32(6)
		if name == "count too high" {
			n = 7
		}
		assert.ErrorIs(t, checkList(b, n), ErrFrame, name)
	}
}

// FuzzCheckList: any bytes either fail with ErrFrame or are n entries whose
// re-encoding is the same bytes.
func FuzzCheckList(f *testing.F) {
	f.Add(encodeList([]listElem{{raddr: 8, len: 4}, {raddr: 0, len: 8, flags: reqSignaled}}, func(i int) []byte { return make([]byte, 4+4*i) }), uint8(2))
	f.Add(encodeList([]listElem{{raddr: 1 << 40, len: 0, flags: reqAckNow | reqSignaled}}, func(int) []byte { return nil }), uint8(1))
	f.Add([]byte{}, uint8(1))
	f.Add(make([]byte, listElemLen), uint8(0))
	f.Add(encodeList([]listElem{{raddr: ^uint64(0) - 3, len: 8}, {raddr: 16, len: 0}}, func(i int) []byte { return make([]byte, 8*(1-i)) }), uint8(2))
	f.Add(encodeList([]listElem{{raddr: 8, len: 88}, {raddr: 0, len: 16, count: 2, stride: 96, flags: reqSignaled}}, func(i int) []byte { return make([]byte, 88-72*i) }), uint8(3))
	f.Add(encodeList([]listElem{{raddr: ^uint64(0) - 100, len: 24, count: 3, stride: 40}}, func(int) []byte { return make([]byte, 24) }), uint8(3))
	f.Add(encodeList([]listElem{{raddr: 64, len: 8 * listMaxCount, count: listMaxCount, stride: 1 << 31}}, func(int) []byte { return make([]byte, 8*listMaxCount) }), uint8(255))
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		if err := checkList(b, uint32(n)); err != nil {
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("error not ErrFrame: %v", err)
			}
			return
		}
		sp, err := scanList(b, uint32(n))
		if err != nil {
			t.Fatalf("scanList fails where checkList passed: %v", err)
		}
		var out []byte
		rest := b
		want := listSpan{lo: ^uint64(0)}
		for i := 0; i < int(n); i++ {
			e, p, r, err := nextElem(rest)
			if err != nil {
				t.Fatalf("entry %d after a good check: %v", i, err)
			}
			var eh [listElemLen]byte
			e.put(eh[:])
			out = append(append(out, eh[:]...), p...)
			rest = r
			// The span covers every WRITE (or says one wraps).
			last, end := e.raddr, e.raddr+uint64(e.len)
			if e.count > 0 {
				i += int(e.count) - 1
				for j := uint64(1); j < uint64(e.count); j++ {
					next := last + uint64(e.stride)
					want.wraps = want.wraps || next < last
					last = next
				}
				end = last + 8
			}
			want.wraps = want.wraps || end < last
			want.lo, want.hi, want.flags = min(want.lo, e.raddr), max(want.hi, end), want.flags|e.flags
		}
		if !bytes.Equal(out, b) || len(rest) != 0 {
			t.Fatalf("re-encoded %x, want %x", out, b)
		}
		if sp != want {
			t.Fatalf("span %+v, want %+v", sp, want)
		}
	})
}
