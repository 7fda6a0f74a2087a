package netns

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A three-server cluster with JetStream holds a replicated KV bucket; one
// server restarted (killed, started again on its own store) serves the
// bucket again, with what was written while it was away.
func TestNATSCluster_JetStreamKVSurvivesARestartedServer(t *testing.T) {
	needNetns(t)
	if testing.Short() {
		t.Skip("starts and restarts a three-server JetStream cluster; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n, err := New(ctx, Config{Hosts: 3})
	require.NoError(t, err)
	t.Cleanup(func() { n.Close() })
	servers, err := n.StartNATSWith(ctx, NATSOptions{JetStreamDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, s := range servers {
			s.Stop()
		}
	})
	kv := func(s *NATSServer) jetstream.KeyValue {
		nc, err := nats.Connect(s.URL, nats.Timeout(5*time.Second), nats.MaxReconnects(0))
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		require.NoError(t, s.WaitJetStream(ctx))
		deadline := time.Now().Add(30 * time.Second)
		for { // the stream's own leader is elected after the meta leader
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			b, err := js.CreateOrUpdateKeyValue(cctx, jetstream.KeyValueConfig{Bucket: "t", Replicas: 3, Storage: jetstream.FileStorage})
			ccancel()
			if err == nil {
				return b
			}
			require.True(t, time.Now().Before(deadline), "bucket at %s: %v", s.URL, err)
			time.Sleep(200 * time.Millisecond)
		}
	}
	b0 := kv(servers[0])
	_, err = b0.Put(ctx, "k", []byte("one"))
	require.NoError(t, err)

	require.NoError(t, servers[1].Kill())
	// Two of three servers keep the bucket writable, once the stream has a
	// leader again (it may have been the killed server).
	deadline := time.Now().Add(30 * time.Second)
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = b0.Put(pctx, "k", []byte("two"))
		pcancel()
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "two of three servers keep the bucket writable: %v", err)
		time.Sleep(200 * time.Millisecond)
	}
	require.NoError(t, servers[1].Restart(ctx))
	b1 := kv(servers[1])
	require.Eventually(t, func() bool {
		e, err := b1.Get(ctx, "k")
		return err == nil && string(e.Value()) == "two"
	}, 30*time.Second, 200*time.Millisecond, "the restarted server serves what was written while it was down")
	for _, s := range servers {
		assert.NoError(t, s.Stop())
	}
}
