package tcp_test

import (
	"os"
	"testing"

	"github.com/tickbus/tickbus/internal/child"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/rdmatest"
	"github.com/tickbus/tickbus/rdma/tcp"
)

// provider is the tcp provider as the conformance suite sees it: a fresh
// device on loopback, in this process or in the peers it spawns.
var provider = rdmatest.Provider{Name: rdma.ProviderTCP, Open: func() (rdma.Device, error) {
	return tcp.Open(tcp.Config{HostID: "conformance"})
}}

func TestMain(m *testing.M) {
	rdmatest.RegisterChildRoles(provider)
	child.Main()
	os.Exit(m.Run())
}

// TestConformance runs the provider conformance suite, unchanged.
func TestConformance(t *testing.T) { rdmatest.Run(t, provider) }
