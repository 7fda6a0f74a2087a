package ring

import (
	"bufio"
	"context"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/internal/child"
	"github.com/tickbus/tickbus/internal/testlog"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/shm"
)

// Cross-process rigs. The parent hosts the topic's home; publishers and
// subscribers are separate processes of this test binary (internal/child).
// Descriptors and endpoints travel as hex on the children's stdin/stdout:
//
//	sub → parent: RING <ringdesc>, EP <k> <endpoint> (one QP per publisher k)
//	pub → parent: EP home <endpoint>, EP <j> <endpoint> (one QP per sub j)
//	parent → pub: HOME <homedesc> <endpoint>, RING <j> <ringdesc> <endpoint>
//	pub → parent: CREDIT <j> <creditdesc> (reliable rings), READY
//	parent → sub: PEER <k> <endpoint>, CREDIT <k> <creditdesc>, GO
//	parent → pub: GO;  children → parent: DONE k=v ...;  parent → all: EXIT

const hostID = "ring-proc-test"

func init() {
	child.Register("ring-sub", subMain)
	child.Register("ring-pub", pubMain)
}

func TestMain(m *testing.M) {
	child.Main()
	os.Exit(m.Run())
}

// ---- tick payload used by the process tests --------------------------------

// fillPayload writes pub id, a number (per-publisher counter or exchange
// sequence), filler derived from both, and a CRC32 of all that.
func fillPayload(b []byte, pub uint32, num uint64) {
	binary.LittleEndian.PutUint32(b, pub)
	binary.LittleEndian.PutUint64(b[4:], num)
	x := num*0x9e3779b97f4a7c15 ^ uint64(pub)
	for i := 12; i < len(b)-4; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
}

func payloadOK(b []byte) bool {
	return len(b) >= 16 && binary.LittleEndian.Uint32(b[len(b)-4:]) == crc32.ChecksumIEEE(b[:len(b)-4])
}

// ---- child plumbing ---------------------------------------------------------

type lines struct{ sc *bufio.Scanner }

func (l *lines) next(prefix string) []string {
	for l.sc.Scan() {
		f := strings.Fields(l.sc.Text())
		if len(f) > 0 && f[0] == prefix {
			return f[1:]
		}
		if len(f) > 0 && f[0] == "EXIT" {
			os.Exit(0)
		}
	}
	fmt.Fprintf(os.Stderr, "stdin closed while waiting for %s\n", prefix)
	os.Exit(3)
	return nil
}

func hexOf(m encoding.BinaryMarshaler) string {
	b, err := m.MarshalBinary()
	if err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func unhex(s string, u encoding.BinaryUnmarshaler) error {
	b, err := hex.DecodeString(s)
	if err != nil {
		return err
	}
	return u.UnmarshalBinary(b)
}

func die(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	return 1
}

func mkQP(dev rdma.Device, cq rdma.CompletionQueue) (rdma.QueuePair, error) {
	return dev.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 512})
}

func connectTo(qp rdma.QueuePair, epHex string) error {
	var ep rdma.Endpoint
	if err := unhex(epHex, &ep); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return qp.Connect(ctx, ep)
}

// ---- subscriber process -----------------------------------------------------

// subChecker is the subscriber's handler: it checks every sequence comes
// once and in order, every payload's checksum, and hashes the order.
type subChecker struct {
	expect     uint64 // next sequence to be accounted for
	delivered  uint64
	badCRC     uint64
	badOrder   uint64
	badExch    uint64 // A/B: the payload's exchange number is not the sequence
	checkExch  bool
	order      uint64 // FNV-1a over (seq, crc) of every delivered tick
	events     []string
	stallAfter uint64
	stallFor   time.Duration
	stalled    bool
}

func (c *subChecker) OnTicks(ts []Tick) {
	for i := range ts {
		t := &ts[i]
		if t.Seq != c.expect {
			c.badOrder++
		}
		c.expect = t.Seq + 1
		if !payloadOK(t.Payload) {
			c.badCRC++
		} else if c.checkExch && binary.LittleEndian.Uint64(t.Payload[4:]) != t.Seq {
			c.badExch++
		}
		var b [12]byte
		binary.LittleEndian.PutUint64(b[:], t.Seq)
		copy(b[8:], t.Payload[len(t.Payload)-4:])
		for _, x := range b {
			c.order = (c.order ^ uint64(x)) * 1099511628211
		}
		c.delivered++
	}
}

func (c *subChecker) OnEvent(ev Event) {
	if ev.From != c.expect {
		c.badOrder++
	}
	c.expect = ev.To + 1
	c.events = append(c.events, fmt.Sprintf("%s:%d-%d", ev.Kind, ev.From, ev.To))
}

func subMain(args []string) int {
	fs := flag.NewFlagSet("ring-sub", flag.ContinueOnError)
	mode := fs.String("mode", "reliable", "lossy or reliable")
	slots := fs.Int("slots", 16384, "ring slots")
	slotSize := fs.Int("slot-size", 128, "ring slot bytes")
	npub := fs.Int("pubs", 1, "publishers")
	end := fs.Uint64("end", 0, "last sequence to account for")
	gap := fs.Duration("gap", 200*time.Millisecond, "gap timeout")
	stallAfter := fs.Uint64("stall-after", 0, "stall once after this many ticks")
	stallFor := fs.Duration("stall-for", 0, "how long to stall")
	exch := fs.Bool("exch", false, "payload carries the exchange sequence = ring sequence")
	limit := fs.Duration("limit", 90*time.Second, "give up after")
	idleName := fs.String("idle", "backoff", "idle strategy: spin, yield or backoff")
	useJournal := fs.Bool("journal", false, "recover from the home's journal (a QP to the home)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	idle, err := rdma.ParseIdle(*idleName)
	if err != nil {
		return die("%v", err)
	}
	m, err := ParseMode(*mode)
	if err != nil {
		return die("%v", err)
	}
	in := &lines{sc: bufio.NewScanner(os.Stdin)}
	in.sc.Buffer(make([]byte, 64<<10), 64<<10)
	dev, err := shm.Open(shm.Config{HostID: hostID})
	if err != nil {
		return die("open: %v", err)
	}
	defer dev.Close()
	cq, err := dev.CreateCQ(4096)
	if err != nil {
		return die("cq: %v", err)
	}
	r, err := NewRing(dev, RingConfig{Slots: *slots, SlotSize: *slotSize, Mode: m, GapTimeout: *gap, CQ: cq})
	if err != nil {
		return die("ring: %v", err)
	}
	defer r.Close()
	fmt.Printf("RING %s\n", hexOf(r.Desc()))
	qps := make([]rdma.QueuePair, *npub)
	for k := range qps {
		if qps[k], err = mkQP(dev, cq); err != nil {
			return die("qp: %v", err)
		}
		fmt.Printf("EP %d %s\n", k, hexOf(qps[k].LocalEndpoint()))
	}
	var jqp rdma.QueuePair
	if *useJournal {
		if jqp, err = mkQP(dev, cq); err != nil {
			return die("qp: %v", err)
		}
		fmt.Printf("JEP %s\n", hexOf(jqp.LocalEndpoint()))
	}
	for range qps {
		f := in.next("PEER")
		k, _ := strconv.Atoi(f[0])
		if err := connectTo(qps[k], f[1]); err != nil {
			return die("connect %d: %v", k, err)
		}
	}
	if m == Reliable {
		for range qps {
			f := in.next("CREDIT")
			k, _ := strconv.Atoi(f[0])
			var cd CreditDesc
			if err := unhex(f[1], &cd); err != nil {
				return die("credit desc: %v", err)
			}
			if err := r.Reader().AddCredit(qps[k], cd); err != nil {
				return die("add credit: %v", err)
			}
		}
	}
	if *useJournal {
		f := in.next("JOURNAL")
		var home HomeDesc
		if err := unhex(f[0], &home); err != nil {
			return die("home desc: %v", err)
		}
		if err := connectTo(jqp, f[1]); err != nil {
			return die("connect journal: %v", err)
		}
		if err := r.Reader().SetJournal(dev, jqp, home, time.Second); err != nil {
			return die("journal: %v", err)
		}
	}
	fmt.Println("READY")
	c := &subChecker{expect: 1, stallAfter: *stallAfter, stallFor: *stallFor, checkExch: *exch}
	rd := r.Reader()
	deadline := time.Now().Add(*limit)
	for c.expect <= *end {
		n := rd.Poll(c)
		idle.Idle(n)
		if !c.stalled && c.stallFor > 0 && c.delivered >= c.stallAfter {
			c.stalled = true
			time.Sleep(c.stallFor) // not polling: the ring fills up
		}
		if n == 0 && time.Now().After(deadline) {
			break
		}
	}
	st := rd.Stats()
	fmt.Printf("DONE delivered=%d badcrc=%d badorder=%d badexch=%d order=%x next=%d gap=%d overrun=%d corrupt=%d recovered=%d crediterr=%d torn=%d events=%s\n",
		c.delivered, c.badCRC, c.badOrder, c.badExch, c.order, c.expect, st.Gap, st.Overrun, st.Corrupt, st.Recovered, st.CreditErrors, st.Torn,
		strings.Join(append([]string{"-"}, c.events...), ","))
	in.next("EXIT")
	return 0
}

// ---- publisher process ------------------------------------------------------

func pubMain(args []string) int {
	fs := flag.NewFlagSet("ring-pub", flag.ContinueOnError)
	id := fs.Uint("id", 1, "publisher id")
	n := fs.Uint64("n", 1000, "ticks to publish")
	nsub := fs.Int("subs", 1, "subscribers")
	claim := fs.String("claim", "faa", "cas or faa")
	how := fs.String("how", "plain", "plain, batch, at (A/B: exchange sequences 1..n) or die (claim one after n ticks and hang)")
	size := fs.Int("size", 64, "payload bytes")
	timeout := fs.Duration("timeout", 10*time.Second, "writer timeout")
	retry := fs.Bool("retry", false, "retry a publish refused with ErrBackPressure before its claim")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cm, err := ParseClaimMode(*claim)
	if err != nil {
		return die("%v", err)
	}
	in := &lines{sc: bufio.NewScanner(os.Stdin)}
	in.sc.Buffer(make([]byte, 64<<10), 64<<10)
	dev, err := shm.Open(shm.Config{HostID: hostID})
	if err != nil {
		return die("open: %v", err)
	}
	defer dev.Close()
	cq, err := dev.CreateCQ(4096)
	if err != nil {
		return die("cq: %v", err)
	}
	homeQP, err := mkQP(dev, cq)
	if err != nil {
		return die("qp: %v", err)
	}
	fmt.Printf("EP home %s\n", hexOf(homeQP.LocalEndpoint()))
	qps := make([]rdma.QueuePair, *nsub)
	for j := range qps {
		if qps[j], err = mkQP(dev, cq); err != nil {
			return die("qp: %v", err)
		}
		fmt.Printf("EP %d %s\n", j, hexOf(qps[j].LocalEndpoint()))
	}
	f := in.next("HOME")
	var home HomeDesc
	if err := unhex(f[0], &home); err != nil {
		return die("home desc: %v", err)
	}
	if err := connectTo(homeQP, f[1]); err != nil {
		return die("connect home: %v", err)
	}
	w, err := NewWriter(WriterConfig{Device: dev, CQ: cq, HomeQP: homeQP, Home: home, PublisherID: uint32(*id),
		Claim: cm, Timeout: *timeout, Idle: rdma.NewBackoff(), MaxBatch: 32, Generic: forceGeneric,
		MaxPayload: *size}) // so a subscriber's ring of 96-byte slots (-slot-size) holds it
	if err != nil {
		return die("writer: %v", err)
	}
	defer w.Close()
	for range qps {
		f := in.next("RING")
		j, _ := strconv.Atoi(f[0])
		var rd RingDesc
		if err := unhex(f[1], &rd); err != nil {
			return die("ring desc: %v", err)
		}
		if err := connectTo(qps[j], f[2]); err != nil {
			return die("connect ring %d: %v", j, err)
		}
		cd, err := w.AddTarget(Target{ID: uint64(j), QP: qps[j], Ring: rd})
		if err != nil {
			return die("add target: %v", err)
		}
		if rd.Mode == Reliable {
			fmt.Printf("CREDIT %d %s\n", j, hexOf(cd))
		}
	}
	// Across processes too the writer claims and writes directly on shm
	// (direct.go), unless TICKBUS_RING_GENERIC=1 forces the QP path.
	if st := w.Stats(); !forceGeneric && (!st.DirectClaim || st.Direct != len(qps)) {
		return die("direct path not taken: claim %v, %d of %d targets", st.DirectClaim, st.Direct, len(qps))
	}
	fmt.Println("READY")
	in.next("GO")
	payload := make([]byte, *size)
	var published, preBP, postBP, lost, errs uint64
	var lastErr error
	count := func(seq uint64, err error) bool {
		switch {
		case err == nil:
			published++
		case errors.Is(err, ErrBackPressure) && seq == 0:
			preBP++
			return *retry
		case errors.Is(err, ErrBackPressure):
			postBP++
		case errors.Is(err, ErrLost):
			lost++
		default:
			errs++
			lastErr = err
		}
		return false
	}
	switch *how {
	case "plain", "die", "die-journal":
		for i := uint64(1); i <= *n; i++ {
			fillPayload(payload, uint32(*id), i)
			for count(w.Publish(1, payload, 0)) {
			}
		}
		if *how == "die" || *how == "die-journal" {
			seq, err := w.claim(1)
			if err != nil {
				return die("claim: %v", err)
			}
			if *how == "die-journal" { // the journal gets it, the rings never do
				fillPayload(payload, uint32(*id), *n+1)
				w.stage(0, seq, 1, 0, payload, 0)
				w.writeAll(w.journal, 1)
			}
			fmt.Printf("CLAIMED %d\n", seq)
			select {} // SIGKILL comes before the write
		}
	case "batch":
		batch := make([]Tick, 32)
		bufs := make([]byte, 32**size)
		for i := range batch {
			batch[i].Payload = bufs[i**size : (i+1)**size]
		}
		for i := uint64(1); i <= *n; {
			k := min(uint64(len(batch)), *n-i+1)
			for x := uint64(0); x < k; x++ {
				fillPayload(batch[x].Payload, uint32(*id), i+x)
			}
			for {
				_, err := w.PublishBatch(batch[:k])
				if err == nil {
					published += k
					break
				}
				if !count(0, err) {
					break
				}
			}
			i += k
		}
	case "at":
		for s := uint64(1); s <= *n; s++ {
			fillPayload(payload, uint32(*id), s)
			for count(w.PublishAt(s, 1, payload, 0)) {
			}
		}
	default:
		return die("how %q", *how)
	}
	ws := w.Stats()
	fmt.Printf("DONE published=%d prebp=%d postbp=%d lost=%d errs=%d casretries=%d dropped=%d lasterr=%q\n",
		published, preBP, postBP, lost, errs, ws.CASRetries, ws.Dropped, fmt.Sprint(lastErr))
	in.next("EXIT")
	return 0
}

// ---- parent side ------------------------------------------------------------

type proc struct {
	waitOnce sync.Once
	name     string
	cmd      *exec.Cmd
	in       io.WriteCloser
	out      chan []string
	stderr   *syncBuf
}

type syncBuf = testlog.Buf

func startProc(t testing.TB, ctx context.Context, name, role string, args ...string) *proc {
	t.Helper()
	return startProcFiles(t, ctx, name, role, nil, args...)
}

// startProcFiles is startProc with files for the child at fd 3 onwards.
func startProcFiles(t testing.TB, ctx context.Context, name, role string, files []*os.File, args ...string) *proc {
	t.Helper()
	cmd, err := child.Command(ctx, role, args...)
	require.NoError(t, err)
	cmd.ExtraFiles = files
	p := &proc{name: name, cmd: cmd, out: make(chan []string, 64), stderr: &syncBuf{}}
	cmd.Stderr = p.stderr
	p.in, err = cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	go func() {
		defer close(p.out)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.out <- strings.Fields(sc.Text())
		}
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		p.wait()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", p.name, p.stderr.String())
		}
	})
	return p
}

func (p *proc) wait() { p.waitOnce.Do(func() { _ = p.cmd.Wait() }) }

func (p *proc) send(t testing.TB, format string, args ...any) {
	t.Helper()
	_, err := fmt.Fprintf(p.in, format+"\n", args...)
	require.NoError(t, err, "%s: %s", p.name, p.stderr.String())
}

// expect waits for a line starting with word and returns its other fields.
func (p *proc) expect(t testing.TB, word string, wait time.Duration) []string {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case f, ok := <-p.out:
			if !ok {
				t.Fatalf("%s ended while we waited for %s; stderr:\n%s", p.name, word, p.stderr.String())
			}
			if len(f) > 0 && f[0] == word {
				return f[1:]
			}
		case <-timer.C:
			t.Fatalf("%s: no %s within %v; stderr:\n%s", p.name, word, wait, p.stderr.String())
		}
	}
}

func kv(fields []string) map[string]string {
	m := map[string]string{}
	for _, f := range fields {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

func num(t testing.TB, m map[string]string, k string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(m[k], 10, 64)
	require.NoError(t, err, "%s in %v", k, m)
	return v
}

// procTopic is one cross-process topic: the parent's home, children.
type procTopic struct {
	t    testing.TB
	dev  *shm.Device
	home *Home
	hcq  rdma.CompletionQueue
	subs []*proc
	pubs []*proc
}

type subSpec struct {
	args    []string
	journal bool       // recovers from the home's journal
	files   []*os.File // at fd 3 onwards in the child
}
type pubSpec struct {
	args  []string
	files []*os.File // at fd 3 onwards in the child
}

// startTopic starts the subscribers and publishers, wires every QP, and
// returns once every child said READY. GO is the caller's.
func startTopic(t testing.TB, ctx context.Context, subs []subSpec, pubs []pubSpec) *procTopic {
	t.Helper()
	return startTopicJ(t, ctx, 0, subs, pubs)
}

// startTopicJ is startTopic with a home journal of journal slots.
func startTopicJ(t testing.TB, ctx context.Context, journal int, subs []subSpec, pubs []pubSpec) *procTopic {
	t.Helper()
	pt := &procTopic{t: t}
	var err error
	pt.dev, err = shm.Open(shm.Config{HostID: hostID})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pt.dev.Close() })
	pt.home, err = NewHome(pt.dev, HomeConfig{SlotSize: 128, JournalSlots: journal})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pt.home.Close() })
	pt.hcq, err = pt.dev.CreateCQ(64)
	require.NoError(t, err)
	for j, s := range subs {
		args := append([]string{"-pubs", strconv.Itoa(len(pubs))}, s.args...)
		if s.journal {
			args = append(args, "-journal")
		}
		pt.subs = append(pt.subs, startProcFiles(t, ctx, fmt.Sprintf("sub%d", j), "ring-sub", s.files, args...))
	}
	for k, s := range pubs {
		args := append([]string{"-id", strconv.Itoa(k + 1), "-subs", strconv.Itoa(len(subs))}, s.args...)
		pt.pubs = append(pt.pubs, startProcFiles(t, ctx, fmt.Sprintf("pub%d", k+1), "ring-pub", s.files, args...))
	}
	const wait = 60 * time.Second
	ringDesc := make([]string, len(subs))
	subEP := make([][]string, len(subs)) // [sub][pub]: the sub's QP for that pub
	journalEP := make([]string, len(subs))
	for j, s := range pt.subs {
		ringDesc[j] = s.expect(t, "RING", wait)[0]
		subEP[j] = make([]string, len(pubs))
		for range pubs {
			f := s.expect(t, "EP", wait)
			k, err := strconv.Atoi(f[0])
			require.NoError(t, err)
			subEP[j][k] = f[1]
		}
		if subs[j].journal {
			journalEP[j] = s.expect(t, "JEP", wait)[0]
		}
	}
	homeDesc := hexOf(pt.home.Desc())
	for k, p := range pt.pubs {
		homeEP := p.expect(t, "EP", wait)
		require.Equal(t, "home", homeEP[0])
		pubEP := make([]string, len(subs))
		for range subs {
			f := p.expect(t, "EP", wait)
			j, err := strconv.Atoi(f[0])
			require.NoError(t, err)
			pubEP[j] = f[1]
		}
		hq, err := mkQP(pt.dev, pt.hcq)
		require.NoError(t, err)
		require.NoError(t, connectTo(hq, homeEP[1]))
		p.send(t, "HOME %s %s", homeDesc, hexOf(hq.LocalEndpoint()))
		for j := range subs {
			p.send(t, "RING %d %s %s", j, ringDesc[j], subEP[j][k])
			pt.subs[j].send(t, "PEER %d %s", k, pubEP[j])
		}
	}
	for k, p := range pt.pubs {
		for {
			f := p.expectAny(t, wait, "CREDIT", "READY")
			if f[0] == "READY" {
				break
			}
			j, err := strconv.Atoi(f[1])
			require.NoError(t, err)
			pt.subs[j].send(t, "CREDIT %d %s", k, f[2])
		}
	}
	for j, s := range pt.subs {
		if subs[j].journal {
			jq, err := mkQP(pt.dev, pt.hcq)
			require.NoError(t, err)
			require.NoError(t, connectTo(jq, journalEP[j]))
			s.send(t, "JOURNAL %s %s", homeDesc, hexOf(jq.LocalEndpoint()))
		}
	}
	for _, s := range pt.subs {
		s.expect(t, "READY", wait)
	}
	return pt
}

// expectAny waits for a line starting with one of words; it returns the
// whole line.
func (p *proc) expectAny(t testing.TB, wait time.Duration, words ...string) []string {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case f, ok := <-p.out:
			if !ok {
				t.Fatalf("%s ended while we waited for %v; stderr:\n%s", p.name, words, p.stderr.String())
			}
			for _, w := range words {
				if len(f) > 0 && f[0] == w {
					return f
				}
			}
		case <-timer.C:
			t.Fatalf("%s: none of %v within %v; stderr:\n%s", p.name, words, wait, p.stderr.String())
		}
	}
}

func (pt *procTopic) goAll() {
	for _, p := range pt.pubs {
		p.send(pt.t, "GO")
	}
}

// finish collects DONE from every given child and tells it to exit.
func (pt *procTopic) done(ps []*proc, wait time.Duration) []map[string]string {
	var out []map[string]string
	for _, p := range ps {
		out = append(out, kv(p.expect(pt.t, "DONE", wait)))
	}
	return out
}

func (pt *procTopic) exitAll() {
	for _, p := range append(append([]*proc{}, pt.pubs...), pt.subs...) {
		_, _ = fmt.Fprintln(p.in, "EXIT")
	}
	for _, p := range append(append([]*proc{}, pt.pubs...), pt.subs...) {
		done := make(chan struct{})
		go func() { p.wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
		}
	}
}
