package rdmatest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
)

var deviceTests = []test{
	{"ReportsProviderAndCaps", testDeviceCaps},
	{"RegisterMemory_RejectsBadSizeAndAccess", testRegisterRejects},
	{"RegisterMemory_ZeroedAndKeyed", testRegisterKeys},
	{"Register_ReachesMemoryOfAnotherDevice", testRegisterShared},
	{"CreateQP_RejectsBadConfig", testCreateQPRejects},
	{"Close_Idempotent_LaterCallsFail", testDeviceClose},
}

var qpTests = []test{
	{"StateTransitions", testQPStates},
	{"Endpoint_RoundTrips", testEndpointRoundTrip},
	{"Connect_RejectsOtherProvider", testConnectOtherProvider},
	{"PostSend_BeforeConnect_Refused", testPostBeforeConnect},
}

func testDeviceCaps(t *testing.T, p Provider) {
	d := openDevice(t, p)
	assert.Equal(t, p.Name, d.Provider())
	assert.NotEmpty(t, d.HostID())
	c := d.Caps()
	assert.Positive(t, c.MaxInline)
	assert.Positive(t, c.MaxMsgSize)
	assert.Positive(t, c.MaxQPDepth)
	assert.Positive(t, c.MaxCQDepth)
	assert.Positive(t, c.MaxRegion)
	assert.NotEqual(t, rdma.AtomicNone, c.Atomic, "tickbus needs remote atomics")
}

func testRegisterRejects(t *testing.T, p Provider) {
	d := openDevice(t, p)
	for _, size := range []int{0, -1} {
		_, err := d.RegisterMemory(size, rdma.AccessRemote)
		assert.Error(t, err, "size %d", size)
	}
	_, err := d.RegisterMemory(4096, rdma.Access(1<<20))
	assert.Error(t, err, "unknown access bit")
	_, err = d.Register(nil, rdma.AccessRemote)
	assert.Error(t, err, "nil memory")
	_, err = d.Register(make([]byte, 4096), rdma.AccessRemote)
	assert.Error(t, err, "Go heap memory no peer can reach")
}

func testRegisterKeys(t *testing.T, p Provider) {
	d := openDevice(t, p)
	keys := map[uint32]bool{}
	for range 8 {
		mr, err := d.RegisterMemory(10000, rdma.AccessLocalWrite|rdma.AccessRemote)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, len(mr.Bytes()), 10000)
		assert.Equal(t, make([]byte, len(mr.Bytes())), mr.Bytes(), "fresh memory is zeroed")
		assert.NotZero(t, mr.RKey())
		assert.NotZero(t, mr.LKey())
		assert.False(t, keys[mr.RKey()], "rkey reused")
		keys[mr.RKey()] = true
		r := mr.Remote()
		assert.Equal(t, mr.Addr(), r.Addr)
		assert.Equal(t, mr.RKey(), r.RKey)
		assert.Equal(t, uint64(len(mr.Bytes())), r.Len)
		assert.Equal(t, rdma.AccessLocalWrite|rdma.AccessRemote, mr.Access())
	}
	small := 0
	for k := range keys {
		if k < 1024 {
			small++
		}
	}
	assert.Less(t, small, 2, "rkeys look like small counters: %v", keys)
}

// testRegisterShared registers memory of a region of device A on device B
// and writes through B's rkey: the bytes land in A's region.
func testRegisterShared(t *testing.T, p Provider) {
	x := newPair(t, p, pairOpts{})
	home, err := x.devA.RegisterMemory(8192, rdma.AccessLocalWrite)
	require.NoError(t, err)
	alias, err := x.devB.Register(home.Bytes()[4096:8192], rdma.AccessLocalWrite|rdma.AccessRemoteWrite)
	require.NoError(t, err)
	copy(x.local.Bytes(), "through another device")
	c := do(t, x.a, x.cqA, rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Local: rdma.LocalSGE(x.local, 0, 22), Remote: remote(alias, 100)})
	require.Equal(t, rdma.StatusSuccess, c.Status)
	assert.Equal(t, "through another device", string(home.Bytes()[4196:4218]))
	require.NoError(t, alias.Close())
	assert.Equal(t, "through another device", string(home.Bytes()[4196:4218]), "closing an alias keeps the memory")
}

func testCreateQPRejects(t *testing.T, p Provider) {
	d := openDevice(t, p)
	cq, err := d.CreateCQ(16)
	require.NoError(t, err)
	for name, cfg := range map[string]rdma.QPConfig{
		"nil send CQ":  {RecvCQ: cq, SendDepth: 4},
		"nil recv CQ":  {SendCQ: cq, SendDepth: 4},
		"zero depth":   {SendCQ: cq, RecvCQ: cq},
		"huge inline":  {SendCQ: cq, RecvCQ: cq, SendDepth: 4, MaxInline: d.Caps().MaxInline + 1},
		"huge depth":   {SendCQ: cq, RecvCQ: cq, SendDepth: d.Caps().MaxQPDepth + 1},
		"negative rcv": {SendCQ: cq, RecvCQ: cq, SendDepth: 4, RecvDepth: -1},
	} {
		_, err := d.CreateQP(cfg)
		assert.ErrorIs(t, err, rdma.ErrInvalidConfig, name)
	}
	_, err = d.CreateCQ(0)
	assert.Error(t, err, "CQ depth 0")
}

func testDeviceClose(t *testing.T, p Provider) {
	d, err := p.Open()
	require.NoError(t, err)
	cq, err := d.CreateCQ(8)
	require.NoError(t, err)
	qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 4})
	require.NoError(t, err)
	_, err = d.RegisterMemory(4096, rdma.AccessRemote)
	require.NoError(t, err)
	require.NoError(t, d.Close())
	require.NoError(t, d.Close(), "second Close")
	assert.Equal(t, rdma.QPClosed, qp.State())
	wr := rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline, Inline: []byte{1}}
	assert.ErrorIs(t, qp.PostSend(&wr), rdma.ErrClosed)
	_, err = d.RegisterMemory(4096, rdma.AccessRemote)
	assert.Error(t, err, "RegisterMemory after Close")
	_, err = d.CreateCQ(8)
	assert.Error(t, err, "CreateCQ after Close")
}

func testQPStates(t *testing.T, p Provider) {
	a, b := openDevice(t, p), openDevice(t, p)
	mk := func(d rdma.Device) rdma.QueuePair {
		cq, err := d.CreateCQ(16)
		require.NoError(t, err)
		qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 4, RecvDepth: 4})
		require.NoError(t, err)
		return qp
	}
	qa, qb := mk(a), mk(b)
	assert.Equal(t, rdma.QPReset, qa.State())
	assert.NotEqual(t, qa.LocalEndpoint().Nonce, qb.LocalEndpoint().Nonce)
	connect(t, qa, qb)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	assert.ErrorIs(t, qa.Connect(ctx, qb.LocalEndpoint()), rdma.ErrQPState, "second Connect")
	assert.Equal(t, rdma.QPReadyToSend, qa.State(), "a refused Connect changes nothing")
	require.NoError(t, qa.Close())
	assert.Equal(t, rdma.QPClosed, qa.State())
	require.NoError(t, qa.Close(), "second Close")
	wr := rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline, Inline: []byte{1}}
	assert.ErrorIs(t, qa.PostSend(&wr), rdma.ErrClosed)
	assert.ErrorIs(t, qa.PostRecv(&rdma.RecvRequest{}), rdma.ErrClosed)
	assert.Error(t, qa.Connect(ctx, qb.LocalEndpoint()), "Connect after Close")
	// The peer learns: its QP moves to ERR (at once or on its next request).
	_ = qb.PostSend(&wr)
	waitState(t, qb, rdma.QPError)
}

func testEndpointRoundTrip(t *testing.T, p Provider) {
	d := openDevice(t, p)
	cq, err := d.CreateCQ(4)
	require.NoError(t, err)
	qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 1})
	require.NoError(t, err)
	ep := qp.LocalEndpoint()
	assert.Equal(t, p.Name, ep.Provider)
	assert.Equal(t, d.HostID(), ep.HostID)
	assert.Equal(t, qp.Num(), ep.QPN)
	b, err := ep.MarshalBinary()
	require.NoError(t, err)
	var back rdma.Endpoint
	require.NoError(t, back.UnmarshalBinary(b))
	assert.Equal(t, ep, back)
}

func testConnectOtherProvider(t *testing.T, p Provider) {
	d := openDevice(t, p)
	cq, err := d.CreateCQ(4)
	require.NoError(t, err)
	qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 1})
	require.NoError(t, err)
	ep := qp.LocalEndpoint()
	ep.Provider = "no-such-provider"
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	assert.ErrorIs(t, qp.Connect(ctx, ep), rdma.ErrProviderMismatch)
	assert.NotEqual(t, rdma.QPReadyToSend, qp.State())
}

func testPostBeforeConnect(t *testing.T, p Provider) {
	d := openDevice(t, p)
	cq, err := d.CreateCQ(4)
	require.NoError(t, err)
	qp, err := d.CreateQP(rdma.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 1})
	require.NoError(t, err)
	wr := rdma.WorkRequest{Op: rdma.OpWrite, Flags: rdma.FlagInline | rdma.FlagSignaled, Inline: []byte{1}}
	assert.Error(t, qp.PostSend(&wr), "PostSend in RESET")
	expectNone(t, cq, 20*time.Millisecond)
}
