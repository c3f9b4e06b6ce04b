package shards

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
)

// decoderParts is a decoder's engine.Fingerprinter, for DecoderFingerprint.
type decoderParts engine.Fingerprint

func (p decoderParts) Fingerprint() engine.Fingerprint { return engine.Fingerprint(p) }

// decodeFlipped is decodeTest with the noise's sign flipped: another
// decoder of the same schema.
func decodeFlipped(ctx context.Context, rec engine.Record, s *engine.Slot) error {
	if err := decodeTest(ctx, rec, s); err != nil {
		return err
	}
	collate.As[float32](s.Tensor("noise"))[0] *= -1
	return nil
}

// writeVariant writes shards as writeShards does, each sample's .json
// member saying variant too: the same samples to decodeTest, other
// bytes.
func writeVariant(t testing.TB, dir, variant string, counts ...int) (paths []string, pattern string) {
	id := 0
	for i, n := range counts {
		var ms []tarMember
		for range n {
			m := sampleMembers(id)
			m[2].data = fmt.Appendf(nil, `{"id":%d,"variant":%q}`, id, variant)
			ms = append(ms, m...)
			id++
		}
		p := filepath.Join(dir, fmt.Sprintf("train-%04d.tar", i))
		require.NoError(t, os.WriteFile(p, tarBytes(t, ms...), 0o644))
		paths = append(paths, p)
	}
	return paths, filepath.Join(dir, fmt.Sprintf("train-{0000..%04d}.tar", len(counts)-1))
}

// conformCounts are the shards' sample counts in the conformance suite:
// an empty shard, and spans that end inside shards.
var conformCounts = []int{7, 0, 5, 9, 3}

// sourceDataset returns an engine.IterableDataset of the Source that
// pattern and opts make, with an Opener of its own; closing the dataset
// closes the Source, as does the end of t.
func sourceDataset(t testing.TB, pattern string, decode DecodeFunc, opts ...Option) engine.Dataset {
	t.Helper()
	src, err := New(context.Background(), pattern, testSchema, decode, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { src.Close() })
	d, err := engine.FromIterable(context.Background(), src, engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: 6})
	require.NoError(t, err)
	return d
}

// TestSourcesConform runs the conformance suite on Sources of tar and
// Parquet shards, local and over HTTP through a Cache, each made anew
// whenever the suite asks (a resumed job's Source). Each Other has New's
// Len and Schema, so only its fingerprint refuses New's state: a shard's
// content (tar, local: one member of each sample; Parquet, local: the
// files' row groups), the decoder (tar, cached) or ParquetColumns
// (Parquet, cached).
func TestSourcesConform(t *testing.T) {
	// Tar shards, local: each Source in a folder of its own, as a resumed
	// job on another node would have them.
	tarLocal := func(variant string) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			_, pattern := writeVariant(t, t.TempDir(), variant, conformCounts...)
			return sourceDataset(t, pattern, decodeTest)
		}
	}

	// Tar shards over HTTP, each Source through a new cache folder: it
	// downloads as it reads, and Close cancels what is in flight.
	tarSrv := newFaultServer(t)
	writeShards(t, tarSrv.dir, conformCounts...)
	tarCached := func(decode DecodeFunc, name string) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			return sourceDataset(t, tarSrv.URL+"/train-{0000..0004}.tar", decode,
				Cache(t.TempDir(), 1<<30), DecoderFingerprint(decoderParts{"test.decoder": name}))
		}
	}

	// Parquet shards, local: each Source in a folder of its own.
	parquetLocal := func(perGroup int) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			_, pattern := writeParquetShards(t, t.TempDir(), perGroup, conformCounts...)
			return sourceDataset(t, pattern, decodeTest)
		}
	}

	// Parquet shards over HTTP, every Source through one cache folder,
	// warm after the first: it reads the cache with no request.
	pqSrv := newFaultServer(t)
	writeParquetShards(t, pqSrv.dir, 3, conformCounts...)
	pqCache := t.TempDir()
	parquetCached := func(opts ...Option) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			return sourceDataset(t, pqSrv.URL+"/train-{0000..0004}.parquet", decodeTest, append(opts, Cache(pqCache, 1<<30))...)
		}
	}

	for _, tc := range []struct {
		name       string
		new, other func(testing.TB) engine.Dataset
	}{
		{"tar/local", tarLocal("a"), tarLocal("b")},
		{"tar/cache", tarCached(decodeTest, "plain"), tarCached(decodeFlipped, "flipped")},
		{"parquet/local", parquetLocal(3), parquetLocal(2)},
		{"parquet/http-cache", parquetCached(), parquetCached(ParquetColumns("image", "cls"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enginetest.TestDataset(t, enginetest.Case{New: tc.new, Other: tc.other})
		})
	}
}
