package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// perm must stay rand.Perm's permutation: the Shuffled and RandomSplit
// orders of earlier releases, which used rand.Perm, must not change.
func TestPermIsRandPerm(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 7, 1000, 1 << 17} {
		for seed := range uint64(3) {
			want := rand.New(rand.NewPCG(seed, 42)).Perm(n)
			require.Equal(t, want, perm(rand.New(rand.NewPCG(seed, 42)), make([]int, n)), "n %d, seed %d", n, seed)
		}
	}
	// Successive permutations from one generator, as NumSamples draws them.
	a, b := rand.New(rand.NewPCG(5, 6)), rand.New(rand.NewPCG(5, 6))
	p := make([]int, 100)
	for range 3 {
		require.Equal(t, a.Perm(100), perm(b, p))
	}
}
