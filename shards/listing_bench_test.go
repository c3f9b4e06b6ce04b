package shards

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkIndexedListing lists 64 remote shards of 16 MiB with a
// shardlist.json (Source.Shards, which checks each count against the
// shard's size) from a local HTTP server, and reports what the server
// sent (server-MB) and the connections it saw (conns) per listing.
// Sizes came from a GET of each whole shard, closed unread: server-MB
// and conns then grew with the shards' bytes and count.
func BenchmarkIndexedListing(b *testing.B) {
	const shards, size = 64, 16 << 20
	f := newFaultServer(b)
	list := make([]map[string]any, shards)
	for i := range shards {
		name := fmt.Sprintf("train-%04d.tar", i)
		require.NoError(b, os.WriteFile(filepath.Join(f.dir, name), nil, 0o644))
		require.NoError(b, os.Truncate(filepath.Join(f.dir, name), size)) // sparse
		list[i] = map[string]any{"url": name, "nsamples": 100}
	}
	data, err := json.Marshal(map[string]any{"__kind__": "wids-shard-index-v1", "shardlist": list})
	require.NoError(b, err)
	require.NoError(b, os.WriteFile(filepath.Join(f.dir, "shardlist.json"), data, 0o644))
	pattern := fmt.Sprintf("%s/train-{0000..%04d}.tar", f.URL, shards-1)
	for b.Loop() {
		o := &Opener{}
		src, err := New(context.Background(), pattern, testSchema, decodeTest, UseOpener(o))
		require.NoError(b, err)
		_, err = src.Shards(context.Background())
		require.NoError(b, err)
		require.NoError(b, src.Close())
		o.CloseIdleConnections()
	}
	f.Close() // waits for the handlers: every byte sent is counted
	b.ReportMetric(float64(f.sent.Load())/1e6/float64(b.N), "server-MB/op")
	b.ReportMetric(float64(len(f.clients))/float64(b.N), "conns/op")
}
