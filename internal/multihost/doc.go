// Package multihost holds tickbus's multi-host test: three network
// namespaces on one machine stand in for three hosts (internal/netns), each
// with its own nats-server process joined into one cluster, a publisher on
// one host and subscribers on the other two reaching each other over the tcp
// provider. The package has no API; its test is the point.
package multihost
