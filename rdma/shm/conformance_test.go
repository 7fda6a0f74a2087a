package shm_test

import (
	"os"
	"testing"

	"github.com/tickbus/tickbus/internal/child"
	"github.com/tickbus/tickbus/rdma"
	"github.com/tickbus/tickbus/rdma/rdmatest"
	"github.com/tickbus/tickbus/rdma/shm"
	"github.com/tickbus/tickbus/rdma/shm/shmtest"
)

var prov = rdmatest.Provider{
	Name: rdma.ProviderShm,
	Open: func() (rdma.Device, error) { return shm.Open(shm.Config{}) },
	// A peer that keeps and maps every memfd it is sent.
	Hostile: shmtest.Hostile,
}

func TestMain(m *testing.M) {
	rdmatest.RegisterChildRoles(prov)
	child.Main()
	os.Exit(m.Run())
}

func TestConformance(t *testing.T) { rdmatest.Run(t, prov) }
