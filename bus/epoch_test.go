package bus

import (
	"bytes"
	"testing"
)

func sampleRecord() homeRecord {
	return homeRecord{Epoch: 7, Node: "n1", Host: "h", Inc: 42, Providers: []string{"shm", "tcp"},
		Start: 1 << 22, Reserved: 1 << 23, Desc: []byte("desc")}
}

func TestHomeRecord_RoundTripAndRejects(t *testing.T) {
	b, err := marshalRecord(sampleRecord())
	if err != nil {
		t.Fatal(err)
	}
	r, err := decodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	want := sampleRecord()
	want.Version = recordVersion
	if r.Epoch != want.Epoch || r.Node != want.Node || r.Start != want.Start || r.Reserved != want.Reserved || !bytes.Equal(r.Desc, want.Desc) {
		t.Fatalf("round trip: got %+v want %+v", r, want)
	}
	for name, bad := range map[string]string{
		"not json":       `{`,
		"version":        `{"v":2,"epoch":1,"node":"n","start":1,"reserved":2}`,
		"epoch 0":        `{"v":1,"epoch":0,"node":"n","start":1,"reserved":2}`,
		"bad node":       `{"v":1,"epoch":1,"node":"a b","start":1,"reserved":2}`,
		"start 0":        `{"v":1,"epoch":1,"node":"n","start":0,"reserved":2}`,
		"reserved<start": `{"v":1,"epoch":1,"node":"n","start":5,"reserved":2}`,
		"provider":       `{"v":1,"epoch":1,"node":"n","start":1,"reserved":2,"prov":["x"]}`,
	} {
		if _, err := decodeRecord([]byte(bad)); err == nil {
			t.Errorf("%s: decoded %q", name, bad)
		}
	}
}

// FuzzDecodeRecord: home records come from a JetStream bucket any client
// of the account can write; decoding anything never panics, and whatever
// decodes satisfies the checks the election relies on.
func FuzzDecodeRecord(f *testing.F) {
	b, _ := marshalRecord(sampleRecord())
	f.Add(b)
	f.Add([]byte(`{"v":1,"epoch":1,"node":"n","start":1,"reserved":1}`))
	f.Add([]byte(`{"v":1,"epoch":18446744073709551615,"node":"n","start":1,"reserved":18446744073709551614,"desc":"AAAA"}`))
	f.Add([]byte(`null`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		if r.Epoch == 0 || r.Start == 0 || r.Reserved < r.Start || len(r.Desc) > maxBlob || checkToken("node", r.Node) != nil {
			t.Fatalf("accepted a bad record: %+v", r)
		}
	})
}
