package shards

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
)

// BenchmarkCacheEpoch reads every record of 8 shards (about 14 MB): from
// local files, from the cache of remote ones (epoch 2 onwards), and both
// in turn ("interleaved": each iteration one local epoch and one cached,
// in alternating order, so that load from elsewhere hits both alike,
// reporting the median epochs and the median of the per-iteration
// ratios of the cached epoch's rate to the local one's as "ratio").
func BenchmarkCacheEpoch(b *testing.B) {
	b.Run("local", func(b *testing.B) { benchEpoch(b, false) })
	b.Run("cached", func(b *testing.B) { benchEpoch(b, true) })
	b.Run("interleaved", benchEpochInterleaved)
}

// BenchmarkCacheOpen opens and closes each shard's file, reading nothing
// and making no tar reader: what a cached shard costs per open beyond a
// local file's.
func BenchmarkCacheOpen(b *testing.B) {
	for _, cached := range []bool{false, true} {
		name := map[bool]string{false: "local", true: "cached"}[cached]
		b.Run(name, func(b *testing.B) {
			e := newEpochBench(b, cached)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				for _, sh := range e.infos {
					r, err := e.src.open(ctx, sh.Name)
					require.NoError(b, err)
					r.Close()
				}
			}
			e.checkNoRequests(b)
		})
	}
}

// epochBench is a Source over 8 shards, local or cached (warm).
type epochBench struct {
	src   *Source
	infos []engine.ShardInfo
	size  int64
	reqs  int64 // the requests that filled the cache
}

func newEpochBench(b *testing.B, cached bool) *epochBench {
	f := newFaultServer(b)
	paths, _ := writeShards(b, f.dir, 400, 400, 400, 400, 400, 400, 400, 400)
	names := paths
	var opts []Option
	o := fastOpener()
	b.Cleanup(o.CloseIdleConnections)
	if cached {
		names = nil
		for _, p := range paths {
			names = append(names, f.URL+"/"+filepath.Base(p))
		}
		opts = append(opts, UseOpener(o), Cache(b.TempDir(), 1<<30), IndexFile(""))
	}
	src, err := FromNames(names, testSchema, decodeTest, opts...)
	require.NoError(b, err)
	b.Cleanup(func() { src.Close() })
	infos, err := src.Shards(context.Background()) // fills the cache
	require.NoError(b, err)
	e := &epochBench{src: src, infos: infos}
	for _, p := range paths {
		fi, err := os.Stat(p)
		require.NoError(b, err)
		e.size += fi.Size()
	}
	if cached {
		e.reqs = src.StorageStats().Requests
		require.EqualValues(b, len(paths), e.reqs, "one request a shard fills the cache")
	}
	return e
}

// epoch reads every record of every shard.
func (e *epochBench) epoch(b *testing.B) {
	ctx := context.Background()
	for _, sh := range e.infos {
		r, err := e.src.Open(ctx, sh)
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

// checkNoRequests asserts issue 24's "requests to the server in epoch 2
// with a warm cache: 0".
func (e *epochBench) checkNoRequests(b *testing.B) {
	if e.reqs > 0 {
		require.Equal(b, e.reqs, e.src.StorageStats().Requests, "epochs after the first make no request")
	}
}

func benchEpoch(b *testing.B, cached bool) {
	e := newEpochBench(b, cached)
	b.SetBytes(e.size)
	b.ReportAllocs()
	for b.Loop() {
		e.epoch(b)
	}
	e.checkNoRequests(b)
}

func benchEpochInterleaved(b *testing.B) {
	local, cached := newEpochBench(b, false), newEpochBench(b, true)
	b.SetBytes(2 * local.size)
	var ratios, lt, ct []float64
	i := 0
	for b.Loop() {
		var tl, tc time.Duration
		for k := range 2 {
			t0 := time.Now()
			if k == i%2 {
				local.epoch(b)
				tl = time.Since(t0)
			} else {
				cached.epoch(b)
				tc = time.Since(t0)
			}
		}
		i++
		ratios = append(ratios, tl.Seconds()/tc.Seconds())
		lt, ct = append(lt, tl.Seconds()*1e3), append(ct, tc.Seconds()*1e3)
	}
	cached.checkNoRequests(b)
	b.ReportMetric(medianOf(lt), "local-ms")
	b.ReportMetric(medianOf(ct), "cached-ms")
	b.ReportMetric(medianOf(ratios), "ratio")
	b.Logf("%d rounds: ratios %s", len(ratios), fmtRatios(ratios))
}

// fmtRatios formats v to 2 decimals, comma-separated.
func fmtRatios(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strings.Join(s, ", ")
}

func medianOf(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
