package launch_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tensorbatch/tensorbatch/internal/launch"
)

// clearEnv sets every launcher variable to "", which counts as unset.
func clearEnv(t *testing.T) {
	for _, v := range launch.Vars() {
		t.Setenv(v, "")
	}
}

func TestVarsListsEveryLauncher(t *testing.T) {
	t.Parallel()
	assert.ElementsMatch(t, []string{
		"RANK", "WORLD_SIZE", "LOCAL_RANK",
		"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
		"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMI_LOCAL_RANK",
		"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
	}, launch.Vars())
}

// Inherited Slurm variables of a batch step or of srun's one task a node.
var (
	slurmStep = map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0"}
	slurmNode = map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0"}
)

func with(base map[string]string, kv ...string) map[string]string {
	env := map[string]string{}
	for k, v := range base {
		env[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

func TestLauncherRankAndLocalRank(t *testing.T) {
	for _, tc := range []struct {
		name        string
		env         map[string]string
		rank, world int
		source      string // Rank's; "" for none
		local       int
		localSource string // LocalRank's; "" for none
	}{
		{"single process", nil, 0, 1, "", 0, ""},
		{"torchrun",
			with(nil, "RANK", "5", "WORLD_SIZE", "8", "LOCAL_RANK", "1"),
			5, 8, "RANK/WORLD_SIZE", 1, "LOCAL_RANK"},
		{"srun",
			with(nil, "SLURM_PROCID", "5", "SLURM_NTASKS", "8", "SLURM_LOCALID", "1"),
			5, 8, "SLURM_PROCID/SLURM_NTASKS", 1, "SLURM_LOCALID"},
		{"Open MPI mpirun",
			with(nil, "OMPI_COMM_WORLD_RANK", "6", "OMPI_COMM_WORLD_SIZE", "8", "OMPI_COMM_WORLD_LOCAL_RANK", "2"),
			6, 8, "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE", 2, "OMPI_COMM_WORLD_LOCAL_RANK"},
		{"hydra mpiexec",
			with(nil, "PMI_RANK", "7", "PMI_SIZE", "8", "MPI_LOCALRANKID", "3"),
			7, 8, "PMI_RANK/PMI_SIZE", 3, "MPI_LOCALRANKID"},
		{"Cray PALS",
			with(nil, "PMI_RANK", "7", "PMI_SIZE", "8", "PMI_LOCAL_RANK", "3"),
			7, 8, "PMI_RANK/PMI_SIZE", 3, "PMI_LOCAL_RANK"},
		{"hydra: MPI_LOCALRANKID before PMI_LOCAL_RANK",
			with(nil, "PMI_RANK", "7", "PMI_SIZE", "8", "MPI_LOCALRANKID", "3", "PMI_LOCAL_RANK", "0"),
			7, 8, "PMI_RANK/PMI_SIZE", 3, "MPI_LOCALRANKID"},
		{"torchrun under srun",
			with(slurmNode, "RANK", "5", "WORLD_SIZE", "8", "LOCAL_RANK", "1"),
			5, 8, "RANK/WORLD_SIZE", 1, "LOCAL_RANK"},
		{"Open MPI mpirun under salloc",
			with(slurmStep, "OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_SIZE", "4", "OMPI_COMM_WORLD_LOCAL_RANK", "3"),
			3, 4, "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE", 3, "OMPI_COMM_WORLD_LOCAL_RANK"},
		{"hydra mpiexec under sbatch, bootstrapped by srun",
			with(slurmNode, "PMI_RANK", "5", "PMI_SIZE", "8", "MPI_LOCALRANKID", "1"),
			5, 8, "PMI_RANK/PMI_SIZE", 1, "MPI_LOCALRANKID"},
		{"RANK and WORLD_SIZE by hand under srun: local rank from Slurm",
			with(nil, "RANK", "5", "WORLD_SIZE", "8", "SLURM_PROCID", "5", "SLURM_NTASKS", "8", "SLURM_LOCALID", "1"),
			5, 8, "RANK/WORLD_SIZE", 1, "SLURM_LOCALID"},
		{"a stray LOCAL_RANK under srun: rank and local rank from Slurm",
			with(nil, "LOCAL_RANK", "3", "SLURM_PROCID", "5", "SLURM_NTASKS", "8", "SLURM_LOCALID", "1"),
			5, 8, "SLURM_PROCID/SLURM_NTASKS", 1, "SLURM_LOCALID"},
		{"only a local rank",
			with(nil, "SLURM_LOCALID", "2"),
			0, 1, "", 2, "SLURM_LOCALID"},
		{"half a pair is no launcher",
			with(slurmNode, "RANK", "5", "LOCAL_RANK", "1"),
			1, 2, "SLURM_PROCID/SLURM_NTASKS", 0, "SLURM_LOCALID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			rank, world, source, err := launch.Rank()
			if assert.NoError(t, err) {
				assert.Equal(t, tc.rank, rank, "rank")
				assert.Equal(t, tc.world, world, "world")
				assert.Equal(t, tc.source, source)
			}
			local, source, ok, err := launch.LocalRank()
			if assert.NoError(t, err) {
				assert.Equal(t, tc.local, local, "local rank")
				assert.Equal(t, tc.localSource, source)
				assert.Equal(t, tc.localSource != "", ok)
			}
		})
	}
}

func TestLauncherBadValuesNameTheVariable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		rankErr  string // "" for none
		localErr string
		local    int // when localErr is ""
	}{
		{"rank not a number",
			with(nil, "RANK", "x", "WORLD_SIZE", "8", "LOCAL_RANK", "1"),
			`RANK="x" is not a rank: want a number >= 0`, "", 1},
		{"negative rank",
			with(nil, "SLURM_PROCID", "-1", "SLURM_NTASKS", "8"),
			`SLURM_PROCID="-1" is not a rank: want a number >= 0`, "", 0},
		{"zero world size",
			with(nil, "OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "0"),
			`OMPI_COMM_WORLD_SIZE="0" is not a world size: want a number > 0`, "", 0},
		{"world size not a number",
			with(nil, "PMI_RANK", "0", "PMI_SIZE", "two"),
			`PMI_SIZE="two" is not a world size: want a number > 0`, "", 0},
		{"rank not below world size",
			with(nil, "RANK", "4", "WORLD_SIZE", "4"),
			`RANK="4" is not a rank below WORLD_SIZE="4"`, "", 0},
		{"local rank not a number",
			with(nil, "RANK", "1", "WORLD_SIZE", "4", "LOCAL_RANK", "one"),
			"", `LOCAL_RANK="one" is not a local rank: want a number >= 0`, 0},
		{"negative local rank",
			with(nil, "SLURM_LOCALID", "-2"),
			"", `SLURM_LOCALID="-2" is not a local rank: want a number >= 0`, 0},
		{"the launcher's bad local rank, though another's is good",
			with(slurmStep, "OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_LOCAL_RANK", "1.0"),
			"", `OMPI_COMM_WORLD_LOCAL_RANK="1.0" is not a local rank: want a number >= 0`, 0},
		{"another launcher's bad rank is not read, its local rank as the fallback is",
			with(nil, "RANK", "0", "WORLD_SIZE", "2", "SLURM_PROCID", "x", "SLURM_NTASKS", "y", "SLURM_LOCALID", "z"),
			"", `SLURM_LOCALID="z" is not a local rank`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, _, _, err := launch.Rank()
			if tc.rankErr == "" {
				assert.NoError(t, err)
			} else {
				assert.EqualError(t, err, tc.rankErr)
			}
			local, _, _, err := launch.LocalRank()
			if tc.localErr == "" {
				assert.NoError(t, err)
				assert.Equal(t, tc.local, local)
			} else {
				assert.ErrorContains(t, err, tc.localErr)
			}
		})
	}
}
