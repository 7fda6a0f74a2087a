//go:build verbs && cgo && linux

package verbs

import (
	"fmt"

	"github.com/tickbus/tickbus/rdma"
)

// Grant would bind a type 2 memory window over mr to q (ibv_alloc_mw with
// IBV_MW_TYPE_2, then an IBV_WR_BIND_MW work request once q is in RTS, on
// a region registered with IBV_ACCESS_MW_BIND), whose rkey works on q
// alone. That is not built yet: every QP of the device's protection domain
// reaches every remote-accessible region, and Grant says so.
func (q *queuePair) Grant(mr rdma.MemoryRegion, access rdma.Access) (rdma.RemoteRegion, error) {
	if err := rdma.CheckGrant(mr.Access(), access); err != nil {
		return rdma.RemoteRegion{}, err
	}
	return rdma.RemoteRegion{}, fmt.Errorf("%w: verbs QP %d: per-QP grants need memory windows, not built; its peer reaches every remote region of the device", rdma.ErrNotSupported, q.Num())
}
