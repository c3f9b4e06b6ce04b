package launchtest

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/launch"
	"github.com/tensorbatch/tensorbatch/shards"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The job every rank runs: an epoch of a map-style dataset of mapLen
// samples, and one of a stream of shards of these counts.
const (
	world  = 4
	mapLen = 103
	batch  = 4
	seed   = 5
	epoch  = 1
	dirVar = "TB_LAUNCHTEST_DIR" // set for the ranks: where the shards are and the results go
)

var shardCounts = []int{13, 9, 11, 5, 8, 12, 10}

// result is what one rank saw.
type result struct {
	Rank, WorldSize, LocalRank int
	Source, LocalSource        string
	Map, Stream                []int // sample ids in delivery order
}

var idSchema = collate.Schema{{Name: "id", DType: collate.Int64}}

// runRank loads an epoch of both datasets as rank (with world 0: as the
// launcher's environment says) and returns the ids it saw.
func runRank(dir string, rank, worldSize int) (result, error) {
	ctx := context.Background()
	cfg := engine.Config{BatchSize: batch, Seed: seed, Workers: 2, Rank: rank, WorldSize: worldSize, Backend: "cpu"}
	mapDS := engine.DatasetFunc(mapLen, idSchema, func(_ context.Context, s *engine.Slot) error {
		collate.As[int64](s.Tensor("id"))[0] = int64(s.Index())
		return nil
	})
	mcfg := cfg
	mcfg.Shuffle = true
	var r result
	var err error
	r.Map, r.Rank, r.WorldSize, r.LocalRank, r.Source, r.LocalSource, err = ids(ctx, mapDS, mcfg)
	if err != nil {
		return r, fmt.Errorf("map-style: %w", err)
	}
	sd, err := stream(dir, 8)
	if err != nil {
		return r, err
	}
	if r.Stream, _, _, _, _, _, err = ids(ctx, sd, cfg); err != nil {
		return r, fmt.Errorf("stream: %w", err)
	}
	return r, nil
}

// stream returns the job's stream of shards, read through a shuffle
// buffer of buffer records.
func stream(dir string, buffer int) (*engine.IterableDataset, error) {
	src, err := shards.New(context.Background(), filepath.Join(dir, "shards", fmt.Sprintf("train-{0000..%04d}.tar", len(shardCounts)-1)), idSchema,
		func(_ context.Context, rec engine.Record, s *engine.Slot) error {
			id, err := shards.Int(rec, "cls")
			if err != nil {
				return err
			}
			if id != int64(s.Index()) {
				return fmt.Errorf("%s/%s: id %d in slot %d", rec.Shard, rec.Key, id, s.Index())
			}
			collate.As[int64](s.Tensor("id"))[0] = id
			return nil
		})
	if err != nil {
		return nil, err
	}
	return engine.FromIterable(context.Background(), src, engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: buffer})
}

// streamIDs returns the ids rank of world loads from the job's stream
// through no shuffle buffer.
func streamIDs(t *testing.T, dir string, rank, world int) []int {
	sd, err := stream(dir, 0)
	require.NoError(t, err)
	got, _, _, _, _, _, err := ids(context.Background(), sd, engine.Config{BatchSize: batch, Seed: seed, Rank: rank, WorldSize: world, Backend: "cpu"})
	require.NoError(t, err)
	return got
}

func ids(ctx context.Context, ds engine.Dataset, cfg engine.Config) (got []int, rank, world, local int, source, localSource string, err error) {
	l, err := engine.New(ds, cfg)
	if err != nil {
		return nil, 0, 0, 0, "", "", err
	}
	defer l.Close()
	for b, err := range l.Epoch(ctx, epoch) {
		if err != nil {
			return nil, 0, 0, 0, "", "", err
		}
		for _, id := range collate.As[int64](b.Tensor("id")) {
			got = append(got, int(id))
		}
	}
	sh := l.RankInfo()
	return got, sh.Rank, sh.WorldSize, sh.LocalRank, sh.From, sh.LocalFrom, nil
}

// TestRank is the body of one rank, run by the launchers; skipped
// otherwise. It writes what it saw to $TB_LAUNCHTEST_DIR/rank-<rank>.json.
func TestRank(t *testing.T) {
	dir := os.Getenv(dirVar)
	if dir == "" {
		t.Skip("run by the launcher tests as one rank of a job")
	}
	r, err := runRank(dir, 0, 0)
	require.NoError(t, err)
	data, err := json.Marshal(r)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("rank-%d.json", r.Rank)), data, 0o644))
}

// writeShards writes the job's shards: record j of shard i is named by
// its global id, in .cls.
func writeShards(t *testing.T, dir string) {
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "shards"), 0o755))
	id := 0
	for i, n := range shardCounts {
		f, err := os.Create(filepath.Join(dir, "shards", fmt.Sprintf("train-%04d.tar", i)))
		require.NoError(t, err)
		w := tar.NewWriter(f)
		for range n {
			for _, m := range [][2]string{{fmt.Sprintf("%06d.cls", id), fmt.Sprint(id)}, {fmt.Sprintf("%06d.txt", id), "sample"}} {
				require.NoError(t, w.WriteHeader(&tar.Header{Name: m[0], Mode: 0o644, Size: int64(len(m[1]))}))
				_, err := w.Write([]byte(m[1]))
				require.NoError(t, err)
			}
			id++
		}
		require.NoError(t, w.Close())
		require.NoError(t, f.Close())
	}
}

// required reports whether a missing launcher fails the test rather than
// skipping it: in CI ($CI) or when $TB_REQUIRE_LAUNCHERS is set.
func required() bool { return os.Getenv("CI") != "" || os.Getenv("TB_REQUIRE_LAUNCHERS") != "" }

func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if required() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// runJob runs the command that starts the ranks, with dir in their
// environment and every launcher variable of ours cleared, and checks
// what they wrote.
func runJob(t *testing.T, name string, args []string, extraEnv func(rank int) []string, wantSource, wantLocal string) {
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	writeShards(t, dir)
	env := []string{dirVar + "=" + dir, "TENSORBATCH_BACKEND=cpu"}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(launch.Vars(), k) && k != dirVar && !strings.HasPrefix(k, "SLURM_") && !strings.HasPrefix(k, "OMPI_") && !strings.HasPrefix(k, "PMIX_") {
			env = append(env, kv)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rankArgs := []string{self, "-test.run", "^TestRank$", "-test.count", "1"}
	t0 := time.Now()
	if extraEnv != nil { // a hand-made launcher: one process per rank
		errs := make(chan error, world)
		for r := range world {
			cmd := exec.CommandContext(ctx, rankArgs[0], rankArgs[1:]...)
			cmd.Env = append(slices.Clone(env), extraEnv(r)...)
			go func() {
				out, err := cmd.CombinedOutput()
				if err != nil {
					err = fmt.Errorf("rank %d: %w\n%s", r, err, out)
				}
				errs <- err
			}()
		}
		for range world {
			assert.NoError(t, <-errs)
		}
	} else {
		cmd := exec.CommandContext(ctx, name, append(args, rankArgs...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil && strings.Contains(string(out), "No module named 'torch'") {
			skipOrFail(t, "%s cannot import torch (scripts/install-deps.sh installs python3-torch)", name)
		}
		require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
	}
	t.Logf("%s started and ran %d ranks in %v", name, world, time.Since(t0).Round(time.Millisecond))
	check(t, dir, wantSource, wantLocal)
}

// check reads the ranks' results and checks them against the same job
// run in this process, and for the properties the docs promise.
func check(t *testing.T, dir, wantSource, wantLocal string) {
	var rs []result
	for r := range world {
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank-%d.json", r)))
		require.NoError(t, err, "rank %d wrote nothing", r)
		var res result
		require.NoError(t, json.Unmarshal(data, &res))
		rs = append(rs, res)
	}
	for r, res := range rs {
		assert.Equal(t, r, res.Rank)
		assert.Equal(t, world, res.WorldSize)
		assert.Equal(t, wantSource, res.Source)
		assert.Equal(t, wantLocal, res.LocalSource)
		assert.Equal(t, r, res.LocalRank, "one node: the local rank is the rank")
		want, err := runRank(dir, r, world)
		require.NoError(t, err)
		assert.Equal(t, want.Map, res.Map, "rank %d: map-style ids as in a run with Config.Rank", r)
		assert.Equal(t, want.Stream, res.Stream, "rank %d: stream ids as in a run with Config.Rank", r)
	}

	// Map-style: DistributedSampler's split of the shuffled order, padded
	// with its first ids to a multiple of the world size.
	order := engine.Shuffled{N: mapLen, Seed: seed}.Order(epoch)
	padded := append(slices.Clone(order), order[:(world-mapLen%world)%world]...)
	seen := map[int]int{}
	for r, res := range rs {
		var want []int
		for i := r; i < len(padded); i += world {
			want = append(want, padded[i])
		}
		assert.Equal(t, want, res.Map, "rank %d", r)
		assert.Len(t, res.Map, (mapLen+world-1)/world, "equal counts")
		for _, id := range res.Map {
			seen[id]++
		}
	}
	assert.Len(t, seen, mapLen, "complete")
	for id, n := range seen {
		if slices.Contains(padded[mapLen:], id) {
			assert.Equal(t, 2, n, "id %d pads the split", id)
		} else {
			assert.Equal(t, 1, n, "id %d on one rank only", id)
		}
	}

	// Streaming: the epoch's sequence of samples (shards in the epoch's
	// order, as one process reads them through no shuffle buffer), padded
	// from its start to a multiple of the world size; each rank reads one
	// contiguous span of it through its shuffle buffer. Equal counts,
	// disjoint but for the padding, complete.
	one := streamIDs(t, dir, 0, 1)
	var spans []int
	for r, res := range rs {
		span := streamIDs(t, dir, r, world)
		assert.ElementsMatch(t, span, res.Stream, "rank %d: its span, through its shuffle buffer", r)
		assert.Len(t, res.Stream, (len(one)+world-1)/world, "rank %d: equal counts", r)
		spans = append(spans, span...)
	}
	assert.Len(t, one, 68, "the sum of shardCounts")
	want := append(slices.Clone(one), one[:len(spans)-len(one)]...)
	assert.Equal(t, want, spans, "the ranks' spans, in rank order, are the padded sequence")
}

func TestTorchrun(t *testing.T) {
	if testing.Short() {
		t.Skip("a torchrun job: slow; go test without -short runs it")
	}
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		skipOrFail(t, "torchrun: %s is missing (scripts/install-deps.sh installs python3-torch)", python)
	}
	runJob(t, python, []string{"-m", "torch.distributed.run", "--standalone", "--nproc_per_node", fmt.Sprint(world),
		"--no_python", "--redirects", "1", "--tee", "1"}, nil, "RANK/WORLD_SIZE", "LOCAL_RANK")
}

func TestMPIRun(t *testing.T) {
	if testing.Short() {
		t.Skip("an mpirun job: slow; go test without -short runs it")
	}
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		skipOrFail(t, "mpirun is missing (scripts/install-deps.sh installs Debian's openmpi-bin)")
	}
	runJob(t, mpirun, []string{"--allow-run-as-root", "--oversubscribe", "-np", fmt.Sprint(world)}, nil,
		"OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK")
}

// TestSlurmEnv starts the ranks with the variables srun exports, set by
// hand.
func TestSlurmEnv(t *testing.T) {
	runJob(t, "srun (by hand)", nil, func(rank int) []string {
		return []string{
			fmt.Sprintf("SLURM_PROCID=%d", rank), fmt.Sprintf("SLURM_NTASKS=%d", world), fmt.Sprintf("SLURM_LOCALID=%d", rank),
			"SLURM_NODEID=0", "SLURM_NNODES=1", "SLURM_JOB_ID=4242", "SLURM_STEP_ID=0",
		}
	}, "SLURM_PROCID/SLURM_NTASKS", "SLURM_LOCALID")
}
