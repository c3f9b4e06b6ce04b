//go:build !cgo

package csrc_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/tensorbatch/tensorbatch/internal/csrc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWithoutCgoNothingLoadsAndTheKernelsAreAbsent(t *testing.T) {
	t.Parallel()
	assert.False(t, csrc.Cgo)
	_, err := csrc.Open(csrc.CUDA, "libcudart.so.12")
	assert.ErrorIs(t, err, csrc.ErrNoCgo)
	assert.EqualError(t, err, "csrc: open cuda runtime: libcudart.so.12: built without cgo")
	assert.PanicsWithValue(t, "csrc: PhiloxFill: built without cgo: the C kernels are not in this binary",
		func() { csrc.PhiloxFill(csrc.KernelsScalar, make([]float32, 4), 1, 2, 0, true) })
}
