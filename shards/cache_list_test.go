package shards

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
)

// readShards lists src's shards and reads each one whole through its
// cache, as an epoch would, then closes src (its downloads end).
func readShards(t *testing.T, src *Source) []engine.ShardInfo {
	t.Helper()
	infos, err := src.Shards(context.Background())
	require.NoError(t, err)
	for _, sh := range infos {
		readShard(t, src, sh.Name)
	}
	require.NoError(t, src.Close())
	return infos
}

// listRequests returns the requests for shard lists since the log was
// last cleared, and clears it.
func listRequests(f *faultServer) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.log {
		if strings.Contains(r, "shardlist.json") {
			out = append(out, r)
		}
	}
	f.log = nil
	return out
}

// Issue 38: a new process with a warm cache asked for shardlist.json.
// The cache keeps the list beside the shards: a Source whose shards are
// all cached reads it from there, with no request; one whose shard is
// not fetches it again (and keeps the new one), so that the counts of
// what it downloads are the server's.
func TestCacheKeepsTheShardList(t *testing.T) {
	f, urls, _ := cacheServer(t, 20, 20, 20)
	dir := t.TempDir()
	o := fastOpener()
	defer o.CloseIdleConnections()
	readShards(t, source(t, urls, UseOpener(o), Cache(dir, 1<<30)))
	assert.Len(t, listRequests(f), 1)

	warm := source(t, urls, Cache(dir, 1<<30)) // an Opener of its own
	readShards(t, warm)
	assert.Empty(t, f.requests(), "a warm cache: no request, the list included")
	assert.Zero(t, warm.StorageStats().Requests)

	// Shard 1 is made again with 30 samples and listed so; its cached
	// copy is gone (evicted, or removed by hand).
	paths, _ := writeShards(t, f.dir, 20, 30, 20)
	l, err := BuildIndex(context.Background(), nil, paths)
	require.NoError(t, err)
	list, err := json.Marshal(l)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "shardlist.json"), list, 0o644))
	k := key(urls[1])
	require.NoError(t, os.Remove(filepath.Join(dir, k)))
	require.NoError(t, os.Remove(filepath.Join(dir, k+".meta")))
	infos := readShards(t, source(t, urls, UseOpener(o), Cache(dir, 1<<30)))
	assert.Equal(t, 30, infos[1].Samples, "the list fetched again")
	assert.Len(t, listRequests(f), 1)

	infos = readShards(t, source(t, urls, UseOpener(o), Cache(dir, 1<<30)))
	assert.Equal(t, 30, infos[1].Samples, "the list kept is the new one")
	assert.Empty(t, f.requests())
}

// A shard list that does not exist is kept as such: a warm cache of
// shards without a list makes no request either, and a list required by
// IndexFile is asked for again when it was missing.
func TestCacheKeepsAMissingShardList(t *testing.T) {
	f, urls, _ := cacheServer(t, 10, 10)
	require.NoError(t, os.Remove(filepath.Join(f.dir, "shardlist.json")))
	dir := t.TempDir()
	o := fastOpener()
	defer o.CloseIdleConnections()
	readShards(t, source(t, urls, UseOpener(o), Cache(dir, 1<<30)))
	assert.Equal(t, []string{"/shardlist.json "}, listRequests(f))
	infos := readShards(t, source(t, urls, UseOpener(o), Cache(dir, 1<<30)))
	assert.Equal(t, 10, infos[1].Samples, "counted from the cached shard")
	assert.Empty(t, f.requests())

	_, err := source(t, urls, UseOpener(o), Cache(dir, 1<<30), IndexFile(f.URL+"/shardlist.json")).Shards(context.Background())
	assert.ErrorContains(t, err, "shardlist.json: not found")
	assert.Len(t, listRequests(f), 1, "a required list is asked for")
}

// An HTTP folder's shardlist.json, which names its shards and gives
// their counts, is read once by New (it used to be read again by
// Shards), and not at all with a warm cache.
func TestCacheHTTPFolderReadsItsListOnce(t *testing.T) {
	f, _, _ := cacheServer(t, 10, 10)
	dir := t.TempDir()
	for _, warm := range []bool{false, true} {
		o := fastOpener()
		src, err := New(context.Background(), f.URL+"/", testSchema, decodeTest, UseOpener(o), Cache(dir, 1<<30))
		require.NoError(t, err)
		infos := readShards(t, src)
		o.CloseIdleConnections()
		assert.Equal(t, 10, infos[1].Samples)
		reqs := listRequests(f)
		if warm {
			assert.Empty(t, reqs, "warm")
		} else {
			assert.Len(t, reqs, 1, "cold")
		}
	}
}

// Issue 38: objects with no MD5 (an HTTP server's, an S3 object put in
// parts or by hand) were cached unchecked without a word. Each such
// download is counted (StorageStats.Unverified, Report's
// "cache_unverified"), and one warning per store names it and its first
// shard; a store that gives the MD5 gets neither.
func TestCacheCountsUnverifiedDownloads(t *testing.T) {
	log := logs(t)
	f, urls, _ := cacheServer(t, 5, 5, 5)
	warnedUnverified.Delete(storeName(f.URL)) // an earlier server of this port
	o := fastOpener()
	defer o.CloseIdleConnections()
	src := source(t, urls, UseOpener(o), Cache(t.TempDir(), 1<<30), CacheReadAhead(0))
	readShards(t, src)
	assert.EqualValues(t, len(urls), src.StorageStats().Unverified)
	assert.EqualValues(t, len(urls), src.Report()["cache_unverified"])
	readShards(t, source(t, urls, UseOpener(o), Cache(t.TempDir(), 1<<30), CacheReadAhead(0)))
	mine := func() []string {
		var out []string
		for _, l := range strings.Split(log.String(), "\n") {
			if strings.Contains(l, "store="+f.URL+" ") {
				out = append(out, l)
			}
		}
		return out
	}
	warned := mine()
	require.Len(t, warned, 1, "once per store and process:\n%s", log)
	assert.Contains(t, warned[0], "shard="+urls[0])
	assert.Contains(t, warned[0], "no MD5")

	// A server that says each object's MD5 (as GCS does, x-goog-hash).
	files := http.FileServer(http.Dir(f.dir))
	withMD5 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if data, err := os.ReadFile(filepath.Join(f.dir, filepath.Base(r.URL.Path))); err == nil {
			sum := md5.Sum(data)
			w.Header().Set("X-Goog-Hash", "crc32c=AAAAAA==,md5="+base64.StdEncoding.EncodeToString(sum[:]))
		}
		files.ServeHTTP(w, r)
	}))
	defer withMD5.Close()
	var checked []string
	for _, u := range urls {
		checked = append(checked, withMD5.URL+u[len(f.URL):])
	}
	src = source(t, checked, UseOpener(o), Cache(t.TempDir(), 1<<30), CacheReadAhead(0))
	readShards(t, src)
	assert.Zero(t, src.StorageStats().Unverified)
	assert.NotContains(t, log.String(), "store="+withMD5.URL)
}

// unverifiedRuns numbers the runs of TestCacheCountsUnverifiedS3Objects.
var unverifiedRuns atomic.Int64

// The objects of an S3 bucket that have no MD5 (one put with no ETag, as
// versitygw's without metadata are; one uploaded in parts, whose ETag is
// not an MD5) are cached checked by size alone, counted, and warned of
// once, naming the bucket.
func TestCacheCountsUnverifiedS3Objects(t *testing.T) {
	want := []byte(strings.Repeat("shard bytes ", 1000))
	// A bucket of its own each run: the warning is once per store and
	// process, and go test -count=N runs in one process.
	bucket := fmt.Sprintf("unchecked%d", unverifiedRuns.Add(1))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		etag, ok := map[string]string{"/" + bucket + "/bare.tar": "", "/" + bucket + "/parts.tar": `"` + strings.Repeat("ab", 16) + `-3"`}[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if etag != "" {
			w.Header().Set("ETag", etag)
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(want))
	}))
	defer srv.Close()
	clearStoreEnv(t)
	for k, v := range map[string]string{"AWS_ENDPOINT_URL_S3": srv.URL, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"} {
		t.Setenv(k, v)
	}
	log := logs(t)
	o := &Opener{MaxRetries: -1}
	defer o.CloseIdleConnections()
	names := []string{"s3://" + bucket + "/bare.tar", "s3://" + bucket + "/parts.tar"}
	src := source(t, names, UseOpener(o), Cache(t.TempDir(), 1<<20), CacheReadAhead(0), IndexFile(""))
	for _, name := range names {
		assert.Equal(t, want, readShard(t, src, name))
	}
	require.NoError(t, src.Close())
	assert.EqualValues(t, 2, src.StorageStats().Unverified)
	assert.Equal(t, 1, strings.Count(log.String(), "store=s3://"+bucket+" "), log.String())
	assert.Contains(t, log.String(), "shard=s3://"+bucket+"/bare.tar")
}
