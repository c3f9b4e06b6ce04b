package shards

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/objtest"
	"github.com/tensorbatch/tensorbatch/internal/s3test"
)

// emulator is a running emulator as the tests here use it: versitygw
// (s3test) or fake-gcs-server and Azurite (objtest).
type emulator interface {
	Addr() string
	Setenv(testing.TB)
	CreateBucket(name string) error
	Put(bucket, key string, data []byte) error
}

// objectStores are the stores that every test here runs on, each against
// its emulator on 127.0.0.1.
var objectStores = []struct {
	scheme string
	start  func(testing.TB) emulator
}{
	{"s3://", func(t testing.TB) emulator { return s3test.ForTest(t) }},
	{"gs://", func(t testing.TB) emulator { return objtest.GCS(t) }},
	{"az://", func(t testing.TB) emulator { return objtest.Azure(t) }},
}

// storeBucket starts a store's emulator with its variables set for the
// test, makes a bucket and uploads files to it under their base names.
func storeBucket[S emulator](t *testing.T, start func(testing.TB) S, bucket string, files ...string) S {
	t.Helper()
	srv := start(t)
	srv.Setenv(t)
	require.NoError(t, srv.CreateBucket(bucket))
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, srv.Put(bucket, filepath.Base(f), data))
	}
	return srv
}

// viaProxy points the clients of the test at p, a proxy in front of srv.
func viaProxy(t *testing.T, srv emulator, p *faultServer) {
	switch srv := srv.(type) {
	case *s3test.Server:
		t.Setenv("AWS_ENDPOINT_URL_S3", p.URL)
	case *objtest.Server:
		if strings.HasSuffix(srv.Endpoint(), objtest.AzureAccount) {
			t.Setenv("AZURE_STORAGE_CONNECTION_STRING", objtest.AzureConnectionString(p.URL+"/"+objtest.AzureAccount))
		} else {
			t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(p.URL, "http://"))
		}
	}
}

// TestObjectStoresMatchLocal: a Source over tar shards in a bucket reads
// every record as from the local files, with the shard list or by
// scanning the shards.
func TestObjectStoresMatchLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("the store emulators: slow; go test without -short runs it")
	}
	for _, st := range objectStores {
		t.Run(st.scheme, func(t *testing.T) {
			dir := t.TempDir()
			paths, pattern := writeShards(t, dir, 30, 25, 40, 5)
			storeBucket(t, st.start, "data", append(paths, writeList(t, paths, []int{30, 25, 40, 5}))...)
			sc := engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: 20}
			cfg := engine.Config{BatchSize: 16, Seed: 11, Workers: 2}
			local, err := New(context.Background(), pattern, testSchema, decodeTest)
			require.NoError(t, err)
			want, wantData, _, err := loadAll(t, local, sc, cfg, 2)
			require.NoError(t, err)
			for _, index := range []bool{true, false} {
				o := &Opener{}
				opts := []Option{UseOpener(o)}
				if !index {
					opts = append(opts, IndexFile("")) // scan the headers
				}
				remote, err := New(context.Background(), st.scheme+"data/train-{0000..0003}.tar", testSchema, decodeTest, opts...)
				require.NoError(t, err)
				infos, err := remote.Shards(context.Background())
				require.NoError(t, err)
				assert.Equal(t, []engine.ShardInfo{{Name: st.scheme + "data/train-0000.tar", Samples: 30}, {Name: st.scheme + "data/train-0001.tar", Samples: 25}, {Name: st.scheme + "data/train-0002.tar", Samples: 40}, {Name: st.scheme + "data/train-0003.tar", Samples: 5}}, infos)
				got, gotData, stats, err := loadAll(t, remote, sc, cfg, 2)
				require.NoError(t, err)
				assert.Equal(t, want, got, "index %v", index)
				assert.Equal(t, wantData, gotData, "index %v: byte-identical to the local run", index)
				assert.Zero(t, stats.Dataset["read_retries"])
				assert.Positive(t, o.BytesFetched())
				o.CloseIdleConnections()
			}
		})
	}
}

// TestObjectStoresList lists a prefix page by page: the shards right
// under it, sorted, without other objects or deeper ones.
func TestObjectStoresList(t *testing.T) {
	if testing.Short() {
		t.Skip("the store emulators: slow; go test without -short runs it")
	}
	for _, st := range objectStores {
		t.Run(st.scheme, func(t *testing.T) {
			dir, paths, want, wantData := listFixture(t)
			srv := storeBucket(t, st.start, "data")
			put := func(key string, data []byte) { require.NoError(t, srv.Put("data", key, data)) }
			for i := len(paths) - 1; i >= 0; i-- { // uploaded in reverse: the listing sorts
				data, err := os.ReadFile(paths[i])
				require.NoError(t, err)
				put("ds/train/"+filepath.Base(paths[i]), data)
			}
			var wantNames []string
			for _, p := range paths {
				wantNames = append(wantNames, st.scheme+"data/ds/train/"+filepath.Base(p))
			}
			for _, f := range []string{"shardlist.json", "README.txt"} {
				data, err := os.ReadFile(filepath.Join(dir, f))
				require.NoError(t, err)
				put("ds/train/"+f, data)
			}
			put("ds/train/sub/deeper.tar", tarBytes(t, sampleMembers(0)...))
			put("ds/train-other.tar", tarBytes(t, sampleMembers(0)...)) // shares the prefix's text, not its folder
			put("ds/empty/notes.txt", []byte("x"))

			ctx := context.Background()
			o := &Opener{}
			defer o.CloseIdleConnections()
			for _, pageSize := range []int{0, 2, 3} {
				listPageSize = pageSize
				before := o.Requests()
				names, err := List(ctx, o, st.scheme+"data/ds/train/")
				listPageSize = 0
				require.NoError(t, err)
				assert.Equal(t, wantNames, names, "page size %d", pageSize)
				if pageSize > 0 {
					// 7 objects and a folder ("sub/"): more than one page.
					assert.Greater(t, o.Requests()-before, int64(7/pageSize), "page size %d: every page", pageSize)
				}
			}
			assert.Zero(t, o.ReadRetries())

			listPageSize = 2
			defer func() { listPageSize = 0 }()
			src, err := New(context.Background(), st.scheme+"data/ds/train/", testSchema, decodeTest, UseOpener(o))
			require.NoError(t, err)
			assert.Equal(t, wantNames, src.Names())
			got, gotData, _, err := loadAll(t, src, listSC, listCfg, 1)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			assert.Equal(t, wantData, gotData)

			if st.scheme == "az://" {
				names, err := List(ctx, o, "azblob://data/ds/train/")
				require.NoError(t, err)
				assert.Equal(t, strings.ReplaceAll(strings.Join(wantNames, " "), "az://", "azblob://"), strings.Join(names, " "))
			}
			_, err = New(context.Background(), st.scheme+"data/ds/empty/", testSchema, decodeTest, UseOpener(o))
			assert.EqualError(t, err, "shards: "+st.scheme+"data/ds/empty/: no shards (files ending in .tar or .parquet) in the folder")
			_, err = New(context.Background(), st.scheme+"nobucket/x/", testSchema, decodeTest, UseOpener(o))
			assert.ErrorContains(t, err, "shards: listing "+st.scheme+"nobucket/x/: HTTP 404 Not Found")
			assert.Zero(t, o.ReadRetries(), "a 404 is not retried")
		})
	}
}

// TestObjectStoresResume: 503s and connections dropped in the middle of
// an object, by a proxy in front of the emulator, are retried within the
// Opener's budget, counted, and resumed at the byte where the read
// stopped; the epoch is the local one.
func TestObjectStoresResume(t *testing.T) {
	if testing.Short() {
		t.Skip("the store emulators: slow; go test without -short runs it")
	}
	for _, st := range objectStores {
		t.Run(st.scheme, func(t *testing.T) {
			dir := t.TempDir()
			paths, pattern := writeShards(t, dir, 300, 200)
			srv := storeBucket(t, st.start, "data", paths...)
			p := newFaultProxy(t, srv.Addr())
			viaProxy(t, srv, p)
			want, err := os.ReadFile(paths[0])
			require.NoError(t, err)

			o := &Opener{Backoff: time.Millisecond, Timeout: 5 * time.Second}
			defer o.CloseIdleConnections()
			p.inject(func(f *faultServer) { f.fail, f.cuts = 2, []int64{1000, 70000} })
			got, err := readVia(o, context.Background(), st.scheme+"data/train-0000.tar")
			require.NoError(t, err)
			assert.Equal(t, want, got)
			assert.EqualValues(t, 4, o.ReadRetries(), "two 503s and two cuts")
			assert.EqualValues(t, 5, o.Requests())
			assert.Len(t, p.requests(), 5)
			assert.EqualValues(t, len(want), o.BytesFetched(), "each byte fetched once: the reads resumed where they stopped")

			local, err := New(context.Background(), pattern, testSchema, decodeTest)
			require.NoError(t, err)
			wantIDs, wantData, _, err := loadAll(t, local, listSC, listCfg, 0)
			require.NoError(t, err)
			o2 := &Opener{Backoff: time.Millisecond, Timeout: 5 * time.Second}
			defer o2.CloseIdleConnections()
			src, err := New(context.Background(), st.scheme+"data/train-{0000..0001}.tar", testSchema, decodeTest, UseOpener(o2), IndexFile(""))
			require.NoError(t, err)
			p.inject(func(f *faultServer) { f.cuts = []int64{5000, 100000, 3000} })
			gotIDs, gotData, stats, err := loadAll(t, src, listSC, listCfg, 0)
			require.NoError(t, err)
			assert.Equal(t, wantIDs, gotIDs)
			assert.Equal(t, wantData, gotData)
			assert.Positive(t, stats.Dataset["read_retries"])
		})
	}
}

// TestSizeAsksForOneByte: the size of a remote shard, which Source.Shards
// checks an index's counts against, comes from a request for its first
// byte, on every store, and the next request reuses the connection; an
// empty object (a 416) is 0 bytes, and a server that ignores the range
// still says the size.
func TestSizeAsksForOneByte(t *testing.T) {
	if testing.Short() {
		t.Skip("the store emulators: slow; go test without -short runs it")
	}
	sizes := map[string]int{"a.tar": 3 << 20, "b.tar": 1 << 20, "empty.tar": 0}
	dir := t.TempDir()
	var paths []string
	for name, n := range sizes {
		paths = append(paths, filepath.Join(dir, name))
		require.NoError(t, os.WriteFile(paths[len(paths)-1], make([]byte, n), 0o644))
	}
	sizesOf := func(t *testing.T, f *faultServer, url string) {
		o := &Opener{}
		defer o.CloseIdleConnections()
		for _, name := range []string{"a.tar", "b.tar", "empty.tar", "a.tar"} {
			size, err := o.size(context.Background(), url+name)
			require.NoError(t, err, name)
			assert.EqualValues(t, sizes[name], size, name)
		}
		assert.EqualValues(t, 4, o.Requests())
	}
	oneByte := func(t *testing.T, f *faultServer) {
		reqs := f.requests()
		require.Len(t, reqs, 4)
		for _, r := range reqs {
			assert.True(t, strings.HasSuffix(r, ".tar bytes=0-0"), "request %q", r)
		}
		assert.Len(t, f.clients, 1, "the four requests on one connection")
	}
	t.Run("http://", func(t *testing.T) {
		f := newFaultServer(t)
		for _, p := range paths {
			require.NoError(t, os.Link(p, filepath.Join(f.dir, filepath.Base(p))))
		}
		sizesOf(t, f, f.URL+"/")
		oneByte(t, f)
		f.inject(func(f *faultServer) { f.log, f.noRange = nil, true })
		sizesOf(t, f, f.URL+"/") // the whole objects, closed unread
	})
	for _, st := range objectStores {
		t.Run(st.scheme, func(t *testing.T) {
			srv := storeBucket(t, st.start, "data", paths...)
			f := newFaultProxy(t, srv.Addr())
			viaProxy(t, srv, f)
			sizesOf(t, f, st.scheme+"data/")
			oneByte(t, f)
		})
	}
}

// TestObjectStoresMissing: a missing object or bucket is an error that
// names the URL, at once: a 404 burns no retry. ReadFile says not found.
func TestObjectStoresMissing(t *testing.T) {
	if testing.Short() {
		t.Skip("the store emulators: slow; go test without -short runs it")
	}
	for _, st := range objectStores {
		t.Run(st.scheme, func(t *testing.T) {
			paths, _ := writeShards(t, t.TempDir(), 3)
			storeBucket(t, st.start, "data", paths...)
			ctx := context.Background()
			o := &Opener{MaxRetries: 3, Backoff: time.Second}
			defer o.CloseIdleConnections()
			start := time.Now()
			_, err := o.Open(ctx, st.scheme+"data/missing.tar")
			assert.ErrorContains(t, err, "shards: "+st.scheme+"data/missing.tar: HTTP 404 Not Found")
			assert.ErrorIs(t, err, fs.ErrNotExist)
			_, err = o.Open(ctx, st.scheme+"nobucket/a.tar")
			assert.ErrorContains(t, err, "shards: "+st.scheme+"nobucket/a.tar: HTTP 404 Not Found")
			_, found, err := o.ReadFile(ctx, st.scheme+"data/missing.json")
			assert.NoError(t, err)
			assert.False(t, found)
			assert.Zero(t, o.ReadRetries())
			assert.EqualValues(t, 3, o.Requests())
			assert.Less(t, time.Since(start), time.Second, "no backoff waited")
			src, err := New(context.Background(), st.scheme+"data/train-{0000..0001}.tar", testSchema, decodeTest, UseOpener(o), IndexFile(""))
			require.NoError(t, err)
			_, err = src.Shards(ctx)
			assert.ErrorContains(t, err, st.scheme+"data/train-0001.tar: HTTP 404 Not Found")
			assert.Zero(t, o.ReadRetries())
		})
	}
}

// TestAzureBadKey: a wrong account key is a 403 that fails at once.
func TestAzureBadKey(t *testing.T) {
	if testing.Short() {
		t.Skip("the Azure emulator: slow; go test without -short runs it")
	}
	paths, _ := writeShards(t, t.TempDir(), 3)
	srv := storeBucket(t, objtest.Azure, "data", paths...)
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", strings.Replace(objtest.AzureConnectionString(srv.Endpoint()), "AccountKey=E", "AccountKey=F", 1))
	o := &Opener{Backoff: time.Second}
	defer o.CloseIdleConnections()
	_, err := o.Open(context.Background(), "az://data/train-0000.tar")
	assert.ErrorContains(t, err, "shards: az://data/train-0000.tar: HTTP 403 Forbidden")
	assert.Zero(t, o.ReadRetries())
}

// TestObjectStoresCacheEpochTwoMakesNoRequests: the scan downloads each
// shard into the cache, checked against the store's MD5; epochs 0 and 1
// make no request.
func TestObjectStoresCacheEpochTwoMakesNoRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("the store emulators: slow; go test without -short runs it")
	}
	for _, st := range objectStores {
		t.Run(st.scheme, func(t *testing.T) {
			paths, pattern := writeShards(t, t.TempDir(), 30, 25, 40)
			storeBucket(t, st.start, "data", paths...)
			cacheEpochTwoMakesNoRequests(t, st.scheme, paths, pattern)
		})
	}
}

// cacheEpochTwoMakesNoRequests reads the shards paths, uploaded to the
// bucket "data" of scheme, through a Cache for two epochs: the scan
// downloads each shard once, the epochs read the cache, with no request,
// the batches of the local files (pattern), and each download commits
// with its URL, size and the object's version (ETag).
func cacheEpochTwoMakesNoRequests(t *testing.T, scheme string, paths []string, pattern string) {
	local, err := New(context.Background(), pattern, testSchema, decodeTest)
	require.NoError(t, err)
	want := epochs(t, local, 2)

	cacheDir := t.TempDir()
	o := &Opener{}
	defer o.CloseIdleConnections()
	src, err := New(context.Background(), scheme+"data/train-{0000..0002}.tar", testSchema, decodeTest, UseOpener(o), IndexFile(""), Cache(cacheDir, 1<<30))
	require.NoError(t, err)
	defer src.Close()
	d, err := engine.FromIterable(context.Background(), src, engine.IterableConfig{ShuffleBuffer: 10})
	require.NoError(t, err)
	scanned := o.Requests()
	assert.EqualValues(t, 3, scanned, "the scan downloads each shard into the cache")
	l, err := engine.New(d, engine.Config{BatchSize: 8, Seed: 3, Workers: 2, Backend: "cpu"})
	require.NoError(t, err)
	defer l.Close()
	var got [][][]byte
	for e := range 2 {
		_, data, err := batches(t, l, e)
		require.NoError(t, err)
		got = append(got, data)
	}
	assert.Equal(t, scanned, o.Requests(), "both epochs read the cache")
	assert.Equal(t, want, got)
	for _, p := range paths {
		name := scheme + "data/" + filepath.Base(p)
		var meta []byte
		require.Eventually(t, func() bool {
			meta, err = os.ReadFile(filepath.Join(cacheDir, key(name)+".meta"))
			return err == nil
		}, 10*time.Second, 5*time.Millisecond, "the download of %s commits", name)
		var m entryMeta
		require.NoError(t, json.Unmarshal(meta, &m))
		fi, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, name, m.URL)
		assert.Equal(t, fi.Size(), m.Size)
		assert.NotEmpty(t, m.ETag, "the object's version")
	}
	// A shard that the read-ahead fetched while the scan counted another
	// is a hit when the scan opens it.
	stats := src.StorageStats()
	assert.EqualValues(t, 3, stats.Misses+stats.ReadAheads, "one download a shard")
	assert.EqualValues(t, 9, stats.Hits+stats.Misses, "an open a shard at the scan and in each epoch")
	assert.Zero(t, stats.Unverified, "each download checked against the store's MD5")
}

// TestObjectStoresConfigErrors: bad URLs, and missing credentials, are
// errors that say what is wanted, with no request made.
func TestObjectStoresConfigErrors(t *testing.T) {
	ctx := context.Background()
	o := &Opener{}
	defer o.CloseIdleConnections()
	_, err := o.Open(ctx, "ftp://x/a.tar")
	assert.EqualError(t, err, `shards: "ftp://x/a.tar": unknown scheme; want a path, file://, http://, https://, s3://, gs:// or az:// (azblob://)`)
	_, err = o.Open(ctx, "gs://bucket")
	assert.EqualError(t, err, `shards: "gs://bucket": want gs://bucket/key`)
	_, err = o.Open(ctx, "azblob://data/")
	assert.EqualError(t, err, `shards: "azblob://data/": want azblob://container/key`)
	_, err = List(ctx, o, "az:///")
	assert.EqualError(t, err, `shards: "az:///": want az://container/prefix/`)

	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	_, err = o.Open(ctx, "gs://bucket/a.tar")
	assert.ErrorContains(t, err, "shards: gs://bucket/a.tar: Google Application Default Credentials: ")
	for _, k := range []string{"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT"} {
		t.Setenv(k, "")
	}
	_, err = List(ctx, o, "az://data/train/")
	assert.ErrorContains(t, err, "shards: az://data/train/: no Azure storage account: set AZURE_STORAGE_CONNECTION_STRING")
	assert.Zero(t, o.Requests())
}
