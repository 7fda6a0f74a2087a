package shm

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/tickbus/tickbus/rdma"
)

// Sentinel errors of this provider. Test them with errors.Is.
var (
	// ErrPeerCredentials: the process at the other end of the control
	// socket runs as a uid that is neither ours nor allowed by Config.
	ErrPeerCredentials = errors.New("shm: peer credentials refused")
	// ErrProtocol: the peer broke the control protocol; its connection is
	// closed.
	ErrProtocol = errors.New("shm: control protocol violation")
	// ErrOtherHost: the endpoint names another host; shm reaches only peers
	// on this one.
	ErrOtherHost = errors.New("shm: endpoint is on another host")
	// ErrNotShared: Register was given memory that internal/shmem did not
	// allocate, so no peer could map it.
	ErrNotShared = errors.New("shm: memory is not shareable (not allocated by a tickbus device)")
)

// Limits.
const (
	maxInline   = 1024
	maxMsgSize  = 1 << 30
	maxQPDepth  = 1 << 15
	maxCQDepth  = 1 << 20
	maxRegion   = 1 << 40
	dialTimeout = 5 * time.Second
)

var pageSize = uint64(unix.Getpagesize())

// Config configures a device. The zero value works.
type Config struct {
	// HostID names this host; default os.Hostname(). Connect refuses an
	// endpoint with another host id.
	HostID string
	// AllowUIDs are peers' uids allowed besides our own.
	AllowUIDs []uint32
	// Logger receives control-path events; default zerolog.Nop().
	Logger zerolog.Logger
	// MaxSend is the largest SEND payload a QP of this device receives;
	// default 4096, at most 1 MiB. Each QP's receive queue holds
	// RecvDepth (rounded up to a power of two) slots of this size.
	MaxSend int
	// ControlTimeout bounds each control exchange (connect without a
	// context deadline, pushing a region to a peer and waiting for its ack);
	// default 5s.
	ControlTimeout time.Duration
}

// Device is an opened shm provider. It implements rdma.Device.
type Device struct {
	cfg     Config
	log     zerolog.Logger
	hostID  string
	addr    string // abstract socket name, "@tickbus-shm-<pid>-<random>"
	ln      *net.UnixListener
	uid     uint32
	maxSend int
	timeout time.Duration

	// keys maps lkeys (= rkeys) to the device's regions. The hot path loads
	// it; the control path replaces it under mu (copy on write).
	keys atomic.Pointer[keyTable]
	// qps is indexed by QPN; copy on write under mu.
	qps atomic.Pointer[[]*QP]

	accessErrors atomic.Uint64 // remote access errors that closed a connection

	mu      sync.Mutex // control path: tables, exports, lists below
	closed  atomic.Bool
	regions map[*Region]struct{}
	cqs     map[*CQ]struct{}
	exports map[*ctlConn]*QP // accepted connections to push regions to
	conns   map[*ctlConn]struct{}
	wg      sync.WaitGroup

	// maps shares peers' region mappings among this device's QPs.
	mapsMu sync.Mutex
	maps   map[mapKey]*remoteRegion

	closeOnce sync.Once
	closeErr  error
}

type keyTable struct{ m map[uint32]*Region }

var _ rdma.Device = (*Device)(nil)

// Open opens a device: it listens on an abstract unix socket (nothing in the
// file system, gone with the process even after SIGKILL) for peers'
// connections.
func Open(cfg Config) (*Device, error) {
	d := &Device{
		cfg:     cfg,
		log:     cfg.Logger,
		hostID:  cfg.HostID,
		maxSend: cfg.MaxSend,
		timeout: cfg.ControlTimeout,
		uid:     uint32(os.Getuid()),
		regions: make(map[*Region]struct{}),
		cqs:     make(map[*CQ]struct{}),
		exports: make(map[*ctlConn]*QP),
		conns:   make(map[*ctlConn]struct{}),
		maps:    make(map[mapKey]*remoteRegion),
	}
	if d.hostID == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("shm: host id: %w", err)
		}
		d.hostID = h
	}
	if len(d.hostID) > 255 {
		return nil, fmt.Errorf("%w: shm HostID of %d bytes, want at most 255", rdma.ErrInvalidConfig, len(d.hostID))
	}
	switch {
	case d.maxSend == 0:
		d.maxSend = defaultMaxSend
	case d.maxSend < 0 || d.maxSend > maxSendLimit:
		return nil, fmt.Errorf("%w: shm MaxSend %d, want 0..%d", rdma.ErrInvalidConfig, cfg.MaxSend, maxSendLimit)
	}
	switch {
	case d.timeout == 0:
		d.timeout = dialTimeout
	case d.timeout < 0:
		return nil, fmt.Errorf("%w: shm ControlTimeout %v, want > 0", rdma.ErrInvalidConfig, cfg.ControlTimeout)
	}
	d.keys.Store(&keyTable{m: map[uint32]*Region{}})
	d.qps.Store(&[]*QP{nil}) // QPN 0 is never used
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("shm: random socket name: %w", err)
	}
	d.addr = fmt.Sprintf("@tickbus-shm-%d-%x", os.Getpid(), rnd)
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: d.addr, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("shm: listen on %s: %w", d.addr, err)
	}
	d.ln = ln
	d.wg.Add(1)
	go d.acceptLoop()
	d.log.Debug().Str("addr", d.addr).Str("host", d.hostID).Msg("shm device open")
	return d, nil
}

// Provider is rdma.ProviderShm.
func (d *Device) Provider() string { return rdma.ProviderShm }

// HostID is the configured host id.
func (d *Device) HostID() string { return d.hostID }

// Addr is the abstract unix socket peers connect to.
func (d *Device) Addr() string { return d.addr }

// Caps are the device's limits. Atomics are CPU atomics on the mapped word,
// so they are atomic against the owner's CPU atomics too (AtomicGlobal).
func (d *Device) Caps() rdma.Caps {
	return rdma.Caps{
		MaxInline:    maxInline,
		MaxMsgSize:   maxMsgSize,
		MaxQPDepth:   maxQPDepth,
		MaxCQDepth:   maxCQDepth,
		MaxRegion:    maxRegion,
		Atomic:       rdma.AtomicGlobal,
		ShareMemory:  true,
		CrossProcess: true,
		GrantPerQP:   true,
	}
}

// randomKey returns a fresh nonzero key not in use (under d.mu).
func (d *Device) randomKey() (uint32, error) {
	t := d.keys.Load()
	for range 64 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("shm: random key: %w", err)
		}
		k := binary.LittleEndian.Uint32(b[:])
		if _, used := t.m[k]; k != 0 && !used {
			return k, nil
		}
	}
	return 0, errors.New("shm: no free key")
}

func random64() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return binary.LittleEndian.Uint64(b[:])
}

// setKey and dropKey replace the key table (under d.mu).
func (d *Device) setKey(k uint32, r *Region) {
	old := d.keys.Load().m
	m := make(map[uint32]*Region, len(old)+1)
	for kk, rr := range old {
		m[kk] = rr
	}
	if r != nil {
		m[k] = r
	} else {
		delete(m, k)
	}
	d.keys.Store(&keyTable{m: m})
}

// localAt returns the local bytes an SGE names, or false if the lkey is
// unknown, the SGE lies outside its region or the region lacks need. Hot
// path: one atomic load and a map lookup.
func (d *Device) localAt(sge rdma.SGE, need rdma.Access) ([]byte, bool) {
	return d.keys.Load().m[sge.LKey].at(sge, need)
}

// at returns the bytes of r an SGE names, or false if r is nil, the SGE
// lies outside r or r lacks need.
func (r *Region) at(sge rdma.SGE, need rdma.Access) ([]byte, bool) {
	if r == nil || !r.access.Has(need) {
		return nil, false
	}
	n := uint64(sge.Len)
	if sge.Addr < r.addr || n > uint64(len(r.mem)) || sge.Addr-r.addr > uint64(len(r.mem))-n {
		return nil, false
	}
	off := sge.Addr - r.addr
	return r.mem[off : off+n : off+n], true
}

// quiesce waits until no PostSend of any QP and no Poll of any CQ of this
// device is running, after the caller unpublished something they might have
// loaded. Control path.
func (d *Device) quiesce() {
	for _, q := range *d.qps.Load() {
		if q != nil {
			q.waitIdle()
		}
	}
	d.mu.Lock()
	cqs := make([]*CQ, 0, len(d.cqs))
	for c := range d.cqs {
		cqs = append(cqs, c)
	}
	d.mu.Unlock()
	for _, c := range cqs {
		c.waitIdle()
	}
}

// waitGen waits for a section guarded by gen (odd inside, even outside) to
// be left: at once if gen is even, else until gen moves. Sections are short
// and never block, so this returns quickly.
func waitGen(gen *atomic.Uint64) {
	g := gen.Load()
	if g&1 == 0 {
		return
	}
	for gen.Load() == g {
		runtime.Gosched()
	}
}

// Close closes every QP, CQ and region the device made and stops listening.
// Idempotent.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		d.closed.Store(true)
		var errs []error
		errs = append(errs, d.ln.Close())
		for _, q := range *d.qps.Load() {
			if q != nil {
				errs = append(errs, q.Close())
			}
		}
		d.mu.Lock()
		for c := range d.conns {
			c.close()
		}
		regions := make([]*Region, 0, len(d.regions))
		for r := range d.regions {
			regions = append(regions, r)
		}
		cqs := make([]*CQ, 0, len(d.cqs))
		for c := range d.cqs {
			cqs = append(cqs, c)
		}
		d.mu.Unlock()
		d.wg.Wait()
		for _, r := range regions {
			errs = append(errs, r.Close())
		}
		for _, c := range cqs {
			errs = append(errs, c.Close())
		}
		d.closeErr = errors.Join(errs...)
		d.log.Debug().Str("addr", d.addr).Err(d.closeErr).Msg("shm device closed")
	})
	return d.closeErr
}

func (d *Device) errIfClosed() error {
	if d.closed.Load() {
		return fmt.Errorf("%w: shm device", rdma.ErrClosed)
	}
	return nil
}
