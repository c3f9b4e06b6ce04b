// Package launch reads the rank, world size and local rank that a job
// launcher (torchrun, an MPI launcher, Slurm) exports to each process it
// starts. It is the one place that knows the launchers' variables; engine
// shards epochs by the rank and pinned picks the GPU by the local rank.
//
// A variable set to the empty string counts as unset. A value that is set
// but is not a valid number is an error naming the variable and its value.
//
// # Precedence
//
// Launchers nest, and a process inherits the variables of every launcher
// above it: torchrun started by srun inherits SLURM_LOCALID=0 for its whole
// node but sets LOCAL_RANK per process, and mpirun run in a Slurm
// allocation inherits the batch step's SLURM_* but sets OMPI_*. The
// innermost launcher is the one that started this process, so it wins:
//
//	launcher                  rank / world size                            local rank
//	torchrun                  RANK / WORLD_SIZE                            LOCAL_RANK
//	Open MPI mpirun           OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE  OMPI_COMM_WORLD_LOCAL_RANK
//	MPICH, Intel MPI mpiexec  PMI_RANK / PMI_SIZE                          MPI_LOCALRANKID, else PMI_LOCAL_RANK
//	Slurm srun                SLURM_PROCID / SLURM_NTASKS                  SLURM_LOCALID
//
// The rank comes from the first launcher in this order that exported both
// its rank and its world size. The local rank comes from that same
// launcher when it exported one, else from the first launcher in this
// order that did, so that rank and local rank describe the same process
// layout whenever they can.
package launch

import (
	"fmt"
	"os"
	"strconv"
)

// A launcher is one launcher's variables.
type launcher struct {
	rank, size string   // rank and world size
	local      []string // local rank, first present wins
}

// launchers are in precedence order: innermost first.
var launchers = []launcher{
	{"RANK", "WORLD_SIZE", []string{"LOCAL_RANK"}},                                           // torchrun, torch.distributed
	{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", []string{"OMPI_COMM_WORLD_LOCAL_RANK"}}, // Open MPI's mpirun
	{"PMI_RANK", "PMI_SIZE", []string{"MPI_LOCALRANKID", "PMI_LOCAL_RANK"}},                  // hydra (MPICH, Intel MPI); Cray PALS
	{"SLURM_PROCID", "SLURM_NTASKS", []string{"SLURM_LOCALID"}},                              // Slurm's srun
}

// Vars returns the name of every variable the package reads, so that a
// test can clear them all.
func Vars() []string {
	var vs []string
	for _, l := range launchers {
		vs = append(vs, l.rank, l.size)
		vs = append(vs, l.local...)
	}
	return vs
}

// current returns the launcher that started this process: the first, in
// precedence order, that exported both its rank and world size variables.
// Their values are not looked at.
func current() (launcher, bool) {
	for _, l := range launchers {
		if os.Getenv(l.rank) != "" && os.Getenv(l.size) != "" {
			return l, true
		}
	}
	return launcher{}, false
}

// Rank returns this process's rank among world processes and source,
// the variables they came from ("SLURM_PROCID/SLURM_NTASKS"). When no
// launcher exported both, it returns 0, 1 and an empty source. A rank that
// is not a number >= 0, a world size that is not a number > 0, and a rank
// not below the world size are errors.
func Rank() (rank, world int, source string, err error) {
	l, ok := current()
	if !ok {
		return 0, 1, "", nil
	}
	rs, ws := os.Getenv(l.rank), os.Getenv(l.size)
	world, err = strconv.Atoi(ws)
	if err != nil || world <= 0 {
		return 0, 0, "", fmt.Errorf("%s=%q is not a world size: want a number > 0", l.size, ws)
	}
	rank, err = strconv.Atoi(rs)
	if err != nil || rank < 0 {
		return 0, 0, "", fmt.Errorf("%s=%q is not a rank: want a number >= 0", l.rank, rs)
	}
	if rank >= world {
		return 0, 0, "", fmt.Errorf("%s=%q is not a rank below %s=%q", l.rank, rs, l.size, ws)
	}
	return rank, world, l.rank + "/" + l.size, nil
}

// LocalRank returns this process's index among the processes of its job on
// its node, and source, the variable it came from ("SLURM_LOCALID"). ok is
// false, with 0, when no launcher exported one. A value that is not a
// number >= 0 is an error.
func LocalRank() (local int, source string, ok bool, err error) {
	name, ok := localVar()
	if !ok {
		return 0, "", false, nil
	}
	v := os.Getenv(name)
	local, err = strconv.Atoi(v)
	if err != nil || local < 0 {
		return 0, "", false, fmt.Errorf("%s=%q is not a local rank: want a number >= 0", name, v)
	}
	return local, name, true, nil
}

// localVar names the local rank variable to read: the current launcher's,
// else the first present in precedence order.
func localVar() (string, bool) {
	if l, ok := current(); ok {
		for _, v := range l.local {
			if os.Getenv(v) != "" {
				return v, true
			}
		}
	}
	for _, l := range launchers {
		for _, v := range l.local {
			if os.Getenv(v) != "" {
				return v, true
			}
		}
	}
	return "", false
}
