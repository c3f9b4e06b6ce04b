package engine_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/launch"
)

// clearLauncherEnv makes the test independent of the environment it runs
// in: an empty launcher variable counts as unset.
func clearLauncherEnv(t *testing.T) {
	for _, v := range launch.Vars() {
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
					BatchSize: 2, Shuffle: true, Seed: 5, Rank: rank, WorldSize: world, DropLast: dropLast, DropUneven: dropLast, Workers: 1})
				assert.Equal(t, engine.RankInfo{Rank: rank, WorldSize: world, From: "Config", LocalFrom: "default"}, l.RankInfo())
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
		rank, world, local, source string
	}{
		{"RANK", "WORLD_SIZE", "LOCAL_RANK", "RANK/WORLD_SIZE"},
		{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_PROCID/SLURM_NTASKS"},
		{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE"},
		{"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMI_RANK/PMI_SIZE"},
		{"PMI_RANK", "PMI_SIZE", "PMI_LOCAL_RANK", "PMI_RANK/PMI_SIZE"},
	} {
		t.Run(tc.local, func(t *testing.T) {
			clearLauncherEnv(t)
			t.Setenv(tc.rank, "1")
			t.Setenv(tc.world, "4")
			t.Setenv(tc.local, "2")
			l := newLoader(t, ds, engine.Config{BatchSize: 2, Backend: "cpu"})
			assert.Equal(t, engine.RankInfo{Rank: 1, WorldSize: 4, From: tc.source, LocalRank: 2, LocalFrom: tc.local}, l.RankInfo())
			got, _ := collect(t, l, 0)
			assert.Equal(t, [][]int{{1, 5}}, got, "every 4th sample from 1")

			over := newLoader(t, ds, engine.Config{BatchSize: 2, Rank: 0, WorldSize: 1, Backend: "cpu"})
			assert.Equal(t, engine.RankInfo{Rank: 0, WorldSize: 1, From: "Config", LocalRank: 2, LocalFrom: tc.local}, over.RankInfo(),
				"Config wins over the environment's rank, not its local rank")

			t.Setenv(tc.rank, "4")
			_, err := engine.New(ds, engine.Config{})
			assert.EqualError(t, err, fmt.Sprintf(`engine: %s="4" is not a rank below %s="4"`, tc.rank, tc.world))
		})
	}
	clearLauncherEnv(t)
	l := newLoader(t, ds, engine.Config{})
	assert.Equal(t, engine.RankInfo{Rank: 0, WorldSize: 1, From: "single process", LocalFrom: "default"}, l.RankInfo())
}

func TestShardFromNestedLaunchersIsTheInnermosts(t *testing.T) {
	ds := engine.DatasetFunc(8, indexSchema, fillIndex)
	for _, tc := range []struct {
		name string
		env  []string
		want engine.RankInfo
	}{
		{"torchrun under srun",
			[]string{"SLURM_PROCID", "1", "SLURM_NTASKS", "2", "SLURM_LOCALID", "0", "RANK", "5", "WORLD_SIZE", "8", "LOCAL_RANK", "1"},
			engine.RankInfo{Rank: 5, WorldSize: 8, From: "RANK/WORLD_SIZE", LocalRank: 1, LocalFrom: "LOCAL_RANK"}},
		{"Open MPI mpirun under salloc",
			[]string{"SLURM_PROCID", "0", "SLURM_NTASKS", "1", "SLURM_LOCALID", "0",
				"OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_SIZE", "4", "OMPI_COMM_WORLD_LOCAL_RANK", "3"},
			engine.RankInfo{Rank: 3, WorldSize: 4, From: "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE", LocalRank: 3, LocalFrom: "OMPI_COMM_WORLD_LOCAL_RANK"}},
		{"hydra mpiexec under sbatch",
			[]string{"SLURM_PROCID", "1", "SLURM_NTASKS", "2", "SLURM_LOCALID", "0",
				"PMI_RANK", "5", "PMI_SIZE", "8", "MPI_LOCALRANKID", "1", "PMI_LOCAL_RANK", "2"},
			engine.RankInfo{Rank: 5, WorldSize: 8, From: "PMI_RANK/PMI_SIZE", LocalRank: 1, LocalFrom: "MPI_LOCALRANKID"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearLauncherEnv(t)
			for i := 0; i < len(tc.env); i += 2 {
				t.Setenv(tc.env[i], tc.env[i+1])
			}
			l := newLoader(t, ds, engine.Config{BatchSize: 2, Backend: "cpu"})
			assert.Equal(t, tc.want, l.RankInfo())
		})
	}
}

func TestShardLocalRankErrorNamesTheVariable(t *testing.T) {
	clearLauncherEnv(t)
	t.Setenv("SLURM_LOCALID", "x")
	ds := engine.DatasetFunc(8, indexSchema, fillIndex)
	_, err := engine.New(ds, engine.Config{Backend: "cpu", Rank: 0, WorldSize: 2})
	assert.EqualError(t, err, `engine: SLURM_LOCALID="x" is not a local rank: want a number >= 0`)
}

func TestShardConfigErrorsNameTheField(t *testing.T) {
	clearLauncherEnv(t)
	ds := engine.DatasetFunc(8, indexSchema, fillIndex)
	for _, tc := range []struct {
		cfg engine.Config
		msg string
	}{ // a slice, not a map keyed by Config: Config is not comparable in general (see TestConfigIsNotComparable)
		{engine.Config{Rank: 2, WorldSize: 2}, "engine: Config.Rank: 2, want 0 <= Rank < WorldSize (2)"},
		{engine.Config{Rank: -1, WorldSize: 2}, "engine: Config.Rank: -1"},
		{engine.Config{WorldSize: -1}, "engine: Config.WorldSize: -1"},
		{engine.Config{Rank: 1}, "engine: Config.Rank: 1 set without WorldSize"},
	} {
		_, err := engine.New(ds, tc.cfg)
		assert.ErrorContains(t, err, tc.msg)
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
