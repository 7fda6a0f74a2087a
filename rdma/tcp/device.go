package tcp

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tickbus/tickbus/internal/shmem"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/internal/swcq"
)

// Device is an opened tcp provider: a listener that peers' queue pairs dial,
// the regions it registered, and its CQs and QPs. It implements rdma.Device.
type Device struct {
	cfg    Config
	log    zerolog.Logger
	ln     net.Listener
	addr   string  // what endpoints carry
	poller *poller // shared by every device of the process

	keys atomic.Pointer[keyTable]

	accessErrors atomic.Uint64 // remote access errors that closed a connection

	mu      sync.Mutex // control path: tables below, keys updates
	closed  bool
	regions map[*region]struct{}
	cqs     []*CQ
	qps     map[uint32]*QP
	qpTable atomic.Pointer[map[uint32]*QP] // copy of qps for pollers, replaced whole
	nextQPN uint32
	conns   map[net.Conn]struct{} // accepted connections still handshaking

	wg   sync.WaitGroup
	done chan struct{}
	once sync.Once
	err  error
}

var _ rdma.Device = (*Device)(nil)

// Open starts a device: it binds the listener and starts the goroutines that
// accept data connections and watch for unanswered requests.
func Open(cfg Config) (*Device, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p, err := acquirePoller()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		releasePoller()
		return nil, fmt.Errorf("tcp: listen %s: %w", cfg.Listen, err)
	}
	d := &Device{
		cfg:     cfg,
		log:     cfg.Logger.With().Str("rdma", "tcp").Str("host", cfg.HostID).Logger(),
		ln:      ln,
		addr:    ln.Addr().String(),
		poller:  p,
		regions: make(map[*region]struct{}),
		qps:     make(map[uint32]*QP),
		nextQPN: uint32(randUint64()%(1<<20)) + 1<<20,
		conns:   make(map[net.Conn]struct{}),
		done:    make(chan struct{}),
	}
	if cfg.Advertise != "" {
		d.addr = cfg.Advertise
	}
	d.qpTable.Store(&map[uint32]*QP{})
	d.keys.Store(&keyTable{byL: map[uint32]*region{}, byR: map[uint32]*region{}})
	d.wg.Add(2)
	go d.acceptLoop()
	go d.watchdog()
	d.log.Info().Str("listen", ln.Addr().String()).Str("advertise", d.addr).Msg("tcp device open")
	return d, nil
}

func (d *Device) Provider() string { return rdma.ProviderTCP }
func (d *Device) HostID() string   { return d.cfg.HostID }

// Addr is the address put in this device's endpoints.
func (d *Device) Addr() string { return d.addr }

func (d *Device) Caps() rdma.Caps {
	return rdma.Caps{
		MaxInline:  maxInline,
		MaxMsgSize: d.cfg.MaxMsgSize,
		MaxQPDepth: maxQPDepth,
		MaxCQDepth: maxCQDepth,
		MaxRegion:  1 << 40,
		// The responder applies atomics with sync/atomic on the mapped
		// words, so they are atomic against CPU atomics too.
		Atomic:       rdma.AtomicGlobal,
		ShareMemory:  true,
		CrossProcess: true,
		GrantPerQP:   true,
	}
}

func (d *Device) RegisterMemory(size int, access rdma.Access) (rdma.MemoryRegion, error) {
	if size <= 0 || size > d.Caps().MaxRegion {
		return nil, fmt.Errorf("%w: region size %d, want 1..%d", rdma.ErrInvalidConfig, size, d.Caps().MaxRegion)
	}
	if access&^(rdma.AccessLocalWrite|rdma.AccessRemote) != 0 {
		return nil, fmt.Errorf("%w: unknown access bits %#x", rdma.ErrInvalidConfig, uint32(access))
	}
	m, err := shmem.Alloc("tcp", size)
	if err != nil {
		return nil, err
	}
	r, err := d.add(m.Bytes(), access, m)
	if err != nil {
		m.Close()
		return nil, err
	}
	return r, nil
}

func (d *Device) Register(mem []byte, access rdma.Access) (rdma.MemoryRegion, error) {
	if access&^(rdma.AccessLocalWrite|rdma.AccessRemote) != 0 {
		return nil, fmt.Errorf("%w: unknown access bits %#x", rdma.ErrInvalidConfig, uint32(access))
	}
	if _, _, err := shmem.Lookup(mem); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotRegistrable, err)
	}
	return d.add(mem, access, nil)
}

func (d *Device) add(mem []byte, access rdma.Access, owned *shmem.Mapping) (*region, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, rdma.ErrClosed
	}
	old := d.keys.Load()
	lkey, err := newKey(old)
	if err != nil {
		return nil, err
	}
	t := &keyTable{byL: make(map[uint32]*region, len(old.byL)+1), byR: make(map[uint32]*region, len(old.byR)+1)}
	for k, v := range old.byL {
		t.byL[k] = v
	}
	for k, v := range old.byR {
		t.byR[k] = v
	}
	t.byL[lkey] = nil // reserve so the rkey differs
	rkey, err := newKey(t)
	if err != nil {
		return nil, err
	}
	r := &region{dev: d, b: mem, addr: sliceAddr(mem), lkey: lkey, rkey: rkey, access: access, owned: owned}
	t.byL[lkey] = r
	t.byR[rkey] = r
	d.keys.Store(t)
	d.regions[r] = struct{}{}
	return r, nil
}

// forget removes r's keys, so no new op finds it.
func (d *Device) forget(r *region) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.regions, r)
	old := d.keys.Load()
	if old.byL[r.lkey] != r {
		return
	}
	t := &keyTable{byL: make(map[uint32]*region, len(old.byL)), byR: make(map[uint32]*region, len(old.byR))}
	for k, v := range old.byL {
		if v != r {
			t.byL[k] = v
		}
	}
	for k, v := range old.byR {
		if v != r {
			t.byR[k] = v
		}
	}
	d.keys.Store(t)
}

func (d *Device) CreateCQ(depth int) (rdma.CompletionQueue, error) {
	if depth < 1 || depth > maxCQDepth {
		return nil, fmt.Errorf("%w: CQ depth %d, want 1..%d", rdma.ErrInvalidConfig, depth, maxCQDepth)
	}
	sq, err := swcq.New(depth)
	if err != nil {
		return nil, err
	}
	q := &CQ{dev: d, q: sq, stash: min(64, sq.Cap()/64)}
	q.credits.Store(int64(sq.Cap()))
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, rdma.ErrClosed
	}
	d.cqs = append(d.cqs, q)
	return q, nil
}

func (d *Device) CreateQP(cfg rdma.QPConfig) (rdma.QueuePair, error) {
	if err := cfg.Validate(d.Caps()); err != nil {
		return nil, err
	}
	scq, ok1 := cfg.SendCQ.(*CQ)
	rcq, ok2 := cfg.RecvCQ.(*CQ)
	if !ok1 || !ok2 || scq.dev != d || rcq.dev != d {
		return nil, fmt.Errorf("%w: a tcp QP needs CQs made by the same tcp device", rdma.ErrInvalidConfig)
	}
	if scq.q.Closed() || rcq.q.Closed() {
		return nil, fmt.Errorf("%w: CQ is closed", rdma.ErrClosed)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, rdma.ErrClosed
	}
	for {
		d.nextQPN++
		if d.nextQPN == 0 {
			d.nextQPN = 1
		}
		if _, used := d.qps[d.nextQPN]; !used {
			break
		}
	}
	q := newQP(d, d.nextQPN, cfg, scq, rcq)
	d.qps[q.num] = q
	d.publishQPs()
	return q, nil
}

func (d *Device) dropQP(q *QP) {
	d.mu.Lock()
	if d.qps[q.num] == q {
		delete(d.qps, q.num)
		d.publishQPs()
	}
	d.mu.Unlock()
}

// publishQPs copies qps for pollers. Called with mu held.
func (d *Device) publishQPs() {
	t := make(map[uint32]*QP, len(d.qps))
	for k, v := range d.qps {
		t[k] = v
	}
	d.qpTable.Store(&t)
}

// Close closes the listener and every QP, CQ and region the device made.
// Idempotent.
func (d *Device) Close() error {
	d.once.Do(func() {
		d.mu.Lock()
		d.closed = true
		qps := make([]*QP, 0, len(d.qps))
		for _, q := range d.qps {
			qps = append(qps, q)
		}
		regions := make([]*region, 0, len(d.regions))
		for r := range d.regions {
			regions = append(regions, r)
		}
		cqs := d.cqs
		for c := range d.conns {
			c.Close()
		}
		d.mu.Unlock()

		close(d.done)
		errs := []error{d.ln.Close()}
		var wg sync.WaitGroup // QPs linger in parallel
		for _, q := range qps {
			wg.Go(func() { q.Close() })
		}
		wg.Wait()
		d.wg.Wait()
		for _, r := range regions {
			errs = append(errs, r.Close())
		}
		for _, c := range cqs {
			errs = append(errs, c.Close())
		}
		errs = append(errs, releasePoller()) // every connection of this device is closed by now
		d.err = errors.Join(errs...)
		d.log.Info().Msg("tcp device closed")
	})
	return d.err
}

func (d *Device) acceptLoop() {
	defer d.wg.Done()
	for {
		c, err := d.ln.Accept()
		if err != nil {
			select {
			case <-d.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			d.log.Warn().Err(err).Msg("accept")
			time.Sleep(10 * time.Millisecond)
			continue
		}
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			c.Close()
			return
		}
		d.conns[c] = struct{}{}
		d.wg.Add(1)
		d.mu.Unlock()
		go d.handshake(c)
	}
}

// handshake answers a dialling requester and, if it names a live QP of this
// device, hands the connection to that QP's responder.
func (d *Device) handshake(c net.Conn) {
	defer d.wg.Done()
	untrack := func() {
		d.mu.Lock()
		delete(d.conns, c)
		d.mu.Unlock()
	}
	setNoDelay(c)
	c.SetDeadline(time.Now().Add(d.cfg.ConnectTimeout))
	h, err := readHello(c)
	if err != nil {
		d.log.Warn().Err(err).Str("peer", c.RemoteAddr().String()).Msg("bad handshake; closing connection")
		if errors.Is(err, ErrHandshakeVersion) {
			c.Write(marshalReply(hsBadVersion, 0, [8]byte{}))
		}
		untrack()
		c.Close()
		return
	}
	untrack() // from here the QP (or this goroutine) closes c; reads and writes stay bounded by the deadline
	d.mu.Lock()
	q := d.qps[h.dstQPN]
	d.mu.Unlock()
	status := hsNotFound
	var rc *rawConn
	var mac [8]byte
	if q != nil && h.verify(q.nonce) {
		status, rc = q.attachIncoming(c, h)
		if status == hsOK {
			mac = replyMAC(q.nonce, status, uint32(d.cfg.MaxMsgSize), &h)
		}
	}
	_, err = c.Write(marshalReply(status, uint32(d.cfg.MaxMsgSize), mac))
	if err == nil && rc != nil {
		err = c.SetDeadline(time.Time{})
		if err == nil {
			err = rc.block()
		}
	}
	if err != nil || status != hsOK {
		d.log.Warn().Err(err).Uint8("status", status).Uint32("qpn", h.dstQPN).Msg("handshake refused or failed")
		if rc != nil {
			q.fail(rdma.StatusRetryExceeded, fmt.Errorf("tcp: handshake reply: %w", err))
			rc.release()
		} else {
			c.Close()
		}
		return
	}
	q.serve(rc)
}

// watchdog fails queue pairs whose oldest outstanding request has had no
// answer for AckTimeout.
func (d *Device) watchdog() {
	defer d.wg.Done()
	tick := d.cfg.AckTimeout / 4
	if tick < 5*time.Millisecond {
		tick = 5 * time.Millisecond
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	var qps []*QP
	for {
		select {
		case <-d.done:
			return
		case now := <-t.C:
			qps = qps[:0]
			d.mu.Lock()
			for _, q := range d.qps {
				qps = append(qps, q)
			}
			d.mu.Unlock()
			for _, q := range qps {
				q.checkProgress(now, d.cfg.AckTimeout)
			}
		}
	}
}

func setNoDelay(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		tc.SetKeepAlive(true)
		tc.SetKeepAlivePeriod(5 * time.Second)
	}
}
