package tcpbench_test

import (
	"os"
	"testing"

	"github.com/tickbus/tickbus/internal/child"
	"github.com/tickbus/tickbus/rdma/tcp/internal/tcprig"
)

// The rig both tcp test packages share (rdma/tcp/internal/tcprig).
type side = tcprig.Side

var (
	openDevice = tcprig.OpenDevice
	newSide    = tcprig.NewSide
	connect    = tcprig.Connect
	remote     = tcprig.Remote
	word64     = tcprig.Word64
)

func TestMain(m *testing.M) {
	child.Main()
	os.Exit(m.Run())
}
