package bus

import "context"

// The roles a Node plays, one interface each, so that every user of the
// bus depends on the part it uses rather than on all of *Node: a
// publisher needs a HomeElector and a ConnectService, a subscriber an
// Announcer, a ConnectService and a StatsPublisher, the dashboard a
// StatsWatcher. *Node is every one of them (checked below).

// Self is who this node is.
type Self interface {
	ID() string
	HostID() string
	Info() PeerInfo
}

// HomeElector announces publishers and elects each topic's home among
// them: Publish takes part in the election (PublishSpec's NewHome,
// OnHome and OnHomeLost are this node's side of it), FindHome only looks.
type HomeElector interface {
	Publish(ctx context.Context, spec PublishSpec) (*Publication, error)
	FindHome(ctx context.Context, topic string) (HomeInfo, error)
}

// Announcer announces subscribers and reports what the others announced.
type Announcer interface {
	Subscribe(ctx context.Context, spec SubscribeSpec) (*Subscription, error)
	Topics() []TopicInfo
	Peers() []PeerInfo
}

// ConnectService is the queue-pair and region exchange before the first
// write, and the provider that reaches each peer.
type ConnectService interface {
	Connect(ctx context.Context, node string, req ConnectRequest) (ConnectReply, error)
	ProviderFor(peer PeerInfo) string
}

// Authorizer tells accept handlers what a peer's identity may do.
type Authorizer interface {
	Authorization() Authorization
}

// StatsPublisher sends a subscriber's periodic stats.
type StatsPublisher interface {
	StatsSubject(topic, subscriber string) string
	PublishStats(topic, subscriber string, msg []byte) error
	PublishStatsSubject(subject string, msg []byte) error
}

// StatsWatcher receives the stats subscribers send.
type StatsWatcher interface {
	SubscribeStats(topic string, f StatsFunc) (stop func() error, err error)
	WatchStats(topic string, f StatsFunc, limitMsgs, limitBytes int) (*StatsWatch, error)
}

var (
	_ Self           = (*Node)(nil)
	_ HomeElector    = (*Node)(nil)
	_ Announcer      = (*Node)(nil)
	_ ConnectService = (*Node)(nil)
	_ Authorizer     = (*Node)(nil)
	_ StatsPublisher = (*Node)(nil)
	_ StatsWatcher   = (*Node)(nil)
)
