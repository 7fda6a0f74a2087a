// Package netns builds throwaway multi-host networks on one Linux machine
// for tests: network namespaces ("hosts") joined by veth pairs to a bridge
// in the root namespace, so every host reaches every other and the root
// namespace reaches them all; plus a nats-server per host, run as a real
// process inside its namespace and joined into one cluster.
//
// It needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2's ip command.
// Available reports why it cannot run, for t.Skip. Everything New creates
// is removed by Close, and by New itself when it fails half-way; names are
// random per network, so parallel runs do not collide.
//
// Processes run inside a host with Net.Command, which wraps `ip netns exec`
// around a child role of the current binary (internal/child); test binaries
// that start them call child.Main first in TestMain.
package netns
