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
// skips, saying so. Its general cases name regions by their own rkeys on
// queue pairs never granted anything, so it opens the device with open
// regions (Config.OpenRegions; the Grants cases that need grant-only
// regions skip, saying so); the grant-only registration tickbus runs is
// TestGrantOnly_RegionKeyReachesNothingAWindowItsQPOnly's.
var provider = rdmatest.Provider{Name: rdma.ProviderVerbs, Open: func() (rdma.Device, error) {
	return verbs.Open(verbs.Config{HostID: "conformance", OpenRegions: true})
}}

func TestMain(m *testing.M) {
	rdmatest.RegisterChildRoles(provider)
	child.Main()
	os.Exit(m.Run())
}

// TestConformance runs the provider conformance suite, unchanged.
func TestConformance(t *testing.T) { rdmatest.Run(t, provider) }
