package shards

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkCacheEpoch reads every record of 8 shards (about 12 MB): from
// local files, and from the cache of remote ones (epoch 2 onwards).
func BenchmarkCacheEpoch(b *testing.B) {
	b.Run("local", func(b *testing.B) { benchEpoch(b, false) })
	b.Run("cached", func(b *testing.B) { benchEpoch(b, true) })
}

func benchEpoch(b *testing.B, cached bool) {
	f := newFaultServer(b)
	paths, _ := writeShards(b, f.dir, 400, 400, 400, 400, 400, 400, 400, 400)
	names := paths
	var opts []Option
	o := fastOpener()
	defer o.CloseIdleConnections()
	if cached {
		names = nil
		for _, p := range paths {
			names = append(names, f.URL+"/"+filepath.Base(p))
		}
		opts = append(opts, UseOpener(o), Cache(b.TempDir(), 1<<30), IndexFile(""))
	}
	src, err := FromNames(names, testSchema, decodeTest, opts...)
	require.NoError(b, err)
	defer src.Close()
	infos, err := src.Shards(context.Background()) // fills the cache
	require.NoError(b, err)
	var size int64
	for _, p := range paths {
		fi, err := os.Stat(p)
		require.NoError(b, err)
		size += fi.Size()
	}
	b.SetBytes(size)
	b.ReportAllocs()
	ctx := context.Background()
	for b.Loop() {
		for _, sh := range infos {
			r, err := src.Open(ctx, sh)
			require.NoError(b, err)
			n := 0
			for {
				_, err := r.Next(ctx)
				if err == io.EOF {
					break
				}
				require.NoError(b, err)
				n++
			}
			r.Close()
			require.Equal(b, sh.Samples, n)
		}
	}
	if cached {
		require.EqualValues(b, len(paths), src.StorageStats().Requests, "epochs after the first make no request")
	}
}
