package bus

import (
	"bytes"
	"testing"

	"github.com/nats-io/nkeys"
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
	if r.End != 0 || r.info("t", PeerInfo{}).End != 0 {
		t.Fatalf("a record without an end decoded with end %d", r.End)
	}
	ended := sampleRecord()
	ended.End = ended.Start + 3
	if b, err := marshalRecord(ended); err != nil {
		t.Fatal(err)
	} else if r, err := decodeRecord(b); err != nil || r.End != ended.End || r.info("t", PeerInfo{}).End != ended.End {
		t.Fatalf("end: got %+v, %v; want end %d", r, err, ended.End)
	}
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
		"end<start":      `{"v":1,"epoch":1,"node":"n","start":5,"reserved":9,"end":4}`,
		"end>reserved":   `{"v":1,"epoch":1,"node":"n","start":5,"reserved":9,"end":10}`,
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
	f.Add([]byte(`{"v":1,"epoch":3,"node":"n","start":10,"reserved":20,"end":15}`))
	f.Add([]byte(`null`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		if r.Epoch == 0 || r.Start == 0 || r.Reserved < r.Start || len(r.Desc) > maxBlob || checkToken("node", r.Node) != nil ||
			r.End != 0 && (r.End < r.Start || r.End > r.Reserved) {
			t.Fatalf("accepted a bad record: %+v", r)
		}
	})
}

// FuzzOpenRecord: a record as the bucket holds it, a signed envelope
// around the record; opening anything never panics, and what opens is
// signed for the subject and passes decodeRecord's checks.
func FuzzOpenRecord(f *testing.F) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		f.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	id := identity{kp: kp, pub: pub}
	id.derive()
	b, _ := marshalRecord(sampleRecord())
	env, err := seal(id, recordSubject("tickbus_seqs", "T"), b)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(env)
	f.Add(b)
	other, _ := seal(id, recordSubject("tickbus_seqs", "U"), b)
	f.Add(other)
	junk, _ := seal(id, recordSubject("tickbus_seqs", "T"), []byte(`{"v":1}`))
	f.Add(junk)
	f.Add([]byte(`{"env":1,"key":"` + pub + `","sig":"AAAA","msg":"e30="}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		key, r, err := openRecord("tickbus_seqs", "T", b)
		if err != nil {
			return
		}
		if _, _, err := openEnvelope(recordSubject("tickbus_seqs", "T"), b); err != nil || key == "" {
			t.Fatalf("opened a record whose envelope does not verify: %v", err)
		}
		if r.Epoch == 0 || r.Start == 0 || r.Reserved < r.Start || len(r.Desc) > maxBlob || checkToken("node", r.Node) != nil ||
			r.End != 0 && (r.End < r.Start || r.End > r.Reserved) {
			t.Fatalf("accepted a bad record: %+v", r)
		}
	})
}
