package multihost_test

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// record is a role's per-tick log, written to a file the test reads after
// the role exited: "P seq ns" for each tick a publisher published, "S
// count seq ns" after the publish of seq when the publisher's count of
// subscriber rings changed (to count), "T seq
// publisher payload-hash ns" for each tick a subscriber delivered and "E
// kind from to ns" for each event. A nil record (no -out) writes nothing.
type record struct {
	f *os.File
	w *bufio.Writer
}

func newRecord(path string) (*record, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &record{f: f, w: bufio.NewWriterSize(f, 1<<16)}, nil
}

func (r *record) printf(format string, args ...any) {
	if r != nil {
		fmt.Fprintf(r.w, format, args...)
	}
}

// close flushes and closes the file; idempotent.
func (r *record) close() error {
	if r == nil || r.f == nil {
		return nil
	}
	err := r.w.Flush()
	if cerr := r.f.Close(); err == nil {
		err = cerr
	}
	r.f = nil
	return err
}

// delivered is one tick a subscriber delivered.
type delivered struct {
	seq       uint64
	publisher uint64
	hash      string
	ns        int64
}

// ids are the ticks without their receive times (which differ per host):
// what two subscribers that saw the same ticks in the same order share.
func ids(ts []delivered) []string {
	out := make([]string, len(ts))
	for i, d := range ts {
		out[i] = fmt.Sprintf("%d/%d/%s", d.seq, d.publisher, d.hash)
	}
	return out
}

// firstDiff says where two lists of ids first differ ("" if they are
// equal), in a line.
func firstDiff(want, got []string) string {
	for i := range min(len(want), len(got)) {
		if want[i] != got[i] {
			return fmt.Sprintf("at %d: want %s, got %s", i, want[i], got[i])
		}
	}
	if len(want) != len(got) {
		return fmt.Sprintf("lengths differ: want %d, got %d", len(want), len(got))
	}
	return ""
}

// event is one event a subscriber reported.
type event struct {
	kind     string
	from, to uint64
	ns       int64
}

// published is one tick a publisher published.
type published struct {
	seq uint64
	ns  int64
}

// subsChange is a publisher's count of subscriber rings changing: to
// count, seen after its publish of seq.
type subsChange struct {
	count int
	seq   uint64
	ns    int64
}

// records holds one role's file, parsed.
type records struct {
	ticks  []delivered
	events []event
	pubs   []published
	subs   []subsChange
}

// firstAfter is the first sequence r's publisher published once it wrote
// into count subscriber rings (0 if it never did): the ring added last is
// written from that sequence on.
func (r records) firstAfter(count int) uint64 {
	var after uint64
	found := false
	for _, c := range r.subs {
		if c.count >= count {
			after, found = c.seq, true
			break
		}
	}
	if !found {
		return 0
	}
	for _, p := range r.pubs {
		if p.seq > after {
			return p.seq
		}
	}
	return 0
}

func readRecords(t *testing.T, path string) records {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var r records
	num := func(s string) uint64 {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "%s: %q", path, s)
		return v
	}
	for i, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "T" && len(f) == 5:
			r.ticks = append(r.ticks, delivered{seq: num(f[1]), publisher: num(f[2]), hash: f[3], ns: int64(num(f[4]))})
		case f[0] == "E" && len(f) == 5:
			r.events = append(r.events, event{kind: f[1], from: num(f[2]), to: num(f[3]), ns: int64(num(f[4]))})
		case f[0] == "S" && len(f) == 4:
			r.subs = append(r.subs, subsChange{count: int(num(f[1])), seq: num(f[2]), ns: int64(num(f[3]))})
		case f[0] == "P" && len(f) == 3:
			r.pubs = append(r.pubs, published{seq: num(f[1]), ns: int64(num(f[2]))})
		default:
			t.Fatalf("%s line %d: %q", path, i+1, l)
		}
	}
	return r
}

// accounted checks that the delivered ticks and the events together name
// every sequence from..to exactly once, in increasing order: nothing lost
// in silence, nothing twice. It returns how many sequences events named,
// or an error that says which sequence was neither delivered nor named.
func accounted(name string, r records, from, to uint64) (lost uint64, err error) {
	next := from
	ti, ei := 0, 0
	for next <= to {
		switch {
		case ti < len(r.ticks) && r.ticks[ti].seq == next:
			ti++
			next++
		case ei < len(r.events) && r.events[ei].from == next && r.events[ei].to >= next:
			lost += r.events[ei].to - r.events[ei].from + 1
			next = r.events[ei].to + 1
			ei++
		default:
			var tk, ev string
			if ti < len(r.ticks) {
				tk = fmt.Sprint(r.ticks[ti].seq)
			}
			if ei < len(r.events) {
				ev = fmt.Sprintf("%s %d..%d", r.events[ei].kind, r.events[ei].from, r.events[ei].to)
			}
			return lost, fmt.Errorf("%s: sequence %d neither delivered nor reported (next tick %q, next event %q)", name, next, tk, ev)
		}
	}
	if ti != len(r.ticks) {
		return lost, fmt.Errorf("%s: %d ticks past %d", name, len(r.ticks)-ti, to)
	}
	return lost, nil
}
