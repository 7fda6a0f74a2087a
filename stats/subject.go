package stats

import "strings"

// DefaultPrefix is the subject prefix used when none is configured.
const DefaultPrefix = "tickbus"

// Subject returns the NATS subject a subscriber's stats for a topic go to:
// <prefix>.stats.<topic>.<subscriber>. A topic keeps its dotted tokens
// ("md.nasdaq.itch" is three), the subscriber is one token, so the last
// token is always the subscriber and the ones before it the topic: two
// topics never share a subject. Within each token, every byte other than
// ASCII letters, digits, '-', '_' and ':' becomes '_' (valid topics and
// ids have none); the message body carries the names exactly. An empty
// prefix means DefaultPrefix; a prefix may hold several tokens
// ("prod.tickbus"), each sanitised as Token does.
func Subject(prefix, topic, subscriber string) string {
	parts := strings.Split(topic, ".")
	for i, p := range parts {
		parts[i] = subjectToken(p)
	}
	return subjectPrefix(prefix) + "." + strings.Join(parts, ".") + "." + subjectToken(subscriber)
}

// subjectToken is Token keeping ':', which NATS subjects allow and topics
// may hold.
func subjectToken(s string) string {
	if s == "" {
		return "_"
	}
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == ':':
		default:
			b[i] = '_'
		}
	}
	return string(b)
}

// SubjectAll is the wildcard subject that matches every stats subject under
// prefix, for the dashboard and the stat view.
func SubjectAll(prefix string) string {
	return subjectPrefix(prefix) + ".>"
}

func subjectPrefix(prefix string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	parts := strings.Split(prefix, ".")
	for i, p := range parts {
		parts[i] = Token(p)
	}
	return strings.Join(parts, ".") + ".stats"
}

// Token makes s one safe token: letters, digits, '-' and '_' are kept, every
// other byte becomes '_', and "" becomes "_". It serves as a NATS subject
// token and as part of a file name.
func Token(s string) string {
	if s == "" {
		return "_"
	}
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			b[i] = '_'
		}
	}
	return string(b)
}
