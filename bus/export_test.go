package bus

import (
	"time"

	"github.com/nats-io/nkeys"
)

// SealForTest signs msg for subject as key would: tests forge messages of
// nodes that hold a key but not the topic's rights.
func SealForTest(kp nkeys.KeyPair, subject string, msg []byte) ([]byte, error) {
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, err
	}
	id := identity{kp: kp, pub: pub}
	id.derive()
	return seal(id, subject, msg)
}

// SetRecordBackstop sets how often n re-reads its topics' home records
// whatever its watchers deliver; call it before the node's first Publish
// or Subscribe. Tests of the watchers set it to hours.
func SetRecordBackstop(n *Node, d time.Duration) { n.backstop = d }

// SetWatchProbe sets how often n checks that its watchers keep up with
// their buckets; call it before the node's first Publish or Subscribe.
func SetWatchProbe(n *Node, d time.Duration) { n.probeEvery = d }

// HeartbeatAfterGoodbye makes n's Close send a heartbeat right after its
// goodbye, as a heartbeat racing Close would: call it before Close.
func HeartbeatAfterGoodbye(n *Node) { n.afterBye = n.heartbeat }
