package bus

import (
	"fmt"
	"sort"
	"strings"
)

// TopicInfo is what this node knows of one topic: every announced
// subscriber and publisher, its own included, before any validator ran.
type TopicInfo struct {
	Topic       string
	Subscribers []SubscriberInfo // sorted by key
	Publishers  []PublisherInfo  // sorted by key
}

// Topics lists every topic this node has heard of, sorted by name; for
// tools such as `tickbus stat`.
func (n *Node) Topics() []TopicInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	byName := map[string]*TopicInfo{}
	get := func(t string) *TopicInfo {
		if ti := byName[t]; ti != nil {
			return ti
		}
		ti := &TopicInfo{Topic: t}
		byName[t] = ti
		return ti
	}
	for t, m := range n.subs {
		ti := get(t)
		for _, s := range m {
			ti.Subscribers = append(ti.Subscribers, s)
		}
		sort.Slice(ti.Subscribers, func(i, j int) bool { return ti.Subscribers[i].Key() < ti.Subscribers[j].Key() })
	}
	for t, m := range n.pubs {
		ti := get(t)
		for _, p := range m {
			ti.Publishers = append(ti.Publishers, p)
		}
		sort.Slice(ti.Publishers, func(i, j int) bool { return ti.Publishers[i].Key() < ti.Publishers[j].Key() })
	}
	out := make([]TopicInfo, 0, len(byName))
	for _, ti := range byName {
		out = append(out, *ti)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

// Topic names are hierarchical: up to MaxTopicTokens tokens joined by
// dots ("md.nasdaq.itch"), each token 1 or more of [A-Za-z0-9_:-], at most
// MaxTopicLen bytes in all. Every NATS subject that carries a topic either
// ends with it (P.d.sub.<topic>, P.d.pub.<topic>, P.d.home.<topic>,
// P.home.<topic>) or is followed by exactly one token
// (P.stats.<topic>.<subscriber>), so a subject names one topic only.
const (
	MaxTopicTokens = 8
	MaxTopicLen    = 128
)

// CheckTopic reports whether topic is a valid topic name, with an error
// naming it and what is expected.
func CheckTopic(topic string) error { return checkTopic("topic", topic) }

func checkTopic(key, topic string) error {
	if !validTopic(topic) {
		return fmt.Errorf("%w: %s %q, want 1..%d tokens of [A-Za-z0-9_:-] joined by dots (such as md.nasdaq.itch), at most %d bytes",
			ErrInvalidConfig, key, topic, MaxTopicTokens, MaxTopicLen)
	}
	return nil
}

func validTopic(s string) bool {
	if len(s) == 0 || len(s) > MaxTopicLen {
		return false
	}
	tokens, n := 1, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.':
			if n == 0 {
				return false
			}
			tokens, n = tokens+1, 0
		case tokenByte(c):
			n++
		default:
			return false
		}
	}
	return n > 0 && tokens <= MaxTopicTokens
}

// Pattern is a topic or a wildcard over topics, NATS style: "*" stands for
// exactly one token, a final ">" for one or more ("md.nasdaq.>",
// "md.*.itch").
type Pattern struct {
	s      string
	tokens []string
}

// ParsePattern parses a topic pattern: like a topic, but a token may be
// "*", and the last may be ">".
func ParsePattern(s string) (Pattern, error) {
	bad := func() (Pattern, error) {
		return Pattern{}, fmt.Errorf("%w: topic pattern %q, want up to %d dot-separated tokens of [A-Za-z0-9_:-], '*' for any one token or a final '>' for the rest (such as md.nasdaq.> or md.*.itch)",
			ErrInvalidConfig, s, MaxTopicTokens)
	}
	if len(s) == 0 || len(s) > MaxTopicLen {
		return bad()
	}
	tokens := strings.Split(s, ".")
	if len(tokens) > MaxTopicTokens {
		return bad()
	}
	for i, t := range tokens {
		switch {
		case t == "*":
		case t == ">":
			if i != len(tokens)-1 {
				return bad()
			}
		case !validToken(t):
			return bad()
		}
	}
	return Pattern{s: s, tokens: tokens}, nil
}

// IsPattern reports whether s holds a wildcard token.
func IsPattern(s string) bool {
	for _, t := range strings.Split(s, ".") {
		if t == "*" || t == ">" {
			return true
		}
	}
	return false
}

func (p Pattern) String() string { return p.s }

// Wild reports whether the pattern has a wildcard (else it is one topic).
func (p Pattern) Wild() bool { return IsPattern(p.s) }

// Match reports whether topic matches the pattern.
func (p Pattern) Match(topic string) bool {
	if len(p.tokens) == 0 || !validTopic(topic) {
		return false
	}
	tt := strings.Split(topic, ".")
	for i, want := range p.tokens {
		if want == ">" {
			return len(tt) > i
		}
		if i >= len(tt) || want != "*" && want != tt[i] {
			return false
		}
	}
	return len(tt) == len(p.tokens)
}
