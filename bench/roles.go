package bench

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/tickbus/tickbus/internal/child"
	"github.com/tickbus/tickbus/rdma"
)

// Child roles of this package.
const (
	rolePub  = "bench-pub"
	roleSub  = "bench-sub"
	roleNATS = "bench-nats-server"
	roleJit  = "bench-jitter"
)

func init() {
	child.Register(rolePub, func(args []string) int { return roleMain(args, true, os.Stdout) })
	child.Register(roleSub, func(args []string) int { return roleMain(args, false, os.Stdout) })
	child.Register(roleNATS, natsServerMain)
	child.Register(roleJit, jitterMain)
}

// Run modes of a publisher/subscriber pair.
const (
	modeLatency    = "lat"
	modeThroughput = "tp"
	modePingPong   = "pp"
)

// roleArgs is the command line of a publisher or subscriber child.
type roleArgs struct {
	transport string
	mode      string
	rate      int
	duration  time.Duration
	size      int
	batch     int
	idle      string
	cpu       int
	url       string // nats: server URL; tickbus: descriptor (hex)
	index     int    // this process's index among its peers
	peers     int    // how many processes of the other side
	// tickbus cases only.
	ringMode string // lossy or reliable
	slots    int    // ring slots (tickbus and floor)
	claim    string // cas or faa
	pubs     int
	subs     int
	pprof    string // CPU profile file, or none
	trace    string // execution trace file, or none
}

func (a roleArgs) argv() []string {
	return []string{
		"-transport", a.transport, "-mode", a.mode,
		"-rate", fmt.Sprint(a.rate), "-duration", a.duration.String(),
		"-size", fmt.Sprint(a.size), "-batch", fmt.Sprint(a.batch),
		"-idle", a.idle, "-cpu", fmt.Sprint(a.cpu), "-url", a.url,
		"-index", fmt.Sprint(a.index), "-peers", fmt.Sprint(a.peers),
		"-ring-mode", a.ringMode, "-ring-slots", fmt.Sprint(a.slots), "-claim", a.claim, "-pubs", fmt.Sprint(a.pubs), "-subs", fmt.Sprint(a.subs),
		"-pprof", a.pprof, "-trace", a.trace,
	}
}

func parseRoleArgs(args []string) (roleArgs, error) {
	var a roleArgs
	fs := flag.NewFlagSet("bench-role", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&a.transport, "transport", "", "")
	fs.StringVar(&a.mode, "mode", modeLatency, "")
	fs.IntVar(&a.rate, "rate", 1000, "")
	fs.DurationVar(&a.duration, "duration", time.Second, "")
	fs.IntVar(&a.size, "size", 64, "")
	fs.IntVar(&a.batch, "batch", 1, "")
	fs.StringVar(&a.idle, "idle", "yield", "")
	fs.IntVar(&a.cpu, "cpu", -1, "")
	fs.StringVar(&a.url, "url", "", "")
	fs.IntVar(&a.index, "index", 0, "")
	fs.IntVar(&a.peers, "peers", 1, "")
	fs.StringVar(&a.ringMode, "ring-mode", "reliable", "")
	fs.IntVar(&a.slots, "ring-slots", DefaultRingSlots, "")
	fs.StringVar(&a.claim, "claim", "cas", "")
	fs.IntVar(&a.pubs, "pubs", 1, "")
	fs.IntVar(&a.subs, "subs", 1, "")
	fs.StringVar(&a.pprof, "pprof", "", "")
	fs.StringVar(&a.trace, "trace", "", "")
	if err := fs.Parse(args); err != nil {
		return a, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	switch {
	case a.mode != modeLatency && a.mode != modeThroughput && a.mode != modePingPong:
		return a, fmt.Errorf("%w: mode %q", ErrInvalidConfig, a.mode)
	case a.rate < 1, a.duration <= 0, a.size < MinSize, a.size > MaxSize, a.batch < 1, a.peers < 1,
		a.pubs < 1, a.subs < 1, !validRingSlots(a.slots), a.pubs > maxPeers, a.subs > maxPeers:
		return a, fmt.Errorf("%w: role args %q", ErrInvalidConfig, args)
	}
	if _, err := rdma.ParseIdle(a.idle); err != nil {
		return a, err
	}
	if _, ok := transports[a.transport]; !ok {
		return a, fmt.Errorf("%w: transport %q", ErrInvalidConfig, a.transport)
	}
	return a, nil
}

// transport opens the ports of one kind of case in a child process. Topic 0
// is the publisher-to-subscriber direction, topic 1 the way back.
type transport struct {
	openTx func(a roleArgs, topic int) (txPort, error)
	openRx func(a roleArgs, topic int) (rxPort, error)
}

var transports = map[string]transport{}

// grace is how long a subscriber waits past its run for the end mark.
const grace = 5 * time.Second

// maxPeers bounds the publishers and subscribers of one run.
const maxPeers = 64

// roleMain runs a publisher (pub) or subscriber child and reports on out.
func roleMain(args []string, pub bool, out io.Writer) int {
	fail := func(err error) int {
		_ = writeReport(out, report{Done: true, Err: err.Error()})
		return 1
	}
	a, err := parseRoleArgs(args)
	if err != nil {
		return fail(err)
	}
	if a.cpu >= 0 {
		if err := pinThread(a.cpu); err != nil {
			return fail(err)
		}
	}
	idle, _ := rdma.ParseIdle(a.idle)
	tr := transports[a.transport]
	// stdin carries "stop" for a subscriber (every publisher is done: a
	// ring that may have lost an end mark ends once it is quiet), then EOF:
	// every process of the run has reported. The ports stay open until
	// then, so that no peer sees this one go while it still works (a
	// publisher's Close flushes to subscribers that are still there).
	stopc, eof := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(eof)
		sc := bufio.NewScanner(os.Stdin)
		stopped := false
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "stop" && !stopped {
				stopped = true
				close(stopc)
			}
		}
	}()
	final := func(r report, err error) int {
		if err != nil {
			r.Err = err.Error()
		}
		if werr := writeReport(out, r); werr != nil || err != nil {
			return 1
		}
		<-eof
		return 0
	}
	pp := a.mode == modePingPong
	var (
		tx txPort
		rx rxPort
	)
	closeAll := func() error {
		var errs []error
		if tx != nil {
			errs = append(errs, tx.close())
		}
		if rx != nil {
			errs = append(errs, rx.close())
		}
		return errors.Join(errs...)
	}
	defer closeAll()
	if pub {
		if tx, err = tr.openTx(a, 0); err != nil {
			return fail(err)
		}
		if pp {
			if rx, err = tr.openRx(a, 1); err != nil {
				return fail(err)
			}
		}
		if err := writeReport(out, report{Ready: true}); err != nil {
			return 1
		}
		settleHeap()
		start := nanotime() + int64(5*time.Millisecond)
		end := start + int64(a.duration)
		deadline := end + int64(grace)
		var st txStats
		stopProf, perr := startProfile(a.pprof, a.trace)
		if perr != nil {
			return fail(perr)
		}
		cpu0 := selfCPU()
		switch a.mode {
		case modeThroughput:
			st, err = floodLoop(tx, a.batch, start, end, deadline)
		default:
			st, err = pacedLoop(tx, rx, idle, newSchedule(start, a.rate, a.duration))
		}
		if c, ok := tx.(interface{ check() error }); ok && err == nil {
			err = c.check()
		}
		err = errors.Join(err, stopProf())
		return final(report{Done: true, Sent: st.sent, Unsent: st.unsent, StartNs: st.startNs, hist: st.hist, CPUNs: int64(selfCPU() - cpu0)}, err)
	}
	if rx, err = tr.openRx(a, 0); err != nil {
		return fail(err)
	}
	if pp {
		if tx, err = tr.openTx(a, 1); err != nil {
			return fail(err)
		}
	}
	if err := writeReport(out, report{Ready: true}); err != nil {
		return 1
	}
	// The publisher starts within a moment of our ready line; allow for a
	// slow start of its process on a busy machine.
	deadline := nanotime() + int64(a.duration) + int64(grace) + int64(10*time.Second)
	stopProf, perr := startProfile(a.pprof, a.trace)
	if perr != nil {
		return fail(perr)
	}
	if st, ok := rx.(interface{ stopWhenQuiet() }); ok {
		go func() {
			select {
			case <-stopc:
				st.stopWhenQuiet()
			case <-eof:
			}
		}()
	}
	cpu0 := selfCPU()
	var slow *slowLog
	if a.mode == modeLatency && a.pprof != "" {
		slow = newSlowLog()
	}
	settleHeap()
	st, err := subLoopSlow(rx, tx, a.mode == modeLatency, a.pubs, deadline, slow)
	if slow != nil {
		err = errors.Join(err, slow.write(slowPath(a.pprof)))
	}
	if errors.Is(err, errStopped) {
		err = nil // every publisher is done; the lost end marks are counted as lost sequences already
	}
	if c, ok := tx.(interface{ check() error }); ok && err == nil {
		err = c.check()
	}
	err = errors.Join(err, stopProf())
	return final(report{Done: true, Count: st.count, Lost: st.lost, StartNs: st.startNs, LastNs: st.lastNs, hist: st.hist, CPUNs: int64(selfCPU() - cpu0)}, err)
}

// settleHeap collects the garbage of a child's start-up (connecting, the
// bus's exchanges, the slow-tick log's 2 MB) before its loop: that
// start-up left the heap just under the collector's goal, so the bus's
// control-plane allocations (some kB a second) started a cycle within the
// first second of the timed run, and its two stop-the-world pauses and
// mark assists (115-978 µs each) were timed as 41 slow ticks (execution
// trace of a latency run's subscriber). A cycle now leaves the goal at
// twice the live heap: the run's few hundred kB do not reach it.
func settleHeap() { runtime.GC() }
