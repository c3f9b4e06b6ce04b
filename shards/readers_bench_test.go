package shards

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/recycle"
)

// BenchmarkRecordReaders reads every record of a few local shards of
// ImageNet-sized payloads (100 KB of random bytes, 64 samples a shard,
// one row group of 64 rows a Parquet shard, Snappy, pages of about one
// payload each, as writeParquet writes them)
// through Source.Open and Next, each record then given to Source.Decode
// as a loader's worker does (a DecodeFunc that looks at the image's
// length and releases the record, as vision.Pipeline.Record does), and reports what the readers allocate per record (B/rec,
// allocs/rec): what the garbage collector has to collect behind a
// loader, where Decode gives the large fields' buffers back for the
// records after them.
func BenchmarkRecordReaders(b *testing.B) {
	const shards, perShard, size = 4, 64, 100 << 10
	rng := rand.New(rand.NewPCG(1, 2))
	dir := b.TempDir()
	id := 0
	for i := range shards {
		rows := make([]hfRow, perShard)
		var ms []tarMember
		for j := range rows {
			data := make([]byte, size)
			for k := range data {
				data[k] = byte(rng.Uint32())
			}
			label, path := int64(id%1000), fmt.Sprintf("n%08d.JPEG", id)
			rows[j] = hfRow{Image: &hfImage{Bytes: data, Path: &path}, Label: &label}
			key := fmt.Sprintf("n%08d", id)
			ms = append(ms, tarMember{name: key + ".jpg", data: data},
				tarMember{name: key + ".cls", data: fmt.Append(nil, label)})
			id++
		}
		writeParquet(b, filepath.Join(dir, fmt.Sprintf("train-%04d.parquet", i)), rows, perShard)
		require.NoError(b, os.WriteFile(filepath.Join(dir, fmt.Sprintf("train-%04d.tar", i)), tarBytes(b, ms...), 0o644))
	}
	for _, ext := range []string{"tar", "parquet"} {
		b.Run(ext, func(b *testing.B) {
			pattern := filepath.Join(dir, fmt.Sprintf("train-{0000..%04d}.%s", shards-1, ext))
			decode := func(ctx context.Context, rec engine.Record, _ *engine.Slot) error {
				if len(rec.Fields["jpg"]) != size {
					return fmt.Errorf("%s: %d bytes of jpg", rec.Key, len(rec.Fields["jpg"]))
				}
				recycle.Release(ctx) // as vision.Pipeline.Record does
				return nil
			}
			src, err := New(context.Background(), pattern, testSchema, decode)
			require.NoError(b, err)
			ctx := context.Background()
			infos, err := src.Shards(ctx)
			require.NoError(b, err)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			records := 0
			for range b.N {
				eachRecord(b, src, infos, func(rec engine.Record) {
					require.NoError(b, src.Decode(ctx, rec, nil))
					records++
				})
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(records), "B/rec")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(records), "allocs/rec")
		})
	}
}
