package tcp

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/tickbus/tickbus/rdma"
)

// FuzzApplyList: whatever a peer's WRITE list holds, the responder of a
// confined QP changes only granted bytes, and exactly as the list's
// WRITEs applied one by one would: every WRITE before the first that
// reaches outside the grant lands, in order, and that one and the rest
// land nowhere (the list is refused). The entries' addresses are taken
// relative to the region, so most of them fall in or near it.
func FuzzApplyList(f *testing.F) {
	const size, glo, ghi = 8192, 2048, 6144
	d, err := Open(Config{})
	if err != nil {
		f.Fatal(err)
	}
	defer d.Close()
	mr, err := d.RegisterMemory(size, rdma.AccessLocalWrite|rdma.AccessRemote)
	if err != nil {
		f.Fatal(err)
	}
	cq, err := d.CreateCQ(64)
	if err != nil {
		f.Fatal(err)
	}
	qpi, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 64, RecvDepth: 1})
	if err != nil {
		f.Fatal(err)
	}
	q := qpi.(*QP)
	base := mr.Addr()
	q.grants.Store(&grantTable{mr.RKey(): {lo: base + glo, hi: base + ghi, access: rdma.AccessRemoteWrite}})
	mem := mr.Bytes()

	seed := func(es []listElem) []byte {
		return encodeList(es, func(i int) []byte { return bytes.Repeat([]byte{byte(0xa0 + i)}, int(es[i].len)) })
	}
	f.Add(seed([]listElem{{raddr: glo + 8, len: 64*96 - 8}, {raddr: glo, len: 8 * 64, count: 64, stride: 96, flags: reqSignaled}}), uint16(65))
	f.Add(seed([]listElem{{raddr: ghi - 200, len: 8 * 4, count: 4, stride: 64}}), uint16(4))
	f.Add(seed([]listElem{{raddr: glo - 8, len: 16}, {raddr: glo, len: 8}}), uint16(2))
	f.Add(seed([]listElem{{raddr: ^uint64(0) - base - 30, len: 24, count: 3, stride: 16}}), uint16(3))
	f.Add(seed([]listElem{{raddr: glo, len: 0}, {raddr: ghi - 8, len: 16, count: 2, stride: 8}}), uint16(3))
	f.Fuzz(func(t *testing.T, list []byte, n uint16) {
		if checkList(list, uint32(n)) != nil {
			return // FuzzCheckList's
		}
		list = append([]byte(nil), list...)
		// Entries relative to the region; the reference: the WRITEs one by
		// one, up to the first outside the grant.
		clear(mem)
		want := make([]byte, size)
		refused := false
		for rest := list; len(rest) > 0; {
			e, p, r, _ := nextElem(rest)
			at := len(list) - len(rest)
			binary.LittleEndian.PutUint64(list[at:], e.raddr+base)
			rest = r
			w, ln := e.raddr+base, uint64(e.len)
			if e.count > 0 {
				ln = 8
			}
			for j := uint32(0); j < e.writes() && !refused; j++ {
				if w < base+glo || w > base+ghi || ln > base+ghi-w || (j > 0 && w < e.raddr+base) {
					refused = true
					break
				}
				copy(want[w-base:], p[:ln])
				p = p[ln:]
				w += uint64(e.stride)
			}
		}
		s := responder{q: q, bw: bufio.NewWriter(io.Discard), max: 1 << 20}
		h := request{op: opWriteList, seq: 1, rkey: mr.RKey(), imm: uint32(n), len: uint32(len(list))}
		err := s.applyList(&h, list)
		switch {
		case refused && !errors.Is(err, ErrRemoteAccess):
			t.Fatalf("a WRITE outside the grant, list not refused: %v", err)
		case !refused && err != nil:
			t.Fatalf("a list inside the grant refused: %v", err)
		}
		if !bytes.Equal(mem, want) {
			i := 0
			for mem[i] == want[i] {
				i++
			}
			t.Fatalf("memory differs from the WRITEs one by one first at byte %d (grant %d..%d)", i, glo, ghi)
		}
	})
}
