package bus

import "sort"

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
