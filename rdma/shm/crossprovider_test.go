package shm_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/shm"
	"github.com/tickbus/tickbus/rdma/tcp"
)

// One ring reached through shm and tcp at once: memory a tcp device
// allocated is registered on an shm device, and a peer writes into it
// through shm.
func TestRegister_MemoryOfATCPDevice_ReachableThroughShm(t *testing.T) {
	td, err := tcp.Open(tcp.Config{})
	require.NoError(t, err)
	defer td.Close()
	ring, err := td.RegisterMemory(1<<16, rdma.AccessLocalWrite|rdma.AccessRemote)
	require.NoError(t, err)

	owner, err := shm.Open(shm.Config{})
	require.NoError(t, err)
	defer owner.Close()
	// An unaligned part of it, to show the offset is carried.
	alias, err := owner.Register(ring.Bytes()[4096+100:8192], rdma.AccessRemoteWrite|rdma.AccessRemoteRead)
	require.NoError(t, err)

	peer, err := shm.Open(shm.Config{})
	require.NoError(t, err)
	defer peer.Close()
	qa, cqa := newQP(t, peer)
	qb, _ := newQP(t, owner)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, qa.Connect(ctx, qb.LocalEndpoint()))
	require.NoError(t, qb.Connect(ctx, qa.LocalEndpoint()))

	wr := rdma.WorkRequest{ID: 1, Op: rdma.OpWrite, Flags: rdma.FlagInline | rdma.FlagSignaled, Inline: []byte("via shm"),
		Remote: rdma.RemoteAddr{Addr: alias.Addr() + 10, RKey: alias.RKey()}}
	require.NoError(t, qa.PostSend(&wr))
	buf := make([]rdma.Completion, 1)
	require.Eventually(t, func() bool { return cqa.Poll(buf) == 1 }, 5*time.Second, time.Millisecond)
	require.Equal(t, rdma.StatusSuccess, buf[0].Status)
	assert.Equal(t, "via shm", string(ring.Bytes()[4096+110:4096+117]), "landed in the tcp device's memory")

	// Past the alias's end is refused even though the memory goes on.
	wr.Remote.Addr = alias.Addr() + uint64(len(alias.Bytes())) - 2
	before := bytes.Clone(ring.Bytes())
	require.NoError(t, qa.PostSend(&wr))
	require.Eventually(t, func() bool { return cqa.Poll(buf) == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, rdma.StatusRemoteAccess, buf[0].Status)
	assert.Equal(t, before, ring.Bytes(), "nothing written")

	require.NoError(t, alias.Close())
	assert.Equal(t, "via shm", string(ring.Bytes()[4096+110:4096+117]), "deregistering the alias leaves the memory to its owner")
}
