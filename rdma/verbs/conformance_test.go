//go:build verbs && cgo && linux

package verbs_test

import (
	"os"
	"testing"

	"github.com/tickbus/tickbus/internal/child"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/rdmatest"
	"github.com/tickbus/tickbus/rdma/verbs"
)

// provider is the verbs provider as the conformance suite sees it: the first
// RDMA device. Without one, Open returns rdma.ErrNoDevice and the suite
// skips, saying so.
var provider = rdmatest.Provider{Name: rdma.ProviderVerbs, Open: func() (rdma.Device, error) {
	return verbs.Open(verbs.Config{HostID: "conformance"})
}}

func TestMain(m *testing.M) {
	rdmatest.RegisterChildRoles(provider)
	child.Main()
	os.Exit(m.Run())
}

// TestConformance runs the provider conformance suite, unchanged.
func TestConformance(t *testing.T) { rdmatest.Run(t, provider) }
