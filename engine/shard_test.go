package engine_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tensorbatch/tensorbatch/engine"
)

// clearLauncherEnv makes the test independent of the environment it runs in.
func clearLauncherEnv(t *testing.T) {
	for _, v := range []string{"RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE"} {
		t.Setenv(v, "")
	}
}

func flat(batches [][]int) []int { return slices.Concat(batches...) }

func TestShardsAreDisjointEvenAndCoverTheEpoch(t *testing.T) {
	clearLauncherEnv(t)
	const n, world = 10, 3
	for _, dropLast := range []bool{false, true} {
		t.Run(fmt.Sprintf("droplast=%v", dropLast), func(t *testing.T) {
			order := engine.Shuffled{N: n, Seed: 5}.Order(1)
			var all []int
			per := -1
			for rank := range world {
				l := newLoader(t, engine.DatasetFunc(n, indexSchema, fillIndex), engine.Config{
					BatchSize: 2, Shuffle: true, Seed: 5, Rank: rank, WorldSize: world, DropLast: dropLast, Workers: 1})
				assert.Equal(t, engine.Shard{Rank: rank, WorldSize: world, Source: "Config"}, l.Shard())
				got, mem := collect(t, l, 1)
				assert.Equal(t, got, mem)
				mine := flat(got)
				if per < 0 {
					per = len(mine)
				}
				assert.Equal(t, per, len(mine), "every rank gets as many samples")
				// Rank r takes every world-th index of the common order.
				for j, idx := range mine {
					assert.Equal(t, order[(rank+j*world)%n], idx)
				}
				all = append(all, mine...)
			}
			seen := map[int]int{}
			for _, i := range all {
				seen[i]++
			}
			if dropLast {
				assert.Equal(t, 2, per, "10 samples cut to 9: 3 a rank, then one full batch of 2")
				assert.Len(t, seen, 6, "disjoint")
			} else {
				assert.Equal(t, 4, per, "10 samples padded to 12")
				assert.Len(t, seen, n, "the epoch is covered")
				assert.Equal(t, 2, seen[order[0]], "the padding repeats the first indices")
				assert.Equal(t, 2, seen[order[1]])
			}
		})
	}
}

func TestShardFromTheLaunchersEnvironment(t *testing.T) {
	ds := engine.DatasetFunc(8, indexSchema, fillIndex)
	for _, tc := range []struct {
		rank, world, source string
	}{
		{"RANK", "WORLD_SIZE", "RANK/WORLD_SIZE"},
		{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_PROCID/SLURM_NTASKS"},
		{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE"},
		{"PMI_RANK", "PMI_SIZE", "PMI_RANK/PMI_SIZE"},
	} {
		t.Run(tc.source, func(t *testing.T) {
			clearLauncherEnv(t)
			t.Setenv(tc.rank, "1")
			t.Setenv(tc.world, "4")
			l := newLoader(t, ds, engine.Config{BatchSize: 2})
			assert.Equal(t, engine.Shard{Rank: 1, WorldSize: 4, Source: tc.source}, l.Shard())
			got, _ := collect(t, l, 0)
			assert.Equal(t, [][]int{{1, 5}}, got, "every 4th sample from 1")

			over := newLoader(t, ds, engine.Config{BatchSize: 2, Rank: 0, WorldSize: 1})
			assert.Equal(t, engine.Shard{Rank: 0, WorldSize: 1, Source: "Config"}, over.Shard(), "Config wins over the environment")

			t.Setenv(tc.rank, "4")
			_, err := engine.New(ds, engine.Config{})
			assert.EqualError(t, err, fmt.Sprintf(`engine: %s="4" and %s="4" are not a rank and a world size`, tc.rank, tc.world))
		})
	}
	clearLauncherEnv(t)
	l := newLoader(t, ds, engine.Config{})
	assert.Equal(t, engine.Shard{Rank: 0, WorldSize: 1, Source: "single process"}, l.Shard())
}

func TestShardConfigErrorsNameTheField(t *testing.T) {
	clearLauncherEnv(t)
	ds := engine.DatasetFunc(8, indexSchema, fillIndex)
	for cfg, msg := range map[engine.Config]string{
		{Rank: 2, WorldSize: 2}:  "engine: Config.Rank: 2, want 0 <= Rank < WorldSize (2)",
		{Rank: -1, WorldSize: 2}: "engine: Config.Rank: -1",
		{WorldSize: -1}:          "engine: Config.WorldSize: -1",
		{Rank: 1}:                "engine: Config.Rank: 1 set without WorldSize",
	} {
		_, err := engine.New(ds, cfg)
		assert.ErrorContains(t, err, msg)
	}
}

func TestBatchSamplerShardsWholeBatches(t *testing.T) {
	clearLauncherEnv(t)
	for rank, want := range [][][]int{{{9, 8}}, {{0, 1, 2, 3, 4, 5, 6}}} {
		l := newLoader(t, engine.DatasetFunc(10, indexSchema, fillIndex), engine.Config{BatchSampler: bucketed{}, Rank: rank, WorldSize: 2})
		got, _ := collect(t, l, 0)
		assert.Equal(t, want, got, "3 batches cut to 2, one a rank")
	}
}
