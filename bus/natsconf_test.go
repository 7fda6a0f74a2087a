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
	_, err = engine.Subscribe(ctx, subSpec("equities", "s", &rec))
	require.NoError(t, err)
	pub, err := feed.Publish(ctx, pubSpec("equities", &rec))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(pub.Subscribers()) == 1 && rec.count("pub+feed-a/feed-a") == 1 }, eventually, tick)
	_, err = feed.Connect(ctx, "engine-1", bus.ConnectRequest{Topic: "equities", Kind: bus.TargetSubscriber, ID: "s",
		Endpoint: sampleEndpoint("tcp", "host-feed-a", 9)})
	require.NoError(t, err, "the feed's connect request and the engine's reply")

	// the engine's key on a plain client: the feed's subjects are closed to it
	var mu sync.Mutex
	var violations []string
	opt, err := nats.NkeyOptionFromSeed(seeds["engine-1"])
	require.NoError(t, err)
	nc, err := nats.Connect(url, opt, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
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
	require.NoError(t, nc.Flush())
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(violations) >= 5
	}, eventually, tick, "fewer than 5 permission violations")
	mu.Lock()
	for _, v := range violations {
		assert.Contains(t, strings.ToLower(v), "permissions violation")
	}
	mu.Unlock()
}
