package pinned

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Windows locks no more pages than the process's minimum working set
// holds (a few hundred KiB by default): HostAlloc grows it first.
func TestVirtualLockOfMoreThanTheDefaultWorkingSet(t *testing.T) {
	b, err := mapPages(64 << 20)
	require.NoError(t, err)
	require.NoError(t, lockPages(b))
	b[len(b)-1] = 1
	require.NoError(t, unmapPages(b))
}
