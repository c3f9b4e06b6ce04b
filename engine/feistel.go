package engine

import "math/bits"

// NOTE [feistel]
//
// A shuffled epoch's order is a keyed permutation of 0..N-1 computed per
// position, never materialized: position i of the epoch is encrypt(i)
// under a key of (Seed, epoch, draw), so the first batch costs the same at
// N = 10 and N = 2⁶², and the order takes no memory. encrypt is a Feistel
// network over the smallest power-of-two domain 2^b ≥ N, with
// cycle-walking (encrypt again while the value is ≥ N): a permutation of
// the domain restricted to its first N values by walking each cycle to
// the next value below N is a permutation of 0..N-1, and with 2^b < 2N a
// position takes fewer than two encryptions on average.
//
// The b bits are split into a high half of ⌈b/2⌉ bits and a low half of
// ⌊b/2⌋ (unbalanced when b is odd). Each of feistelRounds rounds XORs one
// half with a round function of the other, alternating, which is
// invertible whatever the function is; the round function is SplitMix64's
// finalizer of the other half XOR the round's key, so every output bit
// depends on every input and key bit. The round keys hash (Seed, epoch,
// draw, round), where draw counts the permutations of an epoch longer than
// N (Shuffled.NumSamples). Grain's index shuffle works the same way.

// feistelRounds is the number of rounds: 3 on each half.
const feistelRounds = 6

// feistel is a keyed permutation of 0..n-1; the zero value is unusable.
type feistel struct {
	n      uint64
	loBits uint   // bits of the low half; the high half has the rest of b
	loMask uint64 // 1<<loBits - 1
	hiMask uint64 // 1<<(b-loBits) - 1
	keys   [feistelRounds]uint64
}

// newFeistel returns the permutation of 0..n-1 keyed by key, n >= 0.
func newFeistel(n int, key uint64) feistel {
	f := feistel{n: uint64(n)}
	if n < 2 {
		return f
	}
	b := uint(bits.Len64(uint64(n - 1))) // 2^b >= n > 2^(b-1)
	f.loBits = b / 2
	f.loMask = 1<<f.loBits - 1
	f.hiMask = 1<<(b-f.loBits) - 1
	for r := range f.keys {
		f.keys[r] = mix(key + uint64(r+1)*0x9e3779b97f4a7c15)
	}
	return f
}

// shuffleKey is the key of permutation draw of epoch under seed.
func shuffleKey(seed uint64, epoch, draw int) uint64 {
	return mix(mix(seed^0x5348554646) ^ mix(uint64(epoch)) ^ mix(^uint64(draw)))
}

// at returns the permutation's value at i, 0 <= i < n.
func (f *feistel) at(i int) int {
	x := uint64(i)
	if f.n < 2 {
		return i
	}
	for {
		x = f.encrypt(x)
		if x < f.n {
			return int(x)
		}
	}
}

// fill sets dst[j] to at(from+j). Every position is encrypted once
// first, four at a time (encrypt4) and with no branch on the values, so
// that the CPU overlaps encryptions that are each a chain of dependent
// multiplies and shifts; the values past n (fewer than half) then walk on
// one by one. BenchmarkShuffledBatch compares a batch's 32 positions
// this way with at over them.
func (f *feistel) fill(dst []int, from int) {
	if f.n < 2 {
		for j := range dst {
			dst[j] = from + j
		}
		return
	}
	j := 0
	for ; j+4 <= len(dst); j += 4 {
		x := [4]uint64{uint64(from + j), uint64(from + j + 1), uint64(from + j + 2), uint64(from + j + 3)}
		f.encrypt4(&x)
		dst[j], dst[j+1], dst[j+2], dst[j+3] = int(x[0]), int(x[1]), int(x[2]), int(x[3])
	}
	for ; j < len(dst); j++ {
		dst[j] = int(f.encrypt(uint64(from + j)))
	}
	for j, x := range dst {
		for uint64(x) >= f.n {
			x = int(f.encrypt(uint64(x)))
		}
		dst[j] = x
	}
}

// encrypt4 is encrypt of four values at once, their rounds interleaved
// by hand: as loops over arrays of four the compiler kept them in memory
// and the four took twice as long.
func (f *feistel) encrypt4(x *[4]uint64) {
	h0, l0 := x[0]>>f.loBits, x[0]&f.loMask
	h1, l1 := x[1]>>f.loBits, x[1]&f.loMask
	h2, l2 := x[2]>>f.loBits, x[2]&f.loMask
	h3, l3 := x[3]>>f.loBits, x[3]&f.loMask
	hm, lm := f.hiMask, f.loMask
	for r := 0; r < feistelRounds; r += 2 {
		k0, k1 := f.keys[r], f.keys[r+1]
		h0 ^= mix(l0^k0) & hm
		h1 ^= mix(l1^k0) & hm
		h2 ^= mix(l2^k0) & hm
		h3 ^= mix(l3^k0) & hm
		l0 ^= mix(h0^k1) & lm
		l1 ^= mix(h1^k1) & lm
		l2 ^= mix(h2^k1) & lm
		l3 ^= mix(h3^k1) & lm
	}
	b := f.loBits
	x[0], x[1], x[2], x[3] = h0<<b|l0, h1<<b|l1, h2<<b|l2, h3<<b|l3
}

// encrypt permutes the domain 0..2^b-1.
func (f *feistel) encrypt(x uint64) uint64 {
	hi, lo := x>>f.loBits, x&f.loMask
	for r := 0; r < feistelRounds; r += 2 {
		hi ^= mix(lo^f.keys[r]) & f.hiMask
		lo ^= mix(hi^f.keys[r+1]) & f.loMask
	}
	return hi<<f.loBits | lo
}
