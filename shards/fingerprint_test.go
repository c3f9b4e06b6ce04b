package shards

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/vision"
)

// fpConfig is the loader configuration of the fingerprint tests.
var fpConfig = engine.Config{BatchSize: 4, Seed: 9, Backend: "cpu"}

// stateOf loads two batches of src's epoch 0 and returns the loader's
// State then.
func stateOf(t *testing.T, src *Source) engine.State {
	t.Helper()
	d, err := engine.FromIterable(context.Background(), src, engine.IterableConfig{})
	require.NoError(t, err)
	l, err := engine.New(d, fpConfig)
	require.NoError(t, err)
	defer l.Close()
	n := 0
	for _, err := range l.Epoch(context.Background(), 0) {
		require.NoError(t, err)
		if n++; n == 2 {
			break
		}
	}
	return l.State()
}

// resume returns engine.New's error for a loader of src resuming st.
func resume(t *testing.T, src *Source, st engine.State) error {
	t.Helper()
	d, err := engine.FromIterable(context.Background(), src, engine.IterableConfig{})
	require.NoError(t, err)
	cfg := fpConfig
	cfg.Resume = &st
	l, err := engine.New(d, cfg)
	if err == nil {
		require.NoError(t, l.Close())
	}
	return err
}

// source returns the Source of names with opts, closed at the end of t.
func source(t *testing.T, names []string, opts ...Option) *Source {
	t.Helper()
	src, err := FromNames(names, testSchema, decodeTest, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { src.Close() })
	return src
}

// The issue row (issue 35): "a cached Source → the same shards in
// another order: 9 of 9 batches differed". A state saved by a loader of
// cached shards is refused for the same shards listed in another order,
// through the same cache, naming the shards' order.
func TestSourceStateRefusesShardsInAnotherOrder(t *testing.T) {
	_, urls, _ := cacheServer(t, 9, 9, 9, 9)
	dir := t.TempDir()
	st := stateOf(t, source(t, urls, Cache(dir, 1<<30)))
	reversed := slices.Clone(urls)
	slices.Reverse(reversed)
	err := resume(t, source(t, reversed, Cache(dir, 1<<30)), st)
	require.Error(t, err)
	assert.ErrorContains(t, err, "Config.Resume: Dataset")
	assert.ErrorContains(t, err, "dataset.iterable.shards:")
	assert.NoError(t, resume(t, source(t, urls, Cache(dir, 1<<30)), st), "the same shards in the same order resume")
}

// A shard whose content changed between the save and the resume, under
// the same name with the same count, is refused, naming the objects:
// locally (by its sampled content), over HTTP (by its version). Shards
// copied to another folder resume; so does a cached shard changed on the
// server, as the cache serves the content the state was saved with.
func TestSourceStateRefusesAChangedShard(t *testing.T) {
	counts := []int{6, 6, 6}
	t.Run("local", func(t *testing.T) {
		dir := t.TempDir()
		paths, _ := writeShards(t, dir, counts...)
		st := stateOf(t, source(t, paths))

		copied := t.TempDir()
		var moved []string
		for _, p := range paths {
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			q := filepath.Join(copied, filepath.Base(p))
			require.NoError(t, os.WriteFile(q, data, 0o644))
			moved = append(moved, q)
		}
		assert.NoError(t, resume(t, source(t, moved), st), "the same shards in another folder")

		writeVariant(t, dir, "rewritten", counts...) // same names, counts and sizes
		err := resume(t, source(t, paths), st)
		require.Error(t, err)
		assert.ErrorContains(t, err, "dataset.iterable.of.shards.objects:")
	})
	t.Run("http", func(t *testing.T) {
		f := newFaultServer(t)
		paths, _ := writeShards(t, f.dir, counts...)
		var urls []string
		for _, p := range paths {
			urls = append(urls, f.URL+"/"+filepath.Base(p))
		}
		o := fastOpener()
		defer o.CloseIdleConnections()
		st := stateOf(t, source(t, urls, UseOpener(o), IndexFile("")))
		cacheDir := t.TempDir()
		cached := stateOf(t, source(t, urls, UseOpener(o), IndexFile(""), Cache(cacheDir, 1<<30)))
		assert.Equal(t, st.Dataset, cached.Dataset, "a cached copy is identified as the object it copies")

		writeVariant(t, f.dir, "rewritten", counts...)
		later := time.Now().Add(time.Hour) // Last-Modified has whole seconds
		for _, p := range paths {
			require.NoError(t, os.Chtimes(p, later, later))
		}
		err := resume(t, source(t, urls, UseOpener(o), IndexFile("")), st)
		require.Error(t, err)
		assert.ErrorContains(t, err, "dataset.iterable.of.shards.objects:")
		assert.NoError(t, resume(t, source(t, urls, UseOpener(o), IndexFile(""), Cache(cacheDir, 1<<30)), cached),
			"the cache still serves what the state was saved with")
	})
}

// DecoderFingerprint nests the decoder's parts (a vision.Pipeline's) in
// the Source's; ParquetColumns is recorded where a shard is a Parquet
// file; MaxMemberBytes, which decides failures and not samples, is not.
func TestSourceFingerprintParts(t *testing.T) {
	paths, _ := writeShards(t, t.TempDir(), 3)
	p, err := vision.NewPipeline(vision.Eval(16))
	require.NoError(t, err)
	defer p.Close()
	src := source(t, paths, DecoderFingerprint(p), MaxMemberBytes(1<<20))
	assert.NotContains(t, src.Fingerprint(), "shards.objects", "not before Shards")
	_, err = src.Shards(context.Background())
	require.NoError(t, err)
	f := src.Fingerprint()
	for k, v := range p.Fingerprint() {
		assert.Equal(t, v, f["shards.decoder."+k], k)
	}
	assert.Regexp(t, `^1 [0-9a-f]{16}$`, f["shards.objects"])
	assert.NotContains(t, f, "shards.parquet_columns", "no Parquet shard")
	other := source(t, paths, DecoderFingerprint(p))
	_, err = other.Shards(context.Background())
	require.NoError(t, err)
	assert.Equal(t, f, other.Fingerprint(), "MaxMemberBytes is not a part")

	pq, _ := writeParquetShards(t, t.TempDir(), 2, 3)
	for _, tc := range []struct {
		opts []Option
		want string
	}{{nil, "all"}, {[]Option{ParquetColumns("image", "cls")}, "image,cls"}} {
		src := source(t, pq, tc.opts...)
		_, err := src.Shards(context.Background())
		require.NoError(t, err)
		assert.Equal(t, tc.want, src.Fingerprint()["shards.parquet_columns"])
	}
}

// A remote shard's identity is the same whichever request notes it
// (the size probe that checks a listed count, a scan's read, a Parquet
// footer's read) and whether it is read from the server, a download into
// the cache or the cache: a state saved by a job that filled the cache
// resumes on the job that reads it, and on one without a cache.
func TestSourceFingerprintIsTheSameCachedOrNot(t *testing.T) {
	f := newFaultServer(t)
	tars, _ := writeShards(t, f.dir, 5, 0, 6)
	pqs, _ := writeParquetShards(t, f.dir, 2, 4, 3)
	l, err := BuildIndex(context.Background(), nil, tars)
	require.NoError(t, err)
	list, err := json.Marshal(l)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "shardlist.json"), list, 0o644))
	var urls []string
	for _, p := range append(tars, pqs...) {
		urls = append(urls, f.URL+"/"+filepath.Base(p))
	}
	for _, index := range []string{"listed", "scanned"} {
		t.Run(index, func(t *testing.T) {
			opts := []Option{UseOpener(fastOpener())}
			if index == "scanned" {
				opts = append(opts, IndexFile(""))
			}
			fp := func(more ...Option) engine.Fingerprint {
				src := source(t, urls, append(slices.Clone(opts), more...)...)
				_, err := src.Shards(context.Background())
				require.NoError(t, err)
				return src.Fingerprint()
			}
			want := fp()
			require.Contains(t, want, "shards.objects")
			dir := t.TempDir()
			assert.Equal(t, want, fp(Cache(dir, 1<<30)), "downloading into the cache")
			assert.Equal(t, want, fp(Cache(dir, 1<<30)), "from the cache")
		})
	}
}

// A server that sends neither ETag nor Last-Modified leaves a shard's
// size as all that identifies it: a rewrite of the same size would
// resume unseen, so the Source says so, once.
func TestSourceWarnsOfShardsWithoutAVersion(t *testing.T) {
	dir := t.TempDir()
	paths, _ := writeShards(t, dir, 4, 5)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := os.ReadFile(filepath.Join(dir, path.Base(r.URL.Path)))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Write(data) // the whole file, whatever the Range: no ETag, no Last-Modified
	}))
	defer srv.Close()
	var urls []string
	for _, p := range paths {
		urls = append(urls, srv.URL+"/"+filepath.Base(p))
	}
	log := logs(t)
	o := fastOpener()
	defer o.CloseIdleConnections()
	src := source(t, urls, UseOpener(o), IndexFile(""))
	stateOf(t, src)
	stateOf(t, src) // a second epoch's count: no second warning
	assert.Equal(t, 1, strings.Count(log.String(), "gives no ETag or Last-Modified"), log.String())
	assert.Contains(t, log.String(), "shards=2")

	before := log.String()
	versioned := newFaultServer(t) // http.FileServer: Last-Modified
	vpaths, _ := writeShards(t, versioned.dir, 4)
	stateOf(t, source(t, []string{versioned.URL + "/" + filepath.Base(vpaths[0])}, UseOpener(o), IndexFile("")))
	assert.Equal(t, before, log.String(), "shards with a version: no warning")
}
