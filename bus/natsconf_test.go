package bus_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tickbus/tickbus/bus"
)

const natsConfDir = "../configs/nats"

// Example public keys in configs/nats/tickbus.conf, replaced by fresh ones
// whose seeds the test holds.
var exampleKeys = map[string]string{
	"feed-a":   "UADG3QLDTDE4FEULGRXVUOX5V5E57ABGT2PZG3WSTWF2ZMLRX4DIBD4R",
	"engine-1": "UDQUMEH4D52CPNIGBOY3E723VWIDDOB32DMLC6R2Z7KAFKWIMAF57YL3",
	"dash":     "UBBLYYOL3RTXHLLUFMIONM54TYYNLAFFLJCRKA33GW35KZGIQT5AWK5G",
}

func TestNATSConfigs_EveryExampleParses(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(natsConfDir, "*.conf"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		opts, err := server.ProcessConfigFile(f)
		require.NoError(t, err, f)
		assert.NotEmpty(t, opts.Nkeys, "%s: no nkey users", f)
		for _, u := range opts.Nkeys {
			assert.NotNil(t, u.Permissions, "%s: user %s has no permissions", f, u.Nkey)
		}
	}
}

// The shipped server configuration, run: the identities it names publish
// and subscribe through tickbus, and each is kept off the others' subjects
// (the engine cannot read the feed's connect requests or replies, nor
// announce a publisher; anonymous clients are refused).
func TestNATSConfigs_Tickbus_ConfinesEachIdentity(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(natsConfDir, "tickbus.conf"))
	require.NoError(t, err)
	conf := string(b)
	dir := t.TempDir()
	seeds := map[string]string{}
	for name, pub := range exampleKeys {
		kp, err := nkeys.CreateUser()
		require.NoError(t, err)
		fresh, err := kp.PublicKey()
		require.NoError(t, err)
		seed, err := kp.Seed()
		require.NoError(t, err)
		seeds[name] = filepath.Join(dir, name+".nk")
		require.NoError(t, os.WriteFile(seeds[name], seed, 0o600))
		require.Contains(t, conf, pub)
		conf = strings.ReplaceAll(conf, pub, fresh)
	}
	cf := filepath.Join(dir, "tickbus.conf")
	require.NoError(t, os.WriteFile(cf, []byte(conf), 0o600))
	opts, err := server.ProcessConfigFile(cf)
	require.NoError(t, err)
	opts.Port, opts.NoLog, opts.NoSigs = server.RANDOM_PORT, true, true
	opts.StoreDir = filepath.Join(dir, "js") // not the shared default: records of other runs
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second))
	t.Cleanup(s.Shutdown)
	url := s.ClientURL()

	_, err = nats.Connect(url, nats.MaxReconnects(0))
	require.ErrorIs(t, err, nats.ErrAuthorization, "anonymous client accepted")

	open := func(id string) *bus.Node {
		c := testConfig(id, url)
		c.NATS.NKeySeedFile = seeds[id]
		return openNode(t, c)
	}
	ctx := context.Background()
	feed, engine := open("feed-a"), open("engine-1")
	var rec recorder
	var homeMu sync.Mutex
	var home bus.HomeInfo
	spec := subSpec("equities", "s", &rec)
	spec.OnHome = func(hi bus.HomeInfo) { homeMu.Lock(); home = hi; homeMu.Unlock() }
	_, err = engine.Subscribe(ctx, spec) // before the buckets exist: the engine waits, it cannot create them
	require.NoError(t, err)
	pub, err := feed.Publish(ctx, pubSpec("equities", &rec))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(pub.Subscribers()) == 1 && rec.count("pub+feed-a/feed-a") == 1 }, eventually, tick)
	_, err = feed.Connect(ctx, "engine-1", bus.ConnectRequest{Topic: "equities", Kind: bus.TargetSubscriber, ID: "s",
		Endpoint: sampleEndpoint("tcp", "host-feed-a", 9)})
	require.NoError(t, err, "the feed's connect request and the engine's reply")
	// the engine watches the home records (JetStream rights to read them)
	require.Eventually(t, func() bool {
		homeMu.Lock()
		defer homeMu.Unlock()
		return home.Node.ID == "feed-a" && home.Epoch == pub.Home().Epoch && len(home.Descriptor) > 0
	}, eventually, tick, "the engine never read the home record")

	// the engine's key on a plain client: the feed's subjects are closed to it
	var mu sync.Mutex
	var violations []string
	opt, err := nats.NkeyOptionFromSeed(seeds["engine-1"])
	require.NoError(t, err)
	nc, err := nats.Connect(url, opt, nats.CustomInboxPrefix("_INBOX.engine-1"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		mu.Lock()
		violations = append(violations, err.Error())
		mu.Unlock()
	}))
	require.NoError(t, err)
	defer nc.Close()
	for _, subj := range []string{"tickbus.qp.feed-a", "_INBOX.feed-a.>", ">"} {
		_, err := nc.Subscribe(subj, func(*nats.Msg) {})
		require.NoError(t, err)
	}
	require.NoError(t, nc.Publish("tickbus.d.pub.equities", []byte("x")))
	require.NoError(t, nc.Publish("tickbus.d.home.equities", []byte("x")))
	// JetStream: the engine may read the buckets (the record as the feed
	// wrote it), not delete, purge, update or write them
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	seqs, err := js.KeyValue(ctx, "tickbus_seqs")
	require.NoError(t, err, "the engine cannot open the home records")
	recBefore, err := seqs.Get(ctx, "equities")
	require.NoError(t, err, "the engine cannot read the home record")
	forbidden := []string{
		"$JS.API.STREAM.DELETE.KV_tickbus_seqs", "$JS.API.STREAM.DELETE.KV_tickbus_homes",
		"$JS.API.STREAM.PURGE.KV_tickbus_seqs", "$JS.API.STREAM.PURGE.KV_tickbus_homes",
		"$JS.API.STREAM.UPDATE.KV_tickbus_seqs", "$JS.API.STREAM.CREATE.KV_tickbus_seqs",
		"$JS.API.STREAM.MSG.DELETE.KV_tickbus_seqs",
		"$KV.tickbus_seqs.equities", "$KV.tickbus_homes.equities", // a home record, a lease
	}
	for _, subj := range forbidden {
		require.NoError(t, nc.Publish(subj, []byte(`{}`)))
	}
	// the feed's key: it may write its topic's keys, but not delete,
	// purge or reconfigure the buckets either
	fopt, err := nats.NkeyOptionFromSeed(seeds["feed-a"])
	require.NoError(t, err)
	fc, err := nats.Connect(url, fopt, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		mu.Lock()
		violations = append(violations, err.Error())
		mu.Unlock()
	}))
	require.NoError(t, err)
	defer fc.Close()
	// (it may create a missing bucket: STREAM.CREATE of an existing one
	// with another config is refused by JetStream itself)
	feedForbidden := append(append([]string(nil), forbidden[:5]...), forbidden[6], "$KV.tickbus_seqs.other", "$KV.tickbus_homes.other")
	for _, subj := range feedForbidden {
		require.NoError(t, fc.Publish(subj, []byte(`{}`)))
	}
	require.NoError(t, nc.Flush())
	require.NoError(t, fc.Flush())
	want := 5 + len(forbidden) + len(feedForbidden)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(violations) >= want
	}, eventually, tick, "fewer than %d permission violations", want)
	recAfter, err := seqs.Get(ctx, "equities")
	require.NoError(t, err, "the home record is gone")
	assert.Equal(t, recBefore.Revision(), recAfter.Revision(), "the home record was written")
	assert.Equal(t, recBefore.Value(), recAfter.Value())
	for _, b := range []string{"KV_tickbus_seqs", "KV_tickbus_homes"} {
		_, err := js.Stream(ctx, b)
		assert.NoError(t, err, "stream %s", b)
	}
	assert.NoError(t, pub.HomeErr())
	assert.Contains(t, feed.Stats().Homes, "equities")
	mu.Lock()
	for _, v := range violations {
		assert.Contains(t, strings.ToLower(v), "permissions violation")
	}
	mu.Unlock()
}
