package bus

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/nats-io/nkeys"
)

// AnyIdentity in an Authorization list allows every identity that signs its
// messages (any key the NATS server let in).
const AnyIdentity = "*"

// Authorization says which identities (public user nkeys, "U…") may publish
// and subscribe on which topics. A nil map allows every signed identity
// (the default, so that a two-command start on one host works); a non-nil
// map allows only what it lists. Keys of the maps are a topic or "*" (every
// topic); values are public keys or AnyIdentity.
//
// Publishing includes being a topic's home (claim, home, unhome, homei) and
// connecting a queue pair to a subscriber's ring or a home's counter;
// subscribing includes reaching a publisher's credit cells and asking the
// home for its counter.
type Authorization struct {
	Publish   map[string][]string
	Subscribe map[string][]string
}

// CanPublish reports whether key may publish on topic.
func (a Authorization) CanPublish(key, topic string) bool { return allowed(a.Publish, key, topic) }

// CanSubscribe reports whether key may subscribe to topic.
func (a Authorization) CanSubscribe(key, topic string) bool { return allowed(a.Subscribe, key, topic) }

func allowed(m map[string][]string, key, topic string) bool {
	if m == nil {
		return true
	}
	for _, t := range []string{topic, "*"} {
		ids, ok := m[t]
		if ok && (slices.Contains(ids, key) || slices.Contains(ids, AnyIdentity)) {
			return true
		}
	}
	return false
}

func (a Authorization) validate() error {
	for name, m := range map[string]map[string][]string{"Publish": a.Publish, "Subscribe": a.Subscribe} {
		for topic, ids := range m {
			if topic != "*" {
				if err := checkTopic("Authorization."+name+" topic", topic); err != nil {
					return err
				}
			}
			for _, id := range ids {
				if id != AnyIdentity && !nkeys.IsValidPublicUserKey(id) {
					return fmt.Errorf("%w: Authorization.%s[%s] entry %q, want a public user nkey (U…) or %q",
						ErrInvalidConfig, name, topic, id, AnyIdentity)
				}
			}
		}
	}
	return nil
}

// identity is this node's key pair and its public key.
type identity struct {
	kp  nkeys.KeyPair
	pub string
	// priv is the ed25519 key kp stands for, derived once: nkeys derives it
	// again from the seed at every Sign, which doubles the cost. nil when kp
	// does not give its seed; then kp signs.
	priv ed25519.PrivateKey
}

// derive fills id.priv from the seed of id.kp, if it has one that gives
// the same public key.
func (id *identity) derive() {
	seed, err := id.kp.Seed()
	if err != nil {
		return
	}
	_, raw, err := nkeys.DecodeSeed(seed)
	if err != nil || len(raw) < ed25519.SeedSize {
		return
	}
	priv := ed25519.NewKeyFromSeed(raw[:ed25519.SeedSize])
	pub, err := nkeys.Decode(nkeys.PrefixByteUser, []byte(id.pub))
	if err == nil && bytes.Equal(pub, priv.Public().(ed25519.PublicKey)) {
		id.priv = priv
	}
}

func (id identity) sign(b []byte) ([]byte, error) {
	if id.priv != nil {
		return ed25519.Sign(id.priv, b), nil
	}
	return id.kp.Sign(b)
}

// loadIdentity picks the node's key: Config.Key, else the seed of
// NATS.NKeySeedFile or NATS.CredsFile (the NATS user's own key, so the bus
// identity is the NATS identity), else, for a NodeID the user set, a key
// kept in RuntimeDir per node id, else a fresh user key for this process.
func loadIdentity(c Config) (identity, error) {
	kp := c.Key
	switch {
	case kp != nil:
	case c.NATS.NKeySeedFile != "" || c.NATS.CredsFile != "":
		key, file := "NATS.NKeySeedFile", c.NATS.NKeySeedFile
		if file == "" {
			key, file = "NATS.CredsFile", c.NATS.CredsFile
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return identity{}, fmt.Errorf("%w: %s %q: %v", ErrInvalidConfig, key, file, err)
		}
		if kp, err = nkeys.ParseDecoratedUserNKey(b); err != nil {
			return identity{}, fmt.Errorf("%w: %s %q: no user nkey seed: %v", ErrInvalidConfig, key, file, err)
		}
	case c.nodeIDGiven:
		// a node id the user chose: keep its key in the runtime dir, so the
		// node keeps its identity across restarts (peers bind the id to it)
		dir, err := RuntimeDir()
		if err != nil {
			return identity{}, err
		}
		seed, err := secretFile(filepath.Join(dir, "node-"+c.NodeID+".nk"), func() ([]byte, error) {
			k, err := nkeys.CreateUser()
			if err != nil {
				return nil, err
			}
			return k.Seed()
		})
		if err != nil {
			return identity{}, fmt.Errorf("bus: key of node %s: %w", c.NodeID, err)
		}
		if kp, err = nkeys.FromSeed(seed); err != nil {
			return identity{}, fmt.Errorf("bus: key of node %s in %s: %w", c.NodeID, dir, err)
		}
	default:
		var err error
		if kp, err = nkeys.CreateUser(); err != nil {
			return identity{}, fmt.Errorf("bus: generate node key: %w", err)
		}
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return identity{}, fmt.Errorf("%w: Key: %v", ErrInvalidConfig, err)
	}
	if !nkeys.IsValidPublicUserKey(pub) {
		return identity{}, fmt.Errorf("%w: Key %q, want a user nkey (U…)", ErrInvalidConfig, pub)
	}
	if _, err := kp.Sign([]byte("probe")); err != nil {
		return identity{}, fmt.Errorf("%w: Key %q cannot sign (a public key only?): %v", ErrInvalidConfig, pub, err)
	}
	id := identity{kp: kp, pub: pub}
	id.derive()
	return id, nil
}

// Authorization is the node's configured Authorization: accept handlers
// use it to grant a peer's queue pair only what its identity may do.
func (n *Node) Authorization() Authorization { return n.cfg.Authorization }
