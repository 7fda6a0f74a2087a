//go:build verbs && cgo && linux

package verbs

/*
#cgo LDFLAGS: -libverbs
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>

// ibverbs hides several entry points behind macros and anonymous unions that
// cgo cannot reach; these shims keep every hot-path call to one cgo call.

typedef struct {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t qp_num;
	uint32_t byte_len;
	uint32_t imm;
	uint32_t flags;
} tb_wc;

static struct ibv_device **tb_get_device_list(int *n) { return ibv_get_device_list(n); }

static int tb_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr) {
	return ibv_query_port(ctx, port, attr);
}

static struct ibv_mr *tb_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access) {
	return ibv_reg_mr(pd, addr, len, access);
}

static int tb_poll(struct ibv_cq *cq, int n, tb_wc *out) {
	struct ibv_wc wc[64];
	if (n > 64) n = 64;
	int got = ibv_poll_cq(cq, n, wc);
	for (int i = 0; i < got; i++) {
		out[i].wr_id = wc[i].wr_id;
		out[i].status = wc[i].status;
		out[i].opcode = wc[i].opcode;
		out[i].qp_num = wc[i].qp_num;
		out[i].byte_len = wc[i].byte_len;
		out[i].flags = wc[i].wc_flags;
		out[i].imm = (wc[i].wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc[i].imm_data) : 0;
	}
	return got;
}

// tb_post_send posts one request. inl, when not NULL, is the payload of an
// IBV_SEND_INLINE request: the NIC copies it before ibv_post_send returns.
static int tb_post_send(struct ibv_qp *qp, uint64_t wr_id, int opcode, unsigned flags,
		void *inl, uint64_t laddr, uint32_t llen, uint32_t lkey,
		uint64_t raddr, uint32_t rkey, uint32_t imm, uint64_t compare_add, uint64_t swap) {
	struct ibv_sge sge = { .addr = inl ? (uintptr_t)inl : laddr, .length = llen, .lkey = lkey };
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = llen > 0 ? 1 : 0;
	wr.opcode = opcode;
	wr.send_flags = flags;
	switch (opcode) {
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = compare_add;
		wr.wr.atomic.swap = swap;
		break;
	case IBV_WR_SEND:
		break;
	case IBV_WR_SEND_WITH_IMM:
		wr.imm_data = htonl(imm);
		break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		wr.imm_data = htonl(imm);
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
		break;
	default:
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}

static int tb_post_recv(struct ibv_qp *qp, uint64_t wr_id, uint64_t laddr, uint32_t llen, uint32_t lkey) {
	struct ibv_sge sge = { .addr = laddr, .length = llen, .lkey = lkey };
	struct ibv_recv_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = llen > 0 ? 1 : 0;
	return ibv_post_recv(qp, &wr, &bad);
}

static int tb_to_init(struct ibv_qp *qp, uint8_t port) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = port;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int tb_to_rtr(struct ibv_qp *qp, uint8_t port, int mtu, uint32_t dqpn, uint32_t rq_psn,
		uint16_t dlid, uint8_t *dgid, int sgid_index, int rd_atomic) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = dqpn;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = rd_atomic;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = dlid;
	a.ah_attr.port_num = port;
	int global = 0;
	for (int i = 0; i < 16; i++) global |= dgid[i];
	if (global) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, dgid, 16);
		a.ah_attr.grh.sgid_index = sgid_index;
		a.ah_attr.grh.hop_limit = 64;
	}
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static int tb_to_rts(struct ibv_qp *qp, uint32_t sq_psn, int rd_atomic) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = sq_psn;
	a.max_rd_atomic = rd_atomic;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int tb_to_err(struct ibv_qp *qp) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_ERR;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

static int tb_qp_state(struct ibv_qp *qp) {
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia)) return -1;
	return a.qp_state;
}

static struct ibv_qp *tb_create_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
		int send_wr, int recv_wr, int inl, int sig_all) {
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof ia);
	ia.send_cq = scq;
	ia.recv_cq = rcq;
	ia.cap.max_send_wr = send_wr;
	ia.cap.max_recv_wr = recv_wr > 0 ? recv_wr : 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = inl;
	ia.qp_type = IBV_QPT_RC;
	ia.sq_sig_all = sig_all;
	return ibv_create_qp(pd, &ia);
}
*/
import "C"

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/internal/shmem"
	"github.com/tickbus/tickbus/rdma"
)

// Device is an opened ibverbs device and its protection domain.
type Device struct {
	cfg      Config
	log      zerolog.Logger
	ctx      *C.struct_ibv_context
	pd       *C.struct_ibv_pd
	caps     rdma.Caps
	rdAtomic C.int
	lid      uint16
	mtu      uint32
	gid      [16]byte

	mu      sync.Mutex
	closed  bool
	regions map[*region]struct{}
	qps     map[*queuePair]struct{}
	cqs     map[*completionQueue]struct{}
}

// Open opens the configured device (the first one by default), queries its
// limits and allocates a protection domain.
func Open(cfg Config) (rdma.Device, error) {
	if cfg.Port == 0 {
		cfg.Port = 1
	}
	if cfg.Port < 1 || cfg.Port > 255 {
		return nil, fmt.Errorf("%w: verbs port %d, want 1..255", rdma.ErrInvalidConfig, cfg.Port)
	}
	if cfg.GIDIndex < 0 || cfg.GIDIndex > 255 {
		return nil, fmt.Errorf("%w: verbs gid_index %d, want 0..255", rdma.ErrInvalidConfig, cfg.GIDIndex)
	}
	if cfg.HostID == "" {
		cfg.HostID, _ = os.Hostname()
	}
	var n C.int
	list := C.tb_get_device_list(&n)
	if list == nil || n == 0 {
		if list != nil {
			C.ibv_free_device_list(list)
		}
		return nil, fmt.Errorf("%w: no RDMA device found by libibverbs (no NIC, or no kernel support)", rdma.ErrNoDevice)
	}
	defer C.ibv_free_device_list(list)
	var dev *C.struct_ibv_device
	var names []string
	for _, d := range unsafe.Slice(list, int(n)) {
		name := C.GoString(C.ibv_get_device_name(d))
		names = append(names, name)
		if dev == nil && (cfg.Device == "" || cfg.Device == name) {
			dev = d
			cfg.Device = name
		}
	}
	if dev == nil {
		return nil, fmt.Errorf("%w: device %q not found (have %v)", rdma.ErrNoDevice, cfg.Device, names)
	}
	d := &Device{cfg: cfg, log: cfg.Logger,
		regions: map[*region]struct{}{}, qps: map[*queuePair]struct{}{}, cqs: map[*completionQueue]struct{}{}}
	if d.ctx = C.ibv_open_device(dev); d.ctx == nil {
		return nil, fmt.Errorf("verbs: open %s failed", cfg.Device)
	}
	var attr C.struct_ibv_device_attr
	if rc := C.ibv_query_device(d.ctx, &attr); rc != 0 {
		d.Close()
		return nil, fmt.Errorf("verbs: query %s: %w", cfg.Device, syscall.Errno(rc))
	}
	var port C.struct_ibv_port_attr
	if rc := C.tb_query_port(d.ctx, C.uint8_t(cfg.Port), &port); rc != 0 {
		d.Close()
		return nil, fmt.Errorf("verbs: query %s port %d: %w", cfg.Device, cfg.Port, syscall.Errno(rc))
	}
	var gid C.union_ibv_gid
	if rc := C.ibv_query_gid(d.ctx, C.uint8_t(cfg.Port), C.int(cfg.GIDIndex), &gid); rc != 0 {
		d.Close()
		return nil, fmt.Errorf("verbs: query %s gid %d: %w", cfg.Device, cfg.GIDIndex, syscall.Errno(rc))
	}
	copy(d.gid[:], C.GoBytes(unsafe.Pointer(&gid), 16))
	d.lid = uint16(port.lid)
	d.mtu = mtuBytes(int(port.active_mtu))
	d.rdAtomic = attr.max_qp_rd_atom
	if d.rdAtomic > 16 {
		d.rdAtomic = 16
	}
	d.caps = rdma.Caps{
		MaxInline: 64, MaxMsgSize: 1 << 30, MaxQPDepth: int(attr.max_qp_wr), MaxCQDepth: int(attr.max_cqe),
		MaxRegion: int(min(uint64(attr.max_mr_size), 1<<40)), Atomic: atomicCap(attr.atomic_cap),
		ShareMemory: true, CrossProcess: true,
		// Type 2B windows are bound to one QP (grant.go).
		GrantPerQP: attr.device_cap_flags&C.IBV_DEVICE_MEM_WINDOW_TYPE_2B != 0,
	}
	// With them, a region's own rkey grants nothing remote (register):
	// only windows do, each on its QP.
	d.caps.GrantOnly = d.caps.GrantPerQP && !cfg.OpenRegions
	if d.pd = C.ibv_alloc_pd(d.ctx); d.pd == nil {
		d.Close()
		return nil, fmt.Errorf("verbs: alloc pd on %s failed", cfg.Device)
	}
	d.log.Info().Str("device", cfg.Device).Int("port", cfg.Port).Uint16("lid", d.lid).
		Uint32("mtu", d.mtu).Str("atomic", fmt.Sprint(d.caps.Atomic)).Bool("grant_per_qp", d.caps.GrantPerQP).
		Bool("grant_only", d.caps.GrantOnly).Msg("verbs device open")
	return d, nil
}

func atomicCap(c C.enum_ibv_atomic_cap) rdma.AtomicCap {
	switch c {
	case C.IBV_ATOMIC_HCA:
		return rdma.AtomicHCA
	case C.IBV_ATOMIC_GLOB:
		return rdma.AtomicGlobal
	}
	return rdma.AtomicNone
}

func mtuBytes(e int) uint32 {
	if e < 1 || e > 5 {
		return 256
	}
	return 128 << e // IBV_MTU_256 = 1 … IBV_MTU_4096 = 5
}

func mtuEnum(b uint32) C.int {
	e := C.int(1)
	for e < 5 && uint32(128)<<(e+1) <= b {
		e++
	}
	return e
}

func (d *Device) Provider() string { return rdma.ProviderVerbs }
func (d *Device) HostID() string   { return d.cfg.HostID }
func (d *Device) Caps() rdma.Caps  { return d.caps }

// accessFlags are the ibv_access_flags of a memory region giving a. With
// grantOnly the region's own rkey gets no remote right: local access and
// window binds only (local write too where a window may grant remote write
// or atomics, which verbs requires of the region under such a window).
func accessFlags(a rdma.Access, grantOnly bool) C.int {
	var f C.int
	if a&(rdma.AccessLocalWrite|rdma.AccessRemoteWrite|rdma.AccessRemoteAtomic) != 0 {
		f |= C.IBV_ACCESS_LOCAL_WRITE // verbs requires it with remote write or atomic
	}
	if grantOnly {
		if a&rdma.AccessRemote != 0 {
			f |= C.IBV_ACCESS_MW_BIND
		}
		return f
	}
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

// RegisterMemory allocates shareable memory and registers it with the NIC.
func (d *Device) RegisterMemory(size int, access rdma.Access) (rdma.MemoryRegion, error) {
	if size <= 0 || size > d.caps.MaxRegion {
		return nil, fmt.Errorf("%w: region size %d, want 1..%d", rdma.ErrInvalidConfig, size, d.caps.MaxRegion)
	}
	m, err := shmem.Alloc("verbs", size)
	if err != nil {
		return nil, err
	}
	r, err := d.register(m.Bytes(), access, m)
	if err != nil {
		m.Close()
	}
	return r, err
}

// Register registers memory another region of this process holds.
func (d *Device) Register(mem []byte, access rdma.Access) (rdma.MemoryRegion, error) {
	if _, _, err := shmem.Lookup(mem); err != nil {
		return nil, fmt.Errorf("%w: verbs registers only memory of a region of this process: %w", rdma.ErrInvalidRequest, err)
	}
	return d.register(mem, access, nil)
}

func (d *Device) register(mem []byte, access rdma.Access, owned *shmem.Mapping) (*region, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, rdma.ErrClosed
	}
	if access&(rdma.AccessRemoteWrite|rdma.AccessRemoteAtomic) != 0 {
		access |= rdma.AccessLocalWrite
	}
	// Where the device confines QPs, the region's own rkey reaches nothing
	// remote (Caps.GrantOnly): a peer reaches it only through a memory
	// window bound to its QP (grant.go), so a descriptor sniffed off the
	// control plane, carrying the region's rkey, is of no use on any QP.
	flags := accessFlags(access, d.caps.GrantOnly)
	if d.caps.GrantPerQP && access&rdma.AccessRemote != 0 {
		flags |= C.IBV_ACCESS_MW_BIND // memory windows may be bound over it (grant.go)
	}
	mr := C.tb_reg_mr(d.pd, unsafe.Pointer(&mem[0]), C.size_t(len(mem)), flags)
	if mr == nil {
		return nil, fmt.Errorf("verbs: ibv_reg_mr of %d bytes failed", len(mem))
	}
	r := &region{dev: d, mr: mr, mem: mem, owned: owned, access: access}
	d.regions[r] = struct{}{}
	return r, nil
}

type region struct {
	dev    *Device
	mr     *C.struct_ibv_mr
	mem    []byte
	owned  *shmem.Mapping
	access rdma.Access
	once   sync.Once
	err    error
}

func (r *region) Bytes() []byte       { return r.mem }
func (r *region) Addr() uint64        { return uint64(uintptr(unsafe.Pointer(&r.mem[0]))) }
func (r *region) LKey() uint32        { return uint32(r.mr.lkey) }
func (r *region) RKey() uint32        { return uint32(r.mr.rkey) }
func (r *region) Access() rdma.Access { return r.access }
func (r *region) Remote() rdma.RemoteRegion {
	return rdma.RemoteRegion{Addr: r.Addr(), RKey: r.RKey(), Len: uint64(len(r.mem))}
}

func (r *region) Close() error {
	r.once.Do(func() {
		r.dev.mu.Lock()
		delete(r.dev.regions, r)
		qps := keys(r.dev.qps)
		r.dev.mu.Unlock()
		for _, q := range qps { // a region with windows bound over it cannot be deregistered
			r.err = errors.Join(r.err, q.dropWindows(r))
		}
		if rc := C.ibv_dereg_mr(r.mr); rc != 0 {
			r.err = errors.Join(r.err, fmt.Errorf("verbs: dereg mr: %w", syscall.Errno(rc)))
		}
		if r.owned != nil {
			r.err = errors.Join(r.err, r.owned.Close())
		}
	})
	return r.err
}

// CreateCQ creates a completion queue of at least depth entries.
func (d *Device) CreateCQ(depth int) (rdma.CompletionQueue, error) {
	if depth < 1 || depth > d.caps.MaxCQDepth {
		return nil, fmt.Errorf("%w: CQ depth %d, want 1..%d", rdma.ErrInvalidConfig, depth, d.caps.MaxCQDepth)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, rdma.ErrClosed
	}
	cq := C.ibv_create_cq(d.ctx, C.int(depth), nil, nil, 0)
	if cq == nil {
		return nil, fmt.Errorf("verbs: ibv_create_cq(%d) failed", depth)
	}
	c := &completionQueue{dev: d, cq: cq}
	d.cqs[c] = struct{}{}
	return c, nil
}

type completionQueue struct {
	dev  *Device
	cq   *C.struct_ibv_cq
	wc   [64]C.tb_wc
	once sync.Once
	err  error
	shut atomic.Bool
	// stash holds the completions of other requests that waitBinds
	// polled; Poll returns them first. The poller's, as wc.
	stash []rdma.Completion
}

// statusOf and opcodeOf are arrays, not maps: Poll indexes them per completion.
var statusOf = [32]rdma.Status{
	C.IBV_WC_SUCCESS:           rdma.StatusSuccess,
	C.IBV_WC_LOC_LEN_ERR:       rdma.StatusLocalLength,
	C.IBV_WC_LOC_QP_OP_ERR:     rdma.StatusLocalQPOp,
	C.IBV_WC_LOC_PROT_ERR:      rdma.StatusLocalProtection,
	C.IBV_WC_WR_FLUSH_ERR:      rdma.StatusFlushed,
	C.IBV_WC_REM_INV_REQ_ERR:   rdma.StatusRemoteInvalidRequest,
	C.IBV_WC_REM_ACCESS_ERR:    rdma.StatusRemoteAccess,
	C.IBV_WC_REM_OP_ERR:        rdma.StatusRemoteOp,
	C.IBV_WC_RETRY_EXC_ERR:     rdma.StatusRetryExceeded,
	C.IBV_WC_RNR_RETRY_EXC_ERR: rdma.StatusRNRRetryExceeded,
}

var opcodeOf = [256]rdma.Opcode{
	C.IBV_WC_SEND:               rdma.OpSend,
	C.IBV_WC_RDMA_WRITE:         rdma.OpWrite,
	C.IBV_WC_RDMA_READ:          rdma.OpRead,
	C.IBV_WC_COMP_SWAP:          rdma.OpCompareAndSwap,
	C.IBV_WC_FETCH_ADD:          rdma.OpFetchAndAdd,
	C.IBV_WC_RECV:               rdma.OpRecv,
	C.IBV_WC_RECV_RDMA_WITH_IMM: rdma.OpRecvImm,
}

// Poll reaps up to min(len(buf), 64) completions with one cgo call.
func (c *completionQueue) Poll(buf []rdma.Completion) int {
	if len(buf) == 0 || c.shut.Load() {
		return 0
	}
	if len(c.stash) > 0 { // completions a bind wait polled (grant.go)
		k := copy(buf, c.stash)
		c.stash = c.stash[k:]
		return k
	}
	n := int(C.tb_poll(c.cq, C.int(min(len(buf), len(c.wc))), &c.wc[0]))
	j := 0
	for i := 0; i < n; i++ {
		w := &c.wc[i]
		if uint64(w.wr_id) == bindWRID && uint32(w.status) == C.IBV_WC_SUCCESS {
			continue // a memory window bound (grant.go): not the caller's
		}
		buf[j] = c.convert(w)
		j++
	}
	return j
}

// pollRaw polls up to len(c.wc) completions into c.wc.
func (c *completionQueue) pollRaw() int { return int(C.tb_poll(c.cq, C.int(len(c.wc)), &c.wc[0])) }

// convert is the rdma.Completion of w.
func (c *completionQueue) convert(w *C.tb_wc) rdma.Completion {
	st := rdma.StatusFatal
	if s := uint32(w.status); s < uint32(len(statusOf)) && (s == C.IBV_WC_SUCCESS || statusOf[s] != rdma.StatusSuccess) {
		st = statusOf[s]
	}
	op := rdma.Opcode(0)
	if o := uint32(w.opcode); o < uint32(len(opcodeOf)) {
		op = opcodeOf[o]
	}
	return rdma.Completion{ID: uint64(w.wr_id), Status: st, Op: op,
		QPN: uint32(w.qp_num), Bytes: uint32(w.byte_len), Imm: uint32(w.imm)}
}

func (c *completionQueue) Close() error {
	c.once.Do(func() {
		c.shut.Store(true)
		c.dev.mu.Lock()
		delete(c.dev.cqs, c)
		c.dev.mu.Unlock()
		if rc := C.ibv_destroy_cq(c.cq); rc != 0 {
			c.err = fmt.Errorf("verbs: destroy cq (close its QPs first): %w", syscall.Errno(rc))
		}
	})
	return c.err
}

// CreateQP creates a reliable-connected queue pair in RESET.
func (d *Device) CreateQP(cfg rdma.QPConfig) (rdma.QueuePair, error) {
	if cfg.MaxInline == 0 {
		cfg.MaxInline = d.caps.MaxInline
	}
	if err := cfg.Validate(d.caps); err != nil {
		return nil, err
	}
	scq, ok1 := cfg.SendCQ.(*completionQueue)
	rcq, ok2 := cfg.RecvCQ.(*completionQueue)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%w: verbs QPs need verbs CQs", rdma.ErrInvalidConfig)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, rdma.ErrClosed
	}
	sig := C.int(0)
	if cfg.SignalAll {
		sig = 1
	}
	qp := C.tb_create_qp(d.pd, scq.cq, rcq.cq, C.int(cfg.SendDepth), C.int(cfg.RecvDepth), C.int(cfg.MaxInline), sig)
	if qp == nil {
		return nil, fmt.Errorf("verbs: ibv_create_qp failed (send %d, recv %d, inline %d)", cfg.SendDepth, cfg.RecvDepth, cfg.MaxInline)
	}
	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	q := &queuePair{dev: d, qp: qp, cfg: cfg,
		psn:   binary.LittleEndian.Uint32(rnd[:4]) & 0xffffff,
		nonce: binary.LittleEndian.Uint64(rnd[4:])}
	d.qps[q] = struct{}{}
	return q, nil
}

type queuePair struct {
	dev    *Device
	qp     *C.struct_ibv_qp
	cfg    rdma.QPConfig
	psn    uint32
	nonce  uint64
	closed atomic.Bool
	once   sync.Once
	err    error

	// Memory windows granted to the peer (grant.go); under grantMu.
	grantMu   sync.Mutex
	windows   []*window
	connected bool // in RTS once: grants bind at once
}

func (q *queuePair) Num() uint32 { return uint32(q.qp.qp_num) }

func (q *queuePair) State() rdma.QPState {
	if q.closed.Load() {
		return rdma.QPClosed
	}
	switch C.tb_qp_state(q.qp) {
	case C.IBV_QPS_RESET:
		return rdma.QPReset
	case C.IBV_QPS_INIT:
		return rdma.QPInit
	case C.IBV_QPS_RTR:
		return rdma.QPReadyToReceive
	case C.IBV_QPS_RTS:
		return rdma.QPReadyToSend
	}
	return rdma.QPError
}

func (q *queuePair) LocalEndpoint() rdma.Endpoint {
	return rdma.Endpoint{Provider: rdma.ProviderVerbs, HostID: q.dev.cfg.HostID, QPN: q.Num(), PSN: q.psn,
		Nonce: q.nonce, Addr: q.dev.cfg.Device, LID: q.dev.lid, GID: q.dev.gid, MTU: q.dev.mtu}
}

// Connect walks RESET → INIT → RTR → RTS towards remote.
func (q *queuePair) Connect(ctx context.Context, remote rdma.Endpoint) error {
	if remote.Provider != rdma.ProviderVerbs {
		return fmt.Errorf("%w: %s", rdma.ErrProviderMismatch, remote)
	}
	if q.closed.Load() {
		return rdma.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	port := C.uint8_t(q.dev.cfg.Port)
	mtu := mtuEnum(min(q.dev.mtu, remote.MTU))
	gid := remote.GID
	steps := []struct {
		name string
		rc   func() C.int
	}{
		{"INIT", func() C.int { return C.tb_to_init(q.qp, port) }},
		{"RTR", func() C.int {
			return C.tb_to_rtr(q.qp, port, mtu, C.uint32_t(remote.QPN), C.uint32_t(remote.PSN&0xffffff),
				C.uint16_t(remote.LID), (*C.uint8_t)(unsafe.Pointer(&gid[0])), C.int(q.dev.cfg.GIDIndex), q.dev.rdAtomic)
		}},
		{"RTS", func() C.int { return C.tb_to_rts(q.qp, C.uint32_t(q.psn), q.dev.rdAtomic) }},
	}
	for _, s := range steps {
		if rc := s.rc(); rc != 0 {
			C.tb_to_err(q.qp)
			return fmt.Errorf("verbs: QP %d to %s towards %s: %w", q.Num(), s.name, remote, syscall.Errno(rc))
		}
	}
	if err := q.bindQueued(); err != nil { // the grants made before Connect
		C.tb_to_err(q.qp)
		return err
	}
	return nil
}

var wrOpcode = [...]C.int{
	rdma.OpWrite:          C.IBV_WR_RDMA_WRITE,
	rdma.OpWriteImm:       C.IBV_WR_RDMA_WRITE_WITH_IMM,
	rdma.OpRead:           C.IBV_WR_RDMA_READ,
	rdma.OpCompareAndSwap: C.IBV_WR_ATOMIC_CMP_AND_SWP,
	rdma.OpFetchAndAdd:    C.IBV_WR_ATOMIC_FETCH_AND_ADD,
	rdma.OpSend:           C.IBV_WR_SEND,
}

// PostSend posts wr with one cgo call. An inline payload is copied by the
// NIC before it returns.
func (q *queuePair) PostSend(wr *rdma.WorkRequest) error {
	if q.closed.Load() {
		return rdma.ErrClosed
	}
	if wr.Op < rdma.OpWrite || wr.Op > rdma.OpSend {
		return rdma.ErrInvalidRequest
	}
	op := wrOpcode[wr.Op]
	if wr.Op == rdma.OpSend && wr.Imm != 0 {
		op = C.IBV_WR_SEND_WITH_IMM
	}
	var flags C.uint
	if wr.Flags&rdma.FlagSignaled != 0 {
		flags |= C.IBV_SEND_SIGNALED
	}
	if wr.Flags&rdma.FlagFence != 0 {
		flags |= C.IBV_SEND_FENCE
	}
	var inl unsafe.Pointer
	l := wr.Local
	if wr.Flags&rdma.FlagInline != 0 {
		flags |= C.IBV_SEND_INLINE
		if len(wr.Inline) > q.cfg.MaxInline {
			return rdma.ErrInvalidRequest
		}
		l = rdma.SGE{Len: uint32(len(wr.Inline))}
		if len(wr.Inline) > 0 {
			inl = unsafe.Pointer(&wr.Inline[0])
		}
	}
	compareAdd := wr.Compare
	if wr.Op == rdma.OpFetchAndAdd {
		compareAdd = wr.Add
	}
	rc := C.tb_post_send(q.qp, C.uint64_t(wr.ID), op, flags, inl,
		C.uint64_t(l.Addr), C.uint32_t(l.Len), C.uint32_t(l.LKey),
		C.uint64_t(wr.Remote.Addr), C.uint32_t(wr.Remote.RKey), C.uint32_t(wr.Imm),
		C.uint64_t(compareAdd), C.uint64_t(wr.Swap))
	switch rc {
	case 0:
		return nil
	case C.ENOMEM:
		return rdma.ErrSendQueueFull
	}
	return rdma.ErrInvalidRequest
}

func (q *queuePair) PostRecv(rr *rdma.RecvRequest) error {
	if q.closed.Load() {
		return rdma.ErrClosed
	}
	switch rc := C.tb_post_recv(q.qp, C.uint64_t(rr.ID), C.uint64_t(rr.Local.Addr), C.uint32_t(rr.Local.Len), C.uint32_t(rr.Local.LKey)); rc {
	case 0:
		return nil
	case C.ENOMEM:
		return rdma.ErrRecvQueueFull
	}
	return rdma.ErrInvalidRequest
}

// Close moves the QP to ERR (flushing what is outstanding) and destroys it.
func (q *queuePair) Close() error {
	q.once.Do(func() {
		q.closed.Store(true)
		C.tb_to_err(q.qp)
		q.dev.mu.Lock()
		delete(q.dev.qps, q)
		q.dev.mu.Unlock()
		q.err = q.closeWindows() // before the QP they are bound to
		if rc := C.ibv_destroy_qp(q.qp); rc != 0 {
			q.err = errors.Join(q.err, fmt.Errorf("verbs: destroy qp %d: %w", q.Num(), syscall.Errno(rc)))
		}
	})
	return q.err
}

// Close destroys every QP, CQ and region, then the PD and the context.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	qps, cqs, regions := keys(d.qps), keys(d.cqs), keys(d.regions)
	d.mu.Unlock()
	var errs []error
	for _, q := range qps {
		errs = append(errs, q.Close())
	}
	for _, c := range cqs {
		errs = append(errs, c.Close())
	}
	for _, r := range regions {
		errs = append(errs, r.Close())
	}
	if d.pd != nil {
		if rc := C.ibv_dealloc_pd(d.pd); rc != 0 {
			errs = append(errs, fmt.Errorf("verbs: dealloc pd: %w", syscall.Errno(rc)))
		}
	}
	if d.ctx != nil {
		if rc := C.ibv_close_device(d.ctx); rc != 0 {
			errs = append(errs, fmt.Errorf("verbs: close device: %w", syscall.Errno(rc)))
		}
	}
	return errors.Join(errs...)
}

func keys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
