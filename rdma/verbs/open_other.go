//go:build !(verbs && cgo && linux)

package verbs

import (
	"fmt"

	"github.com/tickbus/tickbus/rdma"
)

// Open reports that this binary was built without the verbs provider.
func Open(Config) (rdma.Device, error) {
	return nil, fmt.Errorf("%w: the verbs provider needs cgo, Linux and `-tags verbs` (with libibverbs-dev installed)", rdma.ErrNotSupported)
}
