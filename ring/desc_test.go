package ring

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

func sampleHome() HomeDesc {
	return HomeDesc{Epoch: 0xabc, Start: 1, JournalSlots: 64, SlotSize: 128,
		Region: rdma.RemoteRegion{Addr: 0x7f0000000000, RKey: 5, Len: uint64(homeSize(64, 128))}}
}

func sampleRing() RingDesc {
	return RingDesc{Mode: Reliable, Epoch: 0xdef, Start: 10, Slots: 1024, SlotSize: 256,
		Region: rdma.RemoteRegion{Addr: 0x7f0000100000, RKey: 6, Len: uint64(regionSize(1024, 256))}}
}

func sampleCredit() CreditDesc {
	return CreditDesc{PublisherID: 3, Epoch: 9, Cell: rdma.RemoteRegion{Addr: 0x7f0000200080, RKey: 7, Len: 8}}
}

func TestDescs_RoundTrip(t *testing.T) {
	h := sampleHome()
	b, err := h.MarshalBinary()
	require.NoError(t, err)
	require.Len(t, b, HomeDescSize)
	var h2 HomeDesc
	require.NoError(t, h2.UnmarshalBinary(b))
	assert.Equal(t, h, h2)

	r := sampleRing()
	b, err = r.MarshalBinary()
	require.NoError(t, err)
	require.Len(t, b, RingDescSize)
	var r2 RingDesc
	require.NoError(t, r2.UnmarshalBinary(b))
	assert.Equal(t, r, r2)

	c := sampleCredit()
	b, err = c.MarshalBinary()
	require.NoError(t, err)
	require.Len(t, b, CreditDescSize)
	var c2 CreditDesc
	require.NoError(t, c2.UnmarshalBinary(b))
	assert.Equal(t, c, c2)
}

func TestDescs_Unmarshal_RejectBadInputAndLeaveValue(t *testing.T) {
	good, err := sampleRing().MarshalBinary()
	require.NoError(t, err)
	mut := func(f func(b []byte)) []byte {
		b := append([]byte{}, good...)
		f(b)
		return b
	}
	cases := map[string]struct {
		b    []byte
		want error
	}{
		"empty":        {nil, ErrMalformed},
		"truncated":    {good[:len(good)-1], ErrMalformed},
		"trailing":     {append(append([]byte{}, good...), 0), ErrMalformed},
		"version 1":    {mut(func(b []byte) { b[0] = 1 }), ErrUnknownVersion},
		"version 4":    {mut(func(b []byte) { b[0] = 4 }), ErrUnknownVersion},
		"home kind":    {mut(func(b []byte) { b[1] = kindHome }), ErrMalformed},
		"mode 7":       {mut(func(b []byte) { b[2] = 7 }), ErrMalformed},
		"slots 3":      {mut(func(b []byte) { b[len(b)-8] = 3 }), ErrMalformed},
		"slot size 65": {mut(func(b []byte) { b[len(b)-4] = 65; b[len(b)-3] = 0 }), ErrMalformed},
		"slot size 80": {mut(func(b []byte) { b[len(b)-4] = 80; b[len(b)-3] = 0 }), ErrMalformed},
		"slot size 32": {mut(func(b []byte) { b[len(b)-4] = 32; b[len(b)-3] = 0 }), ErrMalformed},
		"short region": {mut(func(b []byte) { b[len(b)-9] ^= 1 }), ErrMalformed},
		"misaligned":   {mut(func(b []byte) { b[19] |= 1 }), ErrMalformed},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d := RingDesc{Epoch: 42}
			err := d.UnmarshalBinary(c.b)
			require.ErrorIs(t, err, c.want)
			assert.Equal(t, RingDesc{Epoch: 42}, d)
		})
	}
	var h HomeDesc
	require.ErrorIs(t, h.UnmarshalBinary(good), ErrMalformed, "a ring descriptor is not a home descriptor")
	var cd CreditDesc
	b, _ := sampleCredit().MarshalBinary()
	b[len(b)-8] = 200 // cell of 200 bytes
	require.ErrorIs(t, cd.UnmarshalBinary(b), ErrMalformed)
}

func TestDescs_Marshal_RejectsInvalid(t *testing.T) {
	r := sampleRing()
	r.Slots = 1000
	_, err := r.MarshalBinary()
	require.ErrorIs(t, err, ErrMalformed)
	h := sampleHome()
	h.Region.Len++
	_, err = h.MarshalBinary()
	require.ErrorIs(t, err, ErrMalformed)
	r = sampleRing()
	r.Start = 0
	_, err = r.MarshalBinary()
	require.ErrorIs(t, err, ErrMalformed)
}

// The fuzzers: any bytes either fail cleanly or decode to a valid value
// whose encoding is the same bytes.
func FuzzHomeDesc_Unmarshal(f *testing.F) {
	good, _ := sampleHome().MarshalBinary()
	f.Add(good)
	f.Add([]byte{1, 'H'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var d HomeDesc
		if d.UnmarshalBinary(b) != nil {
			return
		}
		again, err := d.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("round trip: %v\n%x\n%x", err, b, again)
		}
	})
}

func FuzzRingDesc_Unmarshal(f *testing.F) {
	good, _ := sampleRing().MarshalBinary()
	f.Add(good)
	f.Add([]byte{1, 'R', 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var d RingDesc
		if d.UnmarshalBinary(b) != nil {
			return
		}
		again, err := d.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("round trip: %v\n%x\n%x", err, b, again)
		}
		if d.MaxPayload() < MinSlotSize-SlotHeaderSize {
			t.Fatalf("accepted slots too small: %+v", d)
		}
	})
}

func FuzzCreditDesc_Unmarshal(f *testing.F) {
	good, _ := sampleCredit().MarshalBinary()
	f.Add(good)
	f.Add([]byte{1, 'C'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var d CreditDesc
		if d.UnmarshalBinary(b) != nil {
			return
		}
		again, err := d.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("round trip: %v\n%x\n%x", err, b, again)
		}
	})
}

// A connect reply's descriptor differs from the announced one in its rkey
// only (the grant made for that connection): SameRegion ignores the rkey
// and nothing else, and WithRKey on the wire form changes the rkey of a
// fresh copy, leaving the shared bytes alone.
func TestDescs_SameRegionAndWithRKey_OnlyTheRKeyDiffers(t *testing.T) {
	h := sampleHome()
	assert.True(t, h.SameRegion(h.WithRKey(99)))
	assert.Equal(t, uint32(99), h.WithRKey(99).Region.RKey)
	assert.Equal(t, uint32(5), h.Region.RKey, "WithRKey returns a copy")
	for name, o := range map[string]func(*HomeDesc){
		"epoch": func(d *HomeDesc) { d.Epoch++ }, "start": func(d *HomeDesc) { d.Start++ },
		"addr": func(d *HomeDesc) { d.Region.Addr += 64 }, "len": func(d *HomeDesc) { d.Region.Len++ },
		"journal": func(d *HomeDesc) { d.JournalSlots *= 2 }, "slot size": func(d *HomeDesc) { d.SlotSize += 64 },
	} {
		x := h.WithRKey(99)
		o(&x)
		assert.False(t, h.SameRegion(x), name)
	}
	r := sampleRing()
	assert.True(t, r.SameRegion(r.WithRKey(42)))
	for name, o := range map[string]func(*RingDesc){
		"mode": func(d *RingDesc) { d.Mode = Lossy }, "epoch": func(d *RingDesc) { d.Epoch++ },
		"start": func(d *RingDesc) { d.Start++ }, "addr": func(d *RingDesc) { d.Region.Addr += 64 },
		"slots": func(d *RingDesc) { d.Slots /= 2 }, "slot size": func(d *RingDesc) { d.SlotSize += 64 },
	} {
		x := r.WithRKey(42)
		o(&x)
		assert.False(t, r.SameRegion(x), name)
	}

	for _, d := range []encodingDesc{h, r} {
		shared, err := d.MarshalBinary()
		require.NoError(t, err)
		before := bytes.Clone(shared)
		got, err := WithRKey(shared, 0xfeed)
		require.NoError(t, err)
		assert.Equal(t, before, shared, "the shared descriptor is not changed")
		require.Len(t, got, len(shared))
		switch d.(type) {
		case HomeDesc:
			var x HomeDesc
			require.NoError(t, x.UnmarshalBinary(got))
			assert.Equal(t, h.WithRKey(0xfeed), x)
		case RingDesc:
			var x RingDesc
			require.NoError(t, x.UnmarshalBinary(got))
			assert.Equal(t, r.WithRKey(0xfeed), x)
		}
	}
	c, err := sampleCredit().MarshalBinary()
	require.NoError(t, err)
	_, err = WithRKey(c, 1)
	assert.ErrorIs(t, err, ErrMalformed, "a credit descriptor is neither")
	_, err = WithRKey(nil, 1)
	assert.ErrorIs(t, err, ErrMalformed)
}

type encodingDesc interface{ MarshalBinary() ([]byte, error) }

// A peer of the version-1 layout (slots a multiple of 64, the old header
// check) or of version 2 (the check without the payload) is refused by
// name, every descriptor kind, and a 96-byte slot (a multiple of 32, not
// of 64) is this layout's own.
func TestDescs_Unmarshal_RefusesAPeerOfTheOldLayout(t *testing.T) {
	require.Equal(t, 3, DescVersion)
	hb, err := sampleHome().MarshalBinary()
	require.NoError(t, err)
	rb, err := sampleRing().MarshalBinary()
	require.NoError(t, err)
	cb, err := sampleCredit().MarshalBinary()
	require.NoError(t, err)
	for name, c := range map[string]struct {
		b   []byte
		dec func([]byte) error
	}{
		"home":   {hb, func(b []byte) error { var d HomeDesc; return d.UnmarshalBinary(b) }},
		"ring":   {rb, func(b []byte) error { var d RingDesc; return d.UnmarshalBinary(b) }},
		"credit": {cb, func(b []byte) error { var d CreditDesc; return d.UnmarshalBinary(b) }},
	} {
		old := append([]byte{}, c.b...)
		for _, v := range []byte{1, 2} {
			old[0] = v
			err := c.dec(old)
			require.ErrorIs(t, err, ErrUnknownVersion, name)
			assert.Contains(t, err.Error(), fmt.Sprintf("%s descriptor version %d, want 3", name, v), name)
		}
	}

	r := sampleRing()
	r.SlotSize = 96
	r.Region.Len = uint64(regionSize(int(r.Slots), 96))
	b, err := r.MarshalBinary()
	require.NoError(t, err)
	var back RingDesc
	require.NoError(t, back.UnmarshalBinary(b))
	assert.Equal(t, r, back)
	h := sampleHome()
	h.SlotSize = 96
	h.Region.Len = uint64(homeSize(int(h.JournalSlots), 96))
	b, err = h.MarshalBinary()
	require.NoError(t, err)
	var hback HomeDesc
	require.NoError(t, hback.UnmarshalBinary(b))
	assert.Equal(t, h, hback)
}
