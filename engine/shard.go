package engine

import (
	"fmt"
	"os"
	"strconv"
)

// Shard is this process's part of a distributed job: its rank among
// WorldSize processes that share the Seed.
type Shard struct {
	Rank, WorldSize int
	Source          string // where they came from: "Config", an environment variable pair, or "single process"
}

// launcherEnv lists the rank and world-size variables that launchers
// export, in the order they are looked at.
var launcherEnv = [][2]string{
	{"RANK", "WORLD_SIZE"},                           // torchrun, torch.distributed
	{"SLURM_PROCID", "SLURM_NTASKS"},                 // Slurm
	{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, // Open MPI's mpirun
	{"PMI_RANK", "PMI_SIZE"},                         // MPICH, Intel MPI
}

// shard returns the Shard of c: Config.WorldSize when set, else the first
// launcher variables present, else a single process.
func (c Config) shard() (Shard, error) {
	if c.WorldSize > 0 {
		if c.Rank < 0 || c.Rank >= c.WorldSize {
			return Shard{}, configError("Rank", "%d, want 0 <= Rank < WorldSize (%d)", c.Rank, c.WorldSize)
		}
		return Shard{c.Rank, c.WorldSize, "Config"}, nil
	}
	if c.WorldSize < 0 {
		return Shard{}, configError("WorldSize", "%d, want > 0 (or 0 to read the launcher's environment)", c.WorldSize)
	}
	if c.Rank != 0 {
		return Shard{}, configError("Rank", "%d set without WorldSize", c.Rank)
	}
	for _, pair := range launcherEnv {
		rs, ws := os.Getenv(pair[0]), os.Getenv(pair[1])
		if rs == "" || ws == "" {
			continue
		}
		rank, err1 := strconv.Atoi(rs)
		world, err2 := strconv.Atoi(ws)
		if err1 != nil || err2 != nil || world <= 0 || rank < 0 || rank >= world {
			return Shard{}, fmt.Errorf("engine: %s=%q and %s=%q are not a rank and a world size", pair[0], rs, pair[1], ws)
		}
		return Shard{rank, world, pair[0] + "/" + pair[1]}, nil
	}
	return Shard{0, 1, "single process"}, nil
}

// sharded is a Sampler's order split across ranks as PyTorch's
// DistributedSampler does: padded with its own first indices to a multiple
// of the world size (cut down to one when dropLast), then every
// WorldSize-th index from Rank. Every rank gets the same number of
// samples; without padding they are disjoint.
type sharded struct {
	s        Sampler
	shard    Shard
	dropLast bool
}

func (d sharded) Order(epoch int) []int {
	order := d.s.Order(epoch)
	w := d.shard.WorldSize
	if w == 1 || len(order) == 0 {
		return order
	}
	if d.dropLast {
		order = order[:len(order)/w*w]
	} else {
		for i := 0; len(order)%w != 0; i++ {
			order = append(order, order[i%len(order)])
		}
	}
	out := make([]int, 0, len(order)/w)
	for i := d.shard.Rank; i < len(order); i += w {
		out = append(out, order[i])
	}
	return out
}

// shardedBatches gives rank r every WorldSize-th batch of a BatchSampler,
// after cutting the batches to a multiple of the world size.
type shardedBatches struct {
	bs    BatchSampler
	shard Shard
}

func (d shardedBatches) Batches(epoch int) [][]int {
	all := d.bs.Batches(epoch)
	w := d.shard.WorldSize
	if w == 1 {
		return all
	}
	all = all[:len(all)/w*w]
	out := make([][]int, 0, len(all)/w)
	for i := d.shard.Rank; i < len(all); i += w {
		out = append(out, all[i])
	}
	return out
}
