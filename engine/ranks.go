package engine

import (
	"fmt"
	"slices"

	"github.com/tensorbatch/tensorbatch/internal/launch"
)

// RankInfo is this process's part of a distributed job: its rank among
// WorldSize processes that share the Seed, and its local rank, its index
// among the job's processes on its node, which picks the GPU when
// Config.Backend names no device.
type RankInfo struct {
	Rank, WorldSize int
	From            string // where they came from: "Config", a launcher's variables ("SLURM_PROCID/SLURM_NTASKS"), or "single process"
	LocalRank       int
	LocalFrom       string // where it came from: a launcher's variable ("SLURM_LOCALID"), or "default" (0) when none exported one
}

// rankInfo returns the RankInfo of c: the rank and world size are
// Config.WorldSize when set, else the launcher's (see package launch for
// the variables and their precedence), else a single process; the local
// rank is always the launcher's, else 0.
func (c Config) rankInfo() (RankInfo, error) {
	var s RankInfo
	switch {
	case c.WorldSize > 0:
		if c.Rank < 0 || c.Rank >= c.WorldSize {
			return RankInfo{}, configError("Rank", "%d, want 0 <= Rank < WorldSize (%d)", c.Rank, c.WorldSize)
		}
		s = RankInfo{Rank: c.Rank, WorldSize: c.WorldSize, From: "Config"}
	case c.WorldSize < 0:
		return RankInfo{}, configError("WorldSize", "%d, want > 0 (or 0 to read the launcher's environment)", c.WorldSize)
	case c.Rank != 0:
		return RankInfo{}, configError("Rank", "%d set without WorldSize", c.Rank)
	default:
		rank, world, from, err := launch.Rank()
		if err != nil {
			return RankInfo{}, fmt.Errorf("engine: %w", err)
		}
		if from == "" {
			from = "single process"
		}
		s = RankInfo{Rank: rank, WorldSize: world, From: from}
	}
	local, from, ok, err := launch.LocalRank()
	if err != nil {
		return RankInfo{}, fmt.Errorf("engine: %w", err)
	}
	if !ok {
		from = "default"
	}
	s.LocalRank, s.LocalFrom = local, from
	return s, nil
}

// rankSplit is a Sampler's order split across ranks as PyTorch's
// DistributedSampler does: padded with its own first indices to a multiple
// of the world size (cut down to one when dropLast), then every
// WorldSize-th index from Rank. Every rank gets the same number of
// samples; without padding they are disjoint. skip drops the first skip
// positions of the global order (a resumed epoch: they were consumed), and
// the rest is split the same way.
type rankSplit struct {
	s        Sampler
	rank     RankInfo
	dropLast bool
	skip     int
	n        int // the dataset's Len: Order panics on an index outside it (checkIndices)
}

func (d rankSplit) Order(epoch int) []int {
	order := d.s.Order(epoch)
	checkIndices(order, d.n, "Sampler", -1)
	n, w := len(order), d.rank.WorldSize
	rest := order[min(d.skip, n):]
	if w == 1 || len(rest) == 0 {
		return rest
	}
	if d.dropLast {
		rest = rest[:len(rest)/w*w]
	} else if len(rest)%w != 0 {
		rest = slices.Clone(rest)
		for i := 0; len(rest)%w != 0; i++ {
			rest = append(rest, order[i%n])
		}
	}
	out := make([]int, 0, len(rest)/w)
	for i := d.rank.Rank; i < len(rest); i += w {
		out = append(out, rest[i])
	}
	return out
}

// lazy is Order computed per position, when the sampler's order is.
func (d rankSplit) lazy(epoch int) (lazyOrder, bool) {
	ls, ok := d.s.(lazySampler)
	if !ok {
		return nil, false
	}
	g, ok := ls.lazy(epoch)
	if !ok {
		return nil, false
	}
	n, w := g.len(), d.rank.WorldSize
	o := rankOrder{g: g, n: n, skip: min(d.skip, n), w: w, rank: d.rank.Rank}
	o.m = n - o.skip
	switch {
	case w == 1 || o.m == 0:
		o.w, o.rank, o.length = 1, 0, o.m
	case d.dropLast:
		o.length = o.m / w
	default:
		o.length = ceilDiv(o.m, w)
	}
	return o, true
}

// rankOrder is rankSplit's Order computed per position: position i of
// the rank is position rank+i×w of the global order's rest (past skip),
// padded with the global order's first positions.
type rankOrder struct {
	g                   lazyOrder
	n, skip, m, w, rank int // m: the rest's length, n-skip
	length              int
}

func (o rankOrder) len() int  { return o.length }
func (o rankOrder) span() int { return o.g.span() }

func (o rankOrder) at(i int) int {
	pos := o.rank + i*o.w
	if pos >= o.m { // padding
		return o.g.at((pos - o.m) % o.n)
	}
	return o.g.at(o.skip + pos)
}

// fill copies a run of the global order when the rank's positions are
// one (a single rank), else computes each position.
func (o rankOrder) fill(dst []int, from int) {
	j := 0
	if o.w == 1 {
		j = max(0, min(len(dst), o.m-from)) // the positions before the padding
		o.g.fill(dst[:j], o.skip+from)
	}
	for ; j < len(dst); j++ {
		dst[j] = o.at(from + j)
	}
}

// rankBatches gives rank r every WorldSize-th batch of a BatchSampler,
// after cutting the batches to a multiple of the world size; skip drops
// the first skip batches of the global list (a resumed epoch).
type rankBatches struct {
	bs   BatchSampler
	rank RankInfo
	skip int
	n    int // the dataset's Len: Batches panics on an index outside it (checkIndices)
}

func (d rankBatches) Batches(epoch int) [][]int {
	all := d.bs.Batches(epoch)
	for k, b := range all {
		checkIndices(b, d.n, "BatchSampler", k)
	}
	all = all[min(d.skip, len(all)):]
	w := d.rank.WorldSize
	if w == 1 {
		return all
	}
	all = all[:len(all)/w*w]
	out := make([][]int, 0, len(all)/w)
	for i := d.rank.Rank; i < len(all); i += w {
		out = append(out, all[i])
	}
	return out
}
