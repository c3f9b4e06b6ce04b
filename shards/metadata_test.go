package shards

import (
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
	l := ShardList{Kind: "wids-shard-index-v1", Version: 1}
	for i, p := range paths {
		l.Shards = append(l.Shards, ShardEntry{URL: filepath.Base(p), Samples: declared[i]})
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
	for _, tc := range []struct {
		name  string
		at    int // the shard whose count is wrong
		count int // its listed count; it holds 3
	}{
		{"first more", 0, 1}, {"middle more", 1, 1}, {"last more", 2, 1},
		{"first fewer", 0, 5}, {"middle fewer", 1, 5}, {"last fewer", 2, 5},
		{"last one more", 2, 2}, {"last one fewer", 2, 4}, {"last zero", 2, 0},
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
				src, err := New(pattern, testSchema, decodeTest, IndexFile(writeList(t, paths, declared)))
				require.NoError(t, err)
				_, _, _, err = loadAll(t, src, engine.StreamConfig{}, cfg, 0)
				require.Error(t, err, "a shard of 3 records listed as %d", tc.count)
				assert.Contains(t, err.Error(), paths[tc.at])
				assert.Contains(t, err.Error(), fmt.Sprintf("listed with %d", tc.count))
			})
		}
	}
}
