package bus

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

func seedMessages(t testing.TB) [][]byte {
	ep, err := rdma.Endpoint{Provider: "tcp", HostID: "h", QPN: 3, Addr: "127.0.0.1:9"}.MarshalBinary()
	require.NoError(t, err)
	node := wireNode{ID: "n1", Host: "h", Inc: 42, Prov: []string{"shm", "tcp"}}
	msgs := []*wireMsg{
		{Kind: kindHeartbeat, Node: node},
		{Kind: kindBye, Node: node},
		{Kind: kindWho, Node: node, Topic: "t"},
		{Kind: kindSub, Node: node, Topic: "t", ID: "s", Mode: "reliable", Desc: []byte{1, 'R', 2}},
		{Kind: kindUnsub, Node: node, Topic: "t", ID: "s"},
		{Kind: kindPub, Node: node, Topic: "t", ID: "p", Data: []byte("credit")},
		{Kind: kindClaim, Node: node, Topic: "t"},
		{Kind: kindHomeInfo, Node: node, Topic: "t", Desc: []byte("home")},
		{Kind: kindConnect, Node: node, Topic: "t", Target: "subscriber", ID: "s", EP: ep},
		{Kind: kindAccept, Node: node, EP: ep, Desc: []byte("region")},
		{Kind: kindError, Node: node, Code: codeRefused, Err: "no"},
		{Kind: kindWho, Node: node, Topic: "t", Target: "publisher"},
	}
	var out [][]byte
	for _, m := range msgs {
		b, err := encode(m)
		require.NoError(t, err)
		out = append(out, b)
	}
	return out
}

func TestWire_RoundTrip_EveryKind(t *testing.T) {
	for _, b := range seedMessages(t) {
		w, err := decode(b)
		require.NoError(t, err, string(b))
		again, err := encode(w)
		require.NoError(t, err)
		assert.JSONEq(t, string(b), string(again))
	}
}

func TestWire_Decode_RejectsBadInput(t *testing.T) {
	good := string(seedMessages(t)[3]) // a sub announcement
	for name, c := range map[string]struct {
		in   string
		want error
	}{
		"empty":       {"", ErrMalformed},
		"random":      {"\x00\xff\x13garbage", ErrMalformed},
		"truncated":   {good[:len(good)/2], ErrMalformed},
		"no version":  {`{"kind":"hb","node":{"id":"a"}}`, ErrMalformed},
		"version 2":   {strings.Replace(good, `"v":1`, `"v":2`, 1), ErrUnknownVersion},
		"version str": {`{"v":"1"}`, ErrMalformed},
		"too large":   {strings.Repeat(" ", MaxMessageSize+1), ErrTooLarge},
		"trailing":    {good + `{}`, ErrMalformed},
		"kind":        {strings.Replace(good, `"kind":"sub"`, `"kind":"zzz"`, 1), ErrMalformed},
		"mode":        {strings.Replace(good, `"mode":"reliable"`, `"mode":"fast"`, 1), ErrMalformed},
		"topic":       {strings.Replace(good, `"topic":"t"`, `"topic":"a.>"`, 1), ErrMalformed},
		"node id":     {strings.Replace(good, `"id":"n1"`, `"id":""`, 1), ErrMalformed},
		"hb topic":    {`{"v":1,"kind":"hb","node":{"id":"a","host":"h","inc":1},"topic":"t"}`, ErrMalformed},
		"who target":  {`{"v":1,"kind":"who","node":{"id":"a","host":"h","inc":1},"topic":"t","target":"home"}`, ErrMalformed},
		"conn ep":     {`{"v":1,"kind":"conn","node":{"id":"a","host":"h","inc":1},"topic":"t","target":"home","ep":"AQI="}`, ErrMalformed},
		"big blob":    {`{"v":1,"kind":"pub","node":{"id":"a","host":"h","inc":1},"topic":"t","id":"p","data":"` + strings.Repeat("A", 4*maxBlob/3+8) + `"}`, ErrMalformed},
		"array":       {`[1,2,3]`, ErrMalformed},
		"null":        {`null`, ErrMalformed},
	} {
		t.Run(name, func(t *testing.T) {
			w, err := decode([]byte(c.in))
			require.ErrorIs(t, err, c.want)
			assert.Nil(t, w)
		})
	}
}

// FuzzDecode: any bytes either fail with one of the package's sentinels or
// decode to a valid message that encodes and decodes to itself; nothing
// panics.
func FuzzDecode(f *testing.F) {
	for _, b := range seedMessages(f) {
		f.Add(b)
	}
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`{"v":2,"kind":"hb"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := decode(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownVersion) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			return
		}
		if err := w.validate(); err != nil {
			t.Fatalf("decoded message does not validate: %v", err)
		}
		again, err := encode(w)
		if err != nil {
			t.Fatalf("decoded message does not encode: %v", err)
		}
		w2, err := decode(again)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(normal(w), normal(w2)) {
			t.Fatalf("round trip changed the message:\n%+v\n%+v", w, w2)
		}
	})
}

// normal makes empty and nil slices equal for comparison.
func normal(w *wireMsg) wireMsg {
	c := *w
	for _, p := range []*[]byte{&c.Desc, &c.Data, &c.EP} {
		if len(*p) == 0 {
			*p = nil
		}
	}
	if len(c.Node.Prov) == 0 {
		c.Node.Prov = nil
	}
	return c
}

// FuzzCheckSubject: any subject kind and topic with any decoded message
// either fits or is refused; nothing panics.
func FuzzCheckSubject(f *testing.F) {
	for _, b := range seedMessages(f) {
		f.Add("sub", "t", b)
		f.Add("hb", "", b)
	}
	f.Fuzz(func(t *testing.T, kind, topic string, b []byte) {
		w, err := decode(b)
		if err != nil {
			return
		}
		if err := checkSubject(kind, topic, w); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error without a sentinel: %v", err)
		}
	})
}
