//go:build !cgo

package pinned_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/pinned"
)

func TestWithoutCgoAutoIsCPU(t *testing.T) {
	t.Setenv(pinned.EnvBackend, "")
	pinned.ResetSelections()
	t.Cleanup(pinned.ResetSelections)
	s, err := pinned.Select("auto")
	require.NoError(t, err)
	assert.Equal(t, "cpu (built without cgo)", s.String())
	for _, spec := range []string{"cuda", "hip:1"} {
		_, err = pinned.Select(spec)
		assert.ErrorIs(t, err, pinned.ErrNoCgo, spec)
	}
}
