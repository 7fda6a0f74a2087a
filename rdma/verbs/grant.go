//go:build verbs && cgo && linux

package verbs

/*
#include <string.h>
#include <infiniband/verbs.h>

static struct ibv_mw *tb_alloc_mw2(struct ibv_pd *pd) { return ibv_alloc_mw(pd, IBV_MW_TYPE_2); }

static int tb_dealloc_mw(struct ibv_mw *mw) { return ibv_dealloc_mw(mw); }

// tb_next_rkey is the rkey mw's next bind gives it: its own with the 8-bit
// tag stepped.
static uint32_t tb_next_rkey(struct ibv_mw *mw) { return ibv_inc_rkey(mw->rkey); }

// tb_bind_mw2 posts an IBV_WR_BIND_MW on qp that binds the type 2 window
// mw to the len bytes at addr of mr with the remote rights access, under
// rkey, signalled: waitBinds waits for its completion.
static int tb_bind_mw2(struct ibv_qp *qp, uint64_t wr_id, struct ibv_mw *mw, struct ibv_mr *mr,
		uint64_t addr, uint64_t len, unsigned access, uint32_t rkey) {
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info.mr = mr;
	wr.bind_mw.bind_info.addr = addr;
	wr.bind_mw.bind_info.length = len;
	wr.bind_mw.bind_info.mw_access_flags = access;
	return ibv_post_send(qp, &wr, &bad);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"time"

	"github.com/tickbus/tickbus/rdma"
)

// bindWRID is the work request id of every IBV_WR_BIND_MW this provider
// posts. waitBinds reaps their completions; should Poll meet one, it drops
// a successful one and hands a failed one up with this id (the QP is in
// ERR by then).
const bindWRID = 0xb1d0_0000_0000_0000 | 0x77

// window is a type 2 memory window bound (or to be bound, at Connect) to
// one queue pair over a range of one region: its rkey works on that QP
// alone, inside the range, with its rights.
type window struct {
	r      *region
	mw     *C.struct_ibv_mw
	off, n uint64
	access rdma.Access
	rkey   uint32 // chosen at grant time (tb_next_rkey), bound at bind
	bound  bool
}

func (w *window) remote() rdma.RemoteRegion {
	return rdma.RemoteRegion{Addr: w.r.Addr() + w.off, RKey: w.rkey, Len: w.n}
}

// Grant confines q's peer to what q is granted (see
// rdma.QueuePair.Grant): a type 2 memory window over all of mr.
func (q *queuePair) Grant(mr rdma.MemoryRegion, access rdma.Access) (rdma.RemoteRegion, error) {
	return q.GrantRange(mr, 0, len(mr.Bytes()), access)
}

// GrantRange allocates a type 2 memory window (ibv_alloc_mw) and binds it
// to q over n bytes at off of mr with access, by an IBV_WR_BIND_MW on q's
// send queue: at once if q is in RTS, else at the end of Connect, which
// then waits until the NIC completed the bind (polling q's send CQ, so
// nobody else may poll that CQ during a Grant after Connect, or during a
// Connect with grants queued; other completions it meets are kept for the
// CQ's next Poll). The returned RemoteRegion carries the window's rkey
// (chosen now, so a grant before Connect returns it too), which works on q
// alone.
//
// A later grant of the same range with more rights binds another window
// (the earlier rkey keeps its rights); another range of a region q holds
// a grant of is refused. The windows are deallocated when q closes.
func (q *queuePair) GrantRange(mr rdma.MemoryRegion, off, n int, access rdma.Access) (rdma.RemoteRegion, error) {
	r, ok := mr.(*region)
	if !ok || r.dev != q.dev {
		return rdma.RemoteRegion{}, fmt.Errorf("%w: region %T is not of this verbs device", rdma.ErrGrant, mr)
	}
	if err := rdma.CheckGrant(r.access, access); err != nil {
		return rdma.RemoteRegion{}, err
	}
	if err := rdma.CheckGrantRange(len(r.mem), off, n); err != nil {
		return rdma.RemoteRegion{}, err
	}
	q.dev.mu.Lock()
	_, live := q.dev.regions[r]
	q.dev.mu.Unlock()
	if !live {
		return rdma.RemoteRegion{}, fmt.Errorf("%w: region of %d bytes is closed", rdma.ErrGrant, len(r.mem))
	}
	if !q.dev.caps.GrantPerQP {
		return rdma.RemoteRegion{}, fmt.Errorf("%w: verbs device %s has no type 2B memory windows; every QP of its protection domain reaches every remote region", rdma.ErrNotSupported, q.dev.cfg.Device)
	}
	q.grantMu.Lock()
	defer q.grantMu.Unlock()
	if q.closed.Load() {
		return rdma.RemoteRegion{}, fmt.Errorf("%w: verbs QP %d", rdma.ErrClosed, q.Num())
	}
	var have rdma.Access
	for _, w := range q.windows {
		if w.r != r {
			continue
		}
		if w.off != uint64(off) || w.n != uint64(n) {
			return rdma.RemoteRegion{}, fmt.Errorf("%w: QP %d holds bytes %d..%d of the region, not %d..%d",
				rdma.ErrGrant, q.Num(), w.off, w.off+w.n, off, off+n)
		}
		if w.access.Has(access) {
			return w.remote(), nil
		}
		have |= w.access
	}
	mw := C.tb_alloc_mw2(q.dev.pd)
	if mw == nil {
		return rdma.RemoteRegion{}, fmt.Errorf("verbs: ibv_alloc_mw(type 2) on %s failed", q.dev.cfg.Device)
	}
	w := &window{r: r, mw: mw, off: uint64(off), n: uint64(n), access: have | access, rkey: uint32(C.tb_next_rkey(mw))}
	if q.connected {
		err := q.bind(w)
		if err == nil {
			err = q.waitBinds(1)
		}
		if err != nil {
			C.tb_dealloc_mw(mw)
			return rdma.RemoteRegion{}, err
		}
	}
	q.windows = append(q.windows, w)
	return w.remote(), nil
}

// bind posts w's IBV_WR_BIND_MW on q (in RTS). Caller holds q.grantMu.
func (q *queuePair) bind(w *window) error {
	rc := C.tb_bind_mw2(q.qp, C.uint64_t(bindWRID), w.mw, w.r.mr, C.uint64_t(w.r.Addr()+w.off), C.uint64_t(w.n),
		C.unsigned(mwAccessFlags(w.access)), C.uint32_t(w.rkey))
	switch rc {
	case 0:
		w.bound = true
		return nil
	case C.ENOMEM:
		return fmt.Errorf("verbs: bind memory window on QP %d: %w", q.Num(), rdma.ErrSendQueueFull)
	}
	return fmt.Errorf("verbs: bind memory window on QP %d: %w", q.Num(), syscall.Errno(rc))
}

// bindQueued binds the windows granted before Connect, now that q is in
// RTS. On error the caller moves q to ERR.
func (q *queuePair) bindQueued() error {
	q.grantMu.Lock()
	defer q.grantMu.Unlock()
	q.connected = true
	n := 0
	for _, w := range q.windows {
		if !w.bound {
			if err := q.bind(w); err != nil {
				return err
			}
			n++
		}
	}
	return q.waitBinds(n)
}

// bindTimeout bounds waitBinds: a bind is a local operation of the NIC.
const bindTimeout = 5 * time.Second

// waitBinds polls q's send CQ until n of q's binds completed; the first
// that failed is the error. Completions of other requests are stashed for
// the CQ's next Poll. Caller holds q.grantMu.
func (q *queuePair) waitBinds(n int) error {
	c := q.cfg.SendCQ.(*completionQueue)
	deadline := time.Now().Add(bindTimeout)
	var failed error
	for n > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("verbs: QP %d: %d memory window binds not completed after %v", q.Num(), n, bindTimeout)
		}
		got := c.pollRaw()
		if got < 0 {
			return fmt.Errorf("verbs: QP %d: ibv_poll_cq failed waiting for memory window binds", q.Num())
		}
		for i := 0; i < got; i++ {
			w := &c.wc[i]
			if uint64(w.wr_id) != bindWRID || uint32(w.qp_num) != q.Num() {
				c.stash = append(c.stash, c.convert(w))
				continue
			}
			n--
			if st := c.convert(w).Status; st != rdma.StatusSuccess && failed == nil {
				failed = fmt.Errorf("verbs: bind memory window on QP %d: %w", q.Num(), st.Err())
			}
		}
		if got == 0 {
			runtime.Gosched()
		}
	}
	return failed
}

// closeWindows deallocates q's windows (q is in ERR; Close destroys it
// next): their rkeys stop working.
func (q *queuePair) closeWindows() error {
	q.grantMu.Lock()
	defer q.grantMu.Unlock()
	var errs []error
	for _, w := range q.windows {
		if rc := C.tb_dealloc_mw(w.mw); rc != 0 {
			errs = append(errs, fmt.Errorf("verbs: dealloc mw: %w", syscall.Errno(rc)))
		}
	}
	q.windows = nil
	return errors.Join(errs...)
}

// dropWindows deallocates q's windows over r (r is being deregistered):
// their rkeys stop working.
func (q *queuePair) dropWindows(r *region) error {
	q.grantMu.Lock()
	defer q.grantMu.Unlock()
	var errs []error
	keep := q.windows[:0]
	for _, w := range q.windows {
		if w.r != r {
			keep = append(keep, w)
			continue
		}
		if rc := C.tb_dealloc_mw(w.mw); rc != 0 {
			errs = append(errs, fmt.Errorf("verbs: dealloc mw: %w", syscall.Errno(rc)))
		}
	}
	clear(q.windows[len(keep):])
	q.windows = keep
	return errors.Join(errs...)
}

// mwAccessFlags are the ibv_access_flags of a window granting a (remote
// rights only: rdma.CheckGrant).
func mwAccessFlags(a rdma.Access) C.int {
	var f C.int
	if a.Has(rdma.AccessRemoteWrite) {
		f |= C.IBV_ACCESS_REMOTE_WRITE
	}
	if a.Has(rdma.AccessRemoteRead) {
		f |= C.IBV_ACCESS_REMOTE_READ
	}
	if a.Has(rdma.AccessRemoteAtomic) {
		f |= C.IBV_ACCESS_REMOTE_ATOMIC
	}
	return f
}
