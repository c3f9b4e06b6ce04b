package shards

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
)

// writeList writes a shard list giving each of paths the count in
// declared, and returns its path.
func writeList(t *testing.T, paths []string, declared []int) string {
	l := Index{Kind: "wids-shard-index-v1", Version: 1}
	for i, p := range paths {
		l.Shards = append(l.Shards, IndexEntry{URL: filepath.Base(p), Samples: declared[i]})
	}
	data, err := json.Marshal(l)
	require.NoError(t, err)
	index := filepath.Join(filepath.Dir(paths[0]), "shardlist.json")
	require.NoError(t, os.WriteFile(index, data, 0o644))
	return index
}

// TestShardListCountsMustMatchTheData: a shard whose records disagree
// with its listed count fails the epoch naming it, wherever it falls
// (first, middle, last), whether it holds more records than listed or
// fewer, for every worker count, with and without DropLast.
func TestShardListCountsMustMatchTheData(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		at    int // the shard whose count is wrong
		count int // its listed count; it holds 3
	}{
		{"first more", 0, 1}, {"middle more", 1, 1}, {"last more", 2, 1},
		{"first fewer", 0, 5}, {"middle fewer", 1, 5}, {"last fewer", 2, 5},
		{"last one more", 2, 2}, {"last one fewer", 2, 4}, {"last zero", 2, 0}, {"first zero", 0, 0},
	} {
		for _, cfg := range []engine.Config{
			{BatchSize: 2},
			{BatchSize: 2, Workers: 2},
			{BatchSize: 4, DropLast: true},
			{BatchSize: 1, Workers: 1, PrefetchFactor: 8},
		} {
			t.Run(fmt.Sprintf("%s/b%d w%d drop %v", tc.name, cfg.BatchSize, cfg.Workers, cfg.DropLast), func(t *testing.T) {
				dir := t.TempDir()
				paths, pattern := writeShards(t, dir, 3, 3, 3)
				declared := []int{3, 3, 3}
				declared[tc.at] = tc.count
				src, err := New(context.Background(), pattern, testSchema, decodeTest, IndexFile(writeList(t, paths, declared)))
				require.NoError(t, err)
				d, err := engine.FromIterable(context.Background(), src, engine.IterableConfig{})
				if err == nil { // a shard listed empty fails here, before the epoch
					_, _, _, err = load(t, d, cfg, 0)
				}
				require.Error(t, err, "a shard of 3 records listed as %d", tc.count)
				assert.Contains(t, err.Error(), paths[tc.at])
				if tc.count < 3 {
					assert.Contains(t, err.Error(), fmt.Sprintf("than the %d it is listed with", tc.count))
				} else {
					assert.Contains(t, err.Error(), fmt.Sprintf("ended after 3 records, listed with %d", tc.count))
				}
			})
		}
	}
}

// TestShardListCountsAreCheckedBeforeUse: a listed count sizes nothing
// until checked against the shard's bytes: 2^32 samples, a negative
// count, counts whose sum overflows and a shard listed twice are errors
// naming the list and the shard, which allocate next to nothing, for
// local and remote shards.
func TestShardListCountsAreCheckedBeforeUse(t *testing.T) {
	f := newFaultServer(t)
	paths, _ := writeShards(t, f.dir, 3, 3)
	o := fastOpener()
	defer o.CloseIdleConnections()
	for _, tc := range []struct {
		name string
		list string
		want string
	}{
		{"2^32", `{"shardlist":[{"url":"train-0000.tar","nsamples":3},{"url":"train-0001.tar","nsamples":4294967296}]}`,
			"train-0001.tar: listed with 4294967296 samples in "},
		{"2^62 first", `{"shardlist":[{"url":"train-0000.tar","nsamples":4611686018427387904},{"url":"train-0001.tar","nsamples":3}]}`,
			"train-0000.tar: listed with 4611686018427387904 samples in "},
		{"sum overflows", `{"shardlist":[{"url":"train-0000.tar","nsamples":9223372036854775807},{"url":"train-0001.tar","nsamples":9223372036854775807}]}`,
			`"train-0001.tar" has 9223372036854775807 samples, want 0 to`},
		{"negative", `{"shardlist":[{"url":"train-0000.tar","nsamples":3},{"url":"train-0001.tar","nsamples":-1}]}`,
			`"train-0001.tar" has -1 samples`},
		{"twice", `{"shardlist":[{"url":"train-0000.tar","nsamples":3},{"url":"train-0000.tar","nsamples":4294967296}]}`,
			`"train-0000.tar" is listed twice, with 3 and 4294967296 samples`},
		{"too big for int", `{"shardlist":[{"url":"train-0000.tar","nsamples":1e30}]}`,
			"cannot unmarshal number 1e30"},
	} {
		index := filepath.Join(f.dir, "shardlist.json")
		require.NoError(t, os.WriteFile(index, []byte(tc.list), 0o644))
		for _, where := range []string{"local", "remote"} {
			var src *Source
			var err error
			if where == "local" {
				src, err = FromNames(paths, testSchema, decodeTest, IndexFile(index))
			} else {
				src, err = New(context.Background(), f.URL+"/train-{0000..0001}.tar", testSchema, decodeTest, UseOpener(o))
			}
			require.NoError(t, err)
			n := allocated(func() { _, err = engine.FromIterable(context.Background(), src, engine.IterableConfig{}) })
			require.Error(t, err, "%s %s", tc.name, where)
			assert.Contains(t, err.Error(), tc.want, "%s %s", tc.name, where)
			assert.Less(t, n, uint64(1<<20), "%s %s: bytes allocated", tc.name, where)
		}
	}
}
