package rdma_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

func sampleEndpoint() rdma.Endpoint {
	e := rdma.Endpoint{Provider: rdma.ProviderTCP, HostID: "host-a", QPN: 7, PSN: 0x123456,
		Nonce: 0xdeadbeefcafe, Addr: "10.0.0.1:4791", LID: 3, MTU: 4096}
	e.GID[15] = 1
	return e
}

func TestEndpoint_RoundTrip(t *testing.T) {
	e := sampleEndpoint()
	b, err := e.MarshalBinary()
	require.NoError(t, err)
	var got rdma.Endpoint
	require.NoError(t, got.UnmarshalBinary(b))
	assert.Equal(t, e, got)
}

func TestEndpoint_Unmarshal_RejectsBadInputAndLeavesValue(t *testing.T) {
	good, err := sampleEndpoint().MarshalBinary()
	require.NoError(t, err)
	cases := map[string]struct {
		b    []byte
		want error
	}{
		"empty":       {nil, rdma.ErrMalformed},
		"truncated":   {good[:len(good)-1], rdma.ErrMalformed},
		"trailing":    {append(append([]byte{}, good...), 0), rdma.ErrMalformed},
		"version 2":   {append([]byte{2}, good[1:]...), rdma.ErrUnknownVersion},
		"no provider": {append([]byte{1, 0}, good[2+len(rdma.ProviderTCP):]...), rdma.ErrMalformed},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			e := rdma.Endpoint{Provider: "keep"}
			err := e.UnmarshalBinary(c.b)
			require.ErrorIs(t, err, c.want)
			assert.Equal(t, rdma.Endpoint{Provider: "keep"}, e)
		})
	}
}

func TestEndpoint_Marshal_RejectsOversizedFields(t *testing.T) {
	_, err := rdma.Endpoint{Provider: "shm", Addr: string(make([]byte, 2000))}.MarshalBinary()
	require.ErrorIs(t, err, rdma.ErrMalformed)
	_, err = rdma.Endpoint{}.MarshalBinary()
	require.ErrorIs(t, err, rdma.ErrMalformed)
}

func TestRemoteRegion_RoundTripAndContains(t *testing.T) {
	r := rdma.RemoteRegion{Addr: 0x7f0000001000, RKey: 42, Len: 4096}
	b, err := r.MarshalBinary()
	require.NoError(t, err)
	require.Len(t, b, rdma.RemoteRegionSize)
	var got rdma.RemoteRegion
	require.NoError(t, got.UnmarshalBinary(b))
	assert.Equal(t, r, got)

	assert.True(t, r.Contains(r.Addr, 4096))
	assert.True(t, r.Contains(r.Addr+4088, 8))
	assert.False(t, r.Contains(r.Addr+4089, 8))
	assert.False(t, r.Contains(r.Addr-1, 1))
	assert.False(t, r.Contains(r.Addr+8, ^uint64(0)))
}

func TestRemoteRegion_Unmarshal_RejectsWrap(t *testing.T) {
	b, err := rdma.RemoteRegion{Addr: 1, Len: 1}.MarshalBinary()
	require.NoError(t, err)
	for i := 1; i < 9; i++ {
		b[i] = 0xff // Addr = max
	}
	var r rdma.RemoteRegion
	require.ErrorIs(t, r.UnmarshalBinary(b), rdma.ErrMalformed)
	assert.Equal(t, rdma.RemoteRegion{}, r)
}

// FuzzEndpoint_Unmarshal: any bytes either fail cleanly or decode to an
// endpoint whose encoding is the same bytes.
func FuzzEndpoint_Unmarshal(f *testing.F) {
	good, _ := sampleEndpoint().MarshalBinary()
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{1, 3, 's', 'h', 'm'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var e rdma.Endpoint
		if err := e.UnmarshalBinary(b); err != nil {
			return
		}
		again, err := e.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded endpoint does not encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("round trip changed bytes:\n%x\n%x", b, again)
		}
	})
}

func FuzzRemoteRegion_Unmarshal(f *testing.F) {
	good, _ := rdma.RemoteRegion{Addr: 4096, RKey: 1, Len: 64}.MarshalBinary()
	f.Add(good)
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r rdma.RemoteRegion
		if err := r.UnmarshalBinary(b); err != nil {
			return
		}
		if r.Addr+r.Len < r.Addr {
			t.Fatalf("accepted a wrapping region %+v", r)
		}
		again, err := r.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("round trip: %v %x %x", err, b, again)
		}
	})
}
