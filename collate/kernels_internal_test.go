package collate

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/internal/csrc"
)

// useKernels makes k the kernels that run and returns the restore
// function; it panics if this CPU cannot run k.
func useKernels(k Kernels) (restore func()) {
	restore, err := csrc.SetKernels(csrc.Kernels(k))
	if err != nil {
		panic(err)
	}
	return restore
}

// Tensors that MakeTensor and Layout never make, built with view: gather
// checks a tensor's memory against its shape rather than trusting either.
func TestGatherChecksTensorMemoryAgainstShape(t *testing.T) {
	ok := view("ok", Float32, []int{2, 3}, make([]byte, 24))
	for _, tc := range []struct {
		name     string
		dst, src Tensor
		contains string
	}{
		{"short src", ok, view("x", Float32, []int{4, 3}, make([]byte, 24)), "src Tensor(float32[4,3]) holds 24 bytes, its shape needs 48"},
		{"long dst", view("x", Float32, []int{2, 3}, make([]byte, 28)), ok, "dst Tensor(float32[2,3]) holds 28 bytes, its shape needs 24"},
		{"negative first dimension", view("x", Float32, []int{-1, 3}, nil), ok, "dst Tensor(float32[-1,3]) has a negative dimension"},
		{"negative row dimension", ok, view("x", Float32, []int{2, -3}, make([]byte, 24)), "src Tensor(float32[2,-3]) has a negative dimension"},
		{"row overflows", ok, view("x", Float32, []int{1, 1 << 31, 1 << 31}, nil), "src Tensor(float32[1,2147483648,2147483648]) is larger than the address space"},
		{"size overflows", view("x", Float32, []int{1 << 62, 3}, nil), ok, "is larger than the address space"},
		{"invalid dtype", view("x", 99, []int{1}, []byte{0}), view("y", 99, []int{1}, []byte{0}), "src Tensor(DType(99)[1]) has an invalid dtype"},
	} {
		for _, p := range AvailableKernels() {
			restore := useKernels(p)
			require.ErrorContains(t, gather(tc.dst, tc.src, []int64{0}, false), tc.contains, "%s on %s", tc.name, p)
			restore()
		}
	}
}

func TestMulIntReportsOverflowAndNegatives(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b, want int
		ok         bool
	}{
		{0, 0, 0, true}, {0, math.MaxInt, 0, true}, {math.MaxInt, 1, math.MaxInt, true},
		{1 << 31, 1 << 31, 1 << 62, true}, {1 << 32, 1 << 31, 0, false}, {math.MaxInt, 2, 0, false},
		{-1, 1, 0, false}, {1, -1, 0, false}, {math.MinInt, 0, 0, false},
	} {
		got, ok := mulInt(tc.a, tc.b, true)
		assert.Equal(t, tc.ok, ok, "%d*%d", tc.a, tc.b)
		if ok {
			assert.Equal(t, tc.want, got, "%d*%d", tc.a, tc.b)
		}
		_, ok = mulInt(tc.a, tc.b, false)
		assert.False(t, ok, "a failure earlier in the chain stays")
	}
}
