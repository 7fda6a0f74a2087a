package bus

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Discovery subjects, all under P.d so that one subscription sees them in
// the order each peer sent them:
//
//	P.d.hb             heartbeat
//	P.d.bye            goodbye
//	P.d.who            who is there (optionally for one topic and one kind, or asking one node by id): re-announce
//	P.d.sub.<topic>    subscriber announced / withdrew
//	P.d.pub.<topic>    publisher announced / withdrew
//	P.d.home.<topic>   home claims, assertions and withdrawals
//
// Every message carries the sender's node, so any of them counts as a
// heartbeat and introduces a peer.

func (n *Node) onDiscovery(m *nats.Msg) {
	n.counters.messagesIn.Add(1)
	defer n.discDone.Add(1) // handled (heartbeatLoop: is this node keeping up?)
	rest, ok := strings.CutPrefix(m.Subject, n.cfg.Prefix+".d.")
	if !ok {
		return
	}
	kind, topic, _ := strings.Cut(rest, ".")
	if !slices.Contains([]string{kindHeartbeat, kindBye, kindWho, kindSub, kindPub, "home"}, kind) {
		n.badInput("unknown-subject", fmt.Errorf("%w: subject %q", ErrMalformed, m.Subject))
		return
	}
	if n.isOwnEcho(m.Data) {
		return
	}
	w, err := n.open(m.Subject, m.Data)
	if err != nil {
		n.badInput(kind, err)
		return
	}
	if err := checkSubject(kind, topic, w); err != nil {
		n.badInput(kind, err)
		return
	}
	if err := n.authorize(w); err != nil {
		n.badInput(kind, err)
		return
	}
	if w.Node.ID == n.self.ID {
		if w.Node.Inc != n.self.Incarnation {
			n.badInput(kind, fmt.Errorf("%w: another node uses this node's id %q", ErrMalformed, w.Node.ID))
		}
		return // our own echo
	}
	var reannounce, askBack bool
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	p, isNew := n.touchLocked(w.peer())
	if p == nil {
		n.mu.Unlock()
		n.badInput(kind, fmt.Errorf("%w: message from an older incarnation of %s", ErrRejected, w.Node.ID))
		return
	}
	switch w.Kind {
	case kindBye:
		n.peerDownLocked(p, ErrPeerLeft)
	case kindWho:
		reannounce = w.ID == "" || w.ID == n.self.ID
		askBack = w.ID == n.self.ID && p.whoBack(time.Now())
	case kindSub:
		p.answered = true
		n.addSubLocked(SubscriberInfo{Topic: w.Topic, ID: w.ID, Node: p.info, Mode: Mode(w.Mode), Ring: w.Desc})
	case kindUnsub:
		n.removeSubLocked(w.Topic, w.Node.ID+"/"+w.ID, ErrWithdrawn)
	case kindPub:
		p.answered = true
		n.addPubLocked(PublisherInfo{Topic: w.Topic, ID: w.ID, Node: p.info, Data: w.Data})
	case kindUnpub:
		n.removePubLocked(w.Topic, w.Node.ID+"/"+w.ID, ErrWithdrawn)
	case kindClaim, kindHome:
		// from nodes that still elect by claim window: JetStream decides now
	case kindUnhome:
		n.homeGoneLocked(w.Topic, w.Node.ID, fmt.Errorf("%w: %s stopped publishing %q", ErrHomeLost, w.Node.ID, w.Topic))
	}
	if isNew && w.Kind != kindBye {
		p.askedAt, p.answered = time.Now(), false // after the switch: a first message that is a who is not a sign (whoBack)
	}
	n.mu.Unlock()
	if isNew && w.Kind != kindBye {
		// a peer we did not know (or had aged out while it lived on): ask it
		// alone to re-announce, or its announcements would stay forgotten.
		// Whatever its first message here (a heartbeat, its own "who", a
		// claim), announcements it sent before a cluster route reached us
		// are lost; a repeated announcement is ignored.
		n.publish(n.subject("d", kindWho), &wireMsg{Kind: kindWho, ID: w.Node.ID})
	}
	if reannounce {
		n.announceAll(w.Topic, TargetKind(w.Target))
	}
	if askBack {
		n.publish(n.subject("d", kindWho), &wireMsg{Kind: kindWho, ID: w.Node.ID})
	}
}

// whoBackWindow bounds how long after asking a peer anew (isNew) a who
// from it is taken as a sign that our question went unheard.
const whoBackWindow = 30 * time.Second

// whoBack reports whether a who addressed to this node by p should be
// answered with our own who to p once more: we asked p alone to
// re-announce when we heard it anew, nothing it announced came since, and
// now p asks us, so p has only just heard us. After a partition heals,
// one side often hears the other seconds before it is heard (cluster
// routes come back one way first): its who was published while the peer
// could not hear it, so the peer never re-announced its subscribers and
// no publisher here ever connected to them. Asking again once costs a
// message; it is asked once per asking (askedAt is cleared). Called with
// n.mu.
func (p *peer) whoBack(now time.Time) bool {
	if p.askedAt.IsZero() || p.answered || now.Sub(p.askedAt) > whoBackWindow {
		return false
	}
	p.askedAt = time.Time{}
	return true
}

// checkSubject: the kind must belong on the subject, and a topic subject
// must name the message's topic.
func checkSubject(subjKind, topic string, w *wireMsg) error {
	var ok bool
	switch subjKind {
	case kindHeartbeat, kindBye, kindWho:
		ok = w.Kind == subjKind && topic == ""
	case kindSub:
		ok = (w.Kind == kindSub || w.Kind == kindUnsub) && topic == w.Topic
	case kindPub:
		ok = (w.Kind == kindPub || w.Kind == kindUnpub) && topic == w.Topic
	case "home":
		ok = (w.Kind == kindClaim || w.Kind == kindHome || w.Kind == kindUnhome) && topic == w.Topic
	}
	if !ok {
		return fmt.Errorf("%w: kind %q (topic %q) on subject kind %q (topic %q)", ErrMalformed, w.Kind, w.Topic, subjKind, topic)
	}
	return nil
}

// touchLocked records that info is alive now; a new incarnation first drops
// everything the old one announced. A message from an older incarnation
// than the one known (a stale process still running, or its late goodbye)
// returns nil: the caller ignores it.
func (n *Node) touchLocked(info PeerInfo) (p *peer, isNew bool) {
	p = n.peers[info.ID]
	if p != nil && info.Incarnation < p.info.Incarnation {
		return nil, false
	}
	if p != nil && p.info.Incarnation != info.Incarnation {
		n.peerDownLocked(p, ErrPeerRestarted)
		p = nil
	}
	if p == nil {
		p, isNew = &peer{info: info}, true
		n.peers[info.ID] = p
		n.log.Info().Str("peer", info.ID).Str("host", info.HostID).Msg("bus: peer up")
		n.heldGoneLocked("", info.ID, info.Incarnation, ErrPeerRestarted) // what an older incarnation left held
	}
	p.info = info
	p.lastSeen = time.Now()
	return p, isNew
}

// peerDownLocked forgets p and everything it announced, telling the owners.
func (n *Node) peerDownLocked(p *peer, reason error) {
	if n.peers[p.info.ID] != p {
		return
	}
	delete(n.peers, p.info.ID)
	n.trust.release(p.info.ID)
	n.log.Info().Str("peer", p.info.ID).Err(reason).Msg("bus: peer down")
	prefix := p.info.ID + "/"
	for topic, m := range n.subs {
		for key := range m {
			if strings.HasPrefix(key, prefix) {
				n.removeSubLocked(topic, key, reason)
			}
		}
	}
	for topic, m := range n.pubs {
		for key := range m {
			if strings.HasPrefix(key, prefix) {
				n.removePubLocked(topic, key, reason)
			}
		}
	}
	for topic := range n.localPubs {
		n.homeGoneLocked(topic, p.info.ID, fmt.Errorf("%w: home %s: %w", ErrHomeLost, p.info.ID, reason))
	}
	if !errors.Is(reason, ErrPeerLost) { // lost: its ends may be held (unheard.go); else they are gone
		n.heldGoneLocked("", p.info.ID, 0, reason)
	}
	if f := n.cfg.OnPeerDown; f != nil {
		info := p.info
		n.events.push(func() { f(info, reason) })
	}
}

func sameSub(a, b SubscriberInfo) bool {
	return a.Mode == b.Mode && bytes.Equal(a.Ring, b.Ring) && a.Node.Incarnation == b.Node.Incarnation
}

func samePub(a, b PublisherInfo) bool {
	return bytes.Equal(a.Data, b.Data) && a.Node.Incarnation == b.Node.Incarnation
}

// addSubLocked records a subscriber and tells the topic's local
// publications; a changed announcement replaces the old one (gone, then new).
func (n *Node) addSubLocked(s SubscriberInfo) {
	m := n.subs[s.Topic]
	if m == nil {
		m = map[string]SubscriberInfo{}
		n.subs[s.Topic] = m
	}
	key := s.Key()
	if old, ok := m[key]; ok {
		if sameSub(old, s) {
			return
		}
		n.removeSubLocked(s.Topic, key, ErrWithdrawn)
	}
	m[key] = s
	n.counters.announcementsIn.Add(1)
	for _, p := range n.localPubs[s.Topic] {
		p.subscriberUp(s)
	}
}

func (n *Node) removeSubLocked(topic, key string, reason error) {
	s, ok := n.subs[topic][key]
	if !ok {
		for _, p := range n.localPubs[topic] {
			p.heldGone(key, "", 0, reason) // a held subscriber's withdrawal
		}
		return
	}
	delete(n.subs[topic], key)
	if len(n.subs[topic]) == 0 {
		delete(n.subs, topic)
	}
	for _, p := range n.localPubs[topic] {
		p.subscriberDown(s, reason)
	}
}

func (n *Node) addPubLocked(p PublisherInfo) {
	m := n.pubs[p.Topic]
	if m == nil {
		m = map[string]PublisherInfo{}
		n.pubs[p.Topic] = m
	}
	key := p.Key()
	if old, ok := m[key]; ok {
		if samePub(old, p) {
			return
		}
		n.removePubLocked(p.Topic, key, ErrWithdrawn)
	}
	m[key] = p
	n.counters.announcementsIn.Add(1)
	for _, s := range n.localSubs[p.Topic] {
		s.publisherUp(p)
	}
}

func (n *Node) removePubLocked(topic, key string, reason error) {
	p, ok := n.pubs[topic][key]
	if !ok {
		for _, s := range n.localSubs[topic] {
			s.heldGone(key, "", 0, reason) // a held publisher's withdrawal
		}
		return
	}
	delete(n.pubs[topic], key)
	if len(n.pubs[topic]) == 0 {
		delete(n.pubs, topic)
	}
	for _, s := range n.localSubs[topic] {
		s.publisherDown(p, reason)
	}
}

// heldGoneLocked ends the holds (unheard.go) of node's ends of an
// incarnation other than inc (0: any) in every local publication and
// subscription: the node left or restarted.
func (n *Node) heldGoneLocked(key, node string, inc uint64, reason error) {
	for _, m := range n.localPubs {
		for _, p := range m {
			p.heldGone(key, node, inc, reason)
		}
	}
	for _, m := range n.localSubs {
		for _, s := range m {
			s.heldGone(key, node, inc, reason)
		}
	}
}

// homeGoneLocked tells the topic's local publications whose home is on
// node that it is gone.
func (n *Node) homeGoneLocked(topic, node string, reason error) {
	for _, p := range n.localPubs[topic] {
		p.homeGone(node, reason)
	}
}

// announceAll re-publishes this node's announcements (for one topic, or
// all when topic is ""; of one kind, or all when want is ""): on
// reconnect, and when someone asks who is there. A who for every topic
// (a node that just came, reconnected, or heard us anew) gets a heartbeat
// first; a who for one topic has heard us already.
//
// A new subscriber asks only for the topic's publishers, and a new
// publisher only for its subscribers: every answer is read and checked
// (a signature) by every node, so a join that made every subscriber of the
// topic re-announce cost the bus a message per subscriber per node, and
// under churn a starved node fell seconds behind on discovery (the churn
// test's views lagged by more than its 10 s).
func (n *Node) announceAll(topic string, want TargetKind) {
	if topic == "" {
		n.heartbeat()
	}
	n.mu.Lock()
	var msgs []func()
	for t, m := range n.localSubs {
		if topic != "" && t != topic || want != "" && want != TargetSubscriber {
			continue
		}
		for _, s := range m {
			msgs = append(msgs, s.announce)
		}
	}
	for t, m := range n.localPubs {
		if topic != "" && t != topic || want != "" && want != TargetPublisher {
			continue
		}
		for _, p := range m {
			msgs = append(msgs, p.announce)
		}
	}
	for t := range n.homes {
		if topic != "" && t != topic || want == TargetSubscriber {
			continue
		}
		msgs = append(msgs, func() { n.publish(n.subject("d", "home", t), &wireMsg{Kind: kindHome, Topic: t}) })
	}
	n.mu.Unlock()
	for _, f := range msgs {
		f()
	}
}

// sendWho asks every node to re-announce (for one topic, or all; only
// its subscribers or publishers, or all when want is "").
func (n *Node) sendWho(topic string, want TargetKind) {
	n.publish(n.subject("d", kindWho), &wireMsg{Kind: kindWho, Topic: topic, Target: string(want)})
}
