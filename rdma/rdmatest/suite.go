package rdmatest

import (
	"errors"
	"testing"

	"github.com/tickbus/tickbus/rdma"
)

// Provider is what a provider's test hands the suite.
type Provider struct {
	// Name is the provider name its devices report (rdma.ProviderShm, …).
	// It also names the child roles, so it must be unique per test binary.
	Name string
	// Open returns a fresh device. It is called in the test process and in
	// the peer processes the suite spawns, so it must not depend on a
	// *testing.T. The suite closes every device it opens.
	Open func() (rdma.Device, error)
	// Hostile, if set, plays a hostile peer of the confined queue pair b
	// (granted, not yet connected): it connects to b as b's peer would,
	// speaking the provider's control protocol but running none of its
	// checks, and returns every file of b's device's memory it was handed,
	// each mapped whole (writable if the file allows it), as a peer that
	// ignores its grants could map it. Leave it nil for a provider that
	// hands a peer no memory (tcp: a responder applies every op; verbs:
	// the NIC does). The suite releases what it returns.
	Hostile func(b rdma.QueuePair) ([]Held, error)
}

// Held is one file of a device's memory a hostile peer holds (see
// Provider.Hostile), mapped whole.
type Held struct {
	Mem      []byte
	Writable bool // the file could be mapped writable (shared)
	Close    func()
}

// Run runs every conformance test against p, each as a subtest. If Open
// fails with an error wrapping rdma.ErrNoDevice, Run skips, saying so. Tests that
// spawn processes need RegisterChildRoles(p) and child.Main() in TestMain;
// under -short the heavier variants run smaller.
func Run(t *testing.T, p Provider) {
	if p.Name == "" || p.Open == nil {
		t.Fatal("rdmatest: Provider needs Name and Open")
	}
	if d, err := p.Open(); errors.Is(err, rdma.ErrNoDevice) {
		t.Skipf("rdmatest: no %s device here, nothing to test: %v", p.Name, err)
	} else if err == nil {
		_ = d.Close()
	}
	groups := []struct {
		name  string
		tests []test
	}{
		{"Device", deviceTests},
		{"QP", qpTests},
		{"Ops", opTests},
		{"Errors", errorTests},
		{"Order", orderTests},
		{"Atomics", atomicTests},
		{"Signal", signalTests},
		{"Regions", regionTests},
		{"Grants", grantTests},
		{"Close", closeTests},
		{"Process", processTests},
		{"Allocs", allocTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, p) })
			}
		})
	}
}

type test struct {
	name string
	run  func(t *testing.T, p Provider)
}
