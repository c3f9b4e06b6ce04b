package engine

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Fractions whose float sum is just above 1 can floor to one sample too
// many on a large dataset: the last parts give it back.
func TestSplitCountsNeverExceedLen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n     int
		sizes []float64
		want  []int
	}{
		{1 << 31, []float64{0.5 + 5e-10, 0.5}, []int{1<<30 + 1, 1<<30 - 1}},
		{1 << 33, []float64{0.5 + 5e-10, 0.5 + 4e-10, 0}, []int{1<<32 + 1, 1<<32 - 1, 0}},
		{11, []float64{0.5, 0.3, 0.2}, []int{6, 3, 2}},
	} {
		got, err := splitCounts(tc.n, tc.sizes)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%d split %v", tc.n, tc.sizes)
		sum := 0
		for _, c := range got {
			sum += c
		}
		assert.Equal(t, tc.n, sum)
	}
}
