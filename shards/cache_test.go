package shards

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/s3test"
)

// cacheServer serves shards of counts samples over HTTP, with a
// shardlist.json, and returns the server, the shards' URLs and their
// bytes.
func cacheServer(t *testing.T, counts ...int) (*faultServer, []string, [][]byte) {
	f := newFaultServer(t)
	paths, _ := writeShards(t, f.dir, counts...)
	l, err := BuildIndex(context.Background(), nil, paths)
	require.NoError(t, err)
	list, err := json.Marshal(l)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "shardlist.json"), list, 0o644))
	var urls []string
	var data [][]byte
	for _, p := range paths {
		urls = append(urls, f.URL+"/"+filepath.Base(p))
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		data = append(data, b)
	}
	return f, urls, data
}

// shardRequests counts the server's requests for .tar files since the
// last call, and forgets them.
func shardRequests(f *faultServer) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.log {
		if strings.Contains(r, ".tar") {
			n++
		}
	}
	f.log = nil
	return n
}

// cachedFiles returns the names of the shards cached in dir, and their
// bytes (not the shard lists kept beside them).
func cachedFiles(t *testing.T, dir string) (names []string, size int64) {
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, de := range des {
		if isKey(de.Name()) && !strings.HasSuffix(de.Name(), "-shardlist.json") {
			fi, err := de.Info()
			require.NoError(t, err)
			names = append(names, de.Name())
			size += fi.Size()
		}
	}
	return names, size
}

// readShard reads shard name whole through the Source's cache.
func readShard(t *testing.T, s *Source, name string) []byte {
	t.Helper()
	rc, err := s.open(context.Background(), name)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return b
}

// epochs loads epochs 0 to n-1 of src and returns each one's bytes.
func epochs(t *testing.T, src engine.Iterable, n int) [][][]byte {
	sc := engine.IterableConfig{ShuffleBuffer: 10}
	d, err := engine.FromIterable(context.Background(), src, sc)
	require.NoError(t, err)
	l, err := engine.New(d, engine.Config{BatchSize: 8, Seed: 3, Workers: 2, Backend: "cpu"})
	require.NoError(t, err)
	defer l.Close()
	var out [][][]byte
	for e := range n {
		_, data, err := batches(t, l, e)
		require.NoError(t, err)
		out = append(out, data)
	}
	return out
}

// TestCacheLaterEpochsAndResumedJobsMakeNoRequests: epoch 0 downloads
// each shard once; epoch 1, and a new Source on the same folder (a
// resumed job), make no request for a shard, and every epoch is
// byte-identical to a local run.
func TestCacheLaterEpochsAndResumedJobsMakeNoRequests(t *testing.T) {
	f, urls, _ := cacheServer(t, 30, 25, 40, 5)
	local, err := FromNames(func() (p []string) {
		for _, u := range urls {
			p = append(p, filepath.Join(f.dir, filepath.Base(u)))
		}
		return p
	}(), testSchema, decodeTest)
	require.NoError(t, err)
	want := epochs(t, local, 2)
	dir := t.TempDir()

	o := fastOpener()
	defer o.CloseIdleConnections()
	src, err := FromNames(urls, testSchema, decodeTest, UseOpener(o), Cache(dir, 1<<30))
	require.NoError(t, err)
	defer src.Close()
	d, err := engine.FromIterable(context.Background(), src, engine.IterableConfig{ShuffleBuffer: 10})
	require.NoError(t, err)
	assert.Equal(t, len(urls), shardRequests(f), "listing: one request per shard, for its size")
	l, err := engine.New(d, engine.Config{BatchSize: 8, Seed: 3, Workers: 2, Backend: "cpu"})
	require.NoError(t, err)
	defer l.Close()
	_, got0, err := batches(t, l, 0)
	require.NoError(t, err)
	require.NoError(t, src.Close()) // the read-ahead of shard 0 after the last
	assert.Equal(t, len(urls), shardRequests(f), "epoch 0: one download per shard")
	_, got1, err := batches(t, l, 1)
	require.NoError(t, err)
	assert.Zero(t, shardRequests(f), "epoch 1 reads the cache")
	assert.Equal(t, want, [][][]byte{got0, got1})
	st := src.StorageStats()
	assert.Equal(t, int64(2*len(urls)), st.Hits+st.Misses)
	assert.Positive(t, st.Hits)
	assert.Positive(t, st.BytesFetched)
	assert.Zero(t, st.Evictions)
	assert.Equal(t, src.Report(), l.Stats().Dataset, "the loader reports the source's counts")
	assert.Contains(t, l.Stats().String(), fmt.Sprintf("cache_hits %d, cache_misses %d", st.Hits, st.Misses))
	names, _ := cachedFiles(t, dir)
	assert.Len(t, names, len(urls))

	// A resumed job: a new process, with the same folder.
	o2 := fastOpener()
	defer o2.CloseIdleConnections()
	again, err := FromNames(urls, testSchema, decodeTest, UseOpener(o2), Cache(dir, 1<<30))
	require.NoError(t, err)
	defer again.Close()
	assert.Equal(t, want, epochs(t, again, 2))
	assert.Empty(t, f.requests(), "a resumed job reads the cache, its shard list included: no request")
	assert.Equal(t, StorageStats{Hits: 2 * int64(len(urls))}, again.StorageStats())
}

// TestCacheFirstRecordBeforeTheDownloadEnds: a reader reads the file as
// it grows; Close cancels the download, and the reader reads the rest
// from the server.
func TestCacheFirstRecordBeforeTheDownloadEnds(t *testing.T) {
	f, urls, _ := cacheServer(t, 2000)
	// The server sees two requests for the shard from its start (the
	// cache's download and one more, in an order that varies); both stall
	// at 1 MiB, so that the download is cut short whichever it is. With
	// one stall the other request took it in about one run of three, the
	// download finished before Close and was cached, and the test failed.
	f.inject(func(f *faultServer) { f.stalls, f.stallAt, f.stallFor = 2, 1<<20, time.Minute })
	o := fastOpener()
	o.Timeout = 2 * time.Minute
	defer o.CloseIdleConnections()
	src, err := FromNames(urls, testSchema, decodeTest, UseOpener(o), Cache(t.TempDir(), 1<<30), IndexFile(f.URL+"/shardlist.json"))
	require.NoError(t, err)
	infos, err := src.Shards(context.Background())
	require.NoError(t, err)
	t0 := time.Now()
	r, err := src.Open(context.Background(), infos[0])
	require.NoError(t, err)
	rec, err := r.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "s000000", rec.Key)
	assert.Less(t, time.Since(t0), 20*time.Second, "not the minute the download stalls for")
	t0 = time.Now()
	require.NoError(t, src.Close())
	assert.Less(t, time.Since(t0), 20*time.Second, "Close cancels the stalled download")
	names, _ := cachedFiles(t, src.o.cacheDir)
	assert.Empty(t, names, "a download cut short is not cached")
	// The reader goes on from the server where the file stopped.
	n := 1
	for ; ; n++ {
		rec, err := r.Next(context.Background())
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("s%06d", n), rec.Key)
	}
	assert.Equal(t, 2000, n)
	require.NoError(t, r.Close())
	reqs := f.requests()
	require.Len(t, reqs, 4, "%q", reqs)
	assert.Regexp(t, `^/train-0000.tar bytes=\d+-$`, reqs[3], "the rest, after the bytes in the file")
}

// TestCacheSharedByGoroutines: Sources with Openers of their own, as
// processes would be, read the same shards at once through one folder;
// the server sees one download per shard.
func TestCacheSharedByGoroutines(t *testing.T) {
	f, urls, data := cacheServer(t, 300, 200, 400, 100, 250, 50)
	dir := t.TempDir()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			o := fastOpener()
			defer o.CloseIdleConnections()
			src, err := FromNames(urls, testSchema, decodeTest, UseOpener(o), Cache(dir, 1<<30))
			assert.NoError(t, err)
			defer src.Close()
			for i := range urls {
				if g%2 == 1 {
					i = len(urls) - 1 - i
				}
				rc, err := src.open(context.Background(), urls[i])
				if !assert.NoError(t, err) {
					return
				}
				b, err := io.ReadAll(rc)
				rc.Close()
				assert.NoError(t, err)
				assert.True(t, bytes.Equal(data[i], b), "source %d, shard %d", g, i)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, len(urls), shardRequests(f), "one download per shard")
}

// TestCacheSharedByProcesses runs two processes (this test binary again)
// that read the same shards through one folder at once: the server sees
// one download per shard.
func TestCacheSharedByProcesses(t *testing.T) {
	if dir := os.Getenv("TB_CACHE_CHILD_DIR"); dir != "" {
		urls := strings.Fields(os.Getenv("TB_CACHE_CHILD_URLS"))
		o := fastOpener()
		defer o.CloseIdleConnections()
		src, err := FromNames(urls, testSchema, decodeTest, UseOpener(o), Cache(dir, 1<<30))
		require.NoError(t, err)
		defer src.Close()
		for _, u := range urls {
			b := readShard(t, src, u)
			fmt.Printf("%s %d\n", u, len(b))
		}
		return
	}
	f, urls, data := cacheServer(t, 300, 200, 400, 100, 250, 50)
	dir := t.TempDir()
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for p := range 2 {
		order := append([]string(nil), urls...)
		if p == 1 {
			for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
				order[i], order[j] = order[j], order[i]
			}
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestCacheSharedByProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), "TB_CACHE_CHILD_DIR="+dir, "TB_CACHE_CHILD_URLS="+strings.Join(order, " "))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	for i, cmd := range cmds {
		assert.NoError(t, cmd.Wait(), "process %d:\n%s", i, outs[i])
		for j, u := range urls {
			assert.Contains(t, outs[i].String(), fmt.Sprintf("%s %d\n", u, len(data[j])), "process %d", i)
		}
	}
	assert.Equal(t, len(urls), shardRequests(f), "one download per shard on the node")
}

// TestCacheEvictsLeastRecentlyUsed keeps the bytes within the limit,
// removing the shard used longest ago, never one being read.
func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	f, urls, data := cacheServer(t, 100, 100, 100, 100)
	size, least := int64(0), int64(len(data[0]))
	for _, d := range data {
		size, least = max(size, int64(len(d))), min(least, int64(len(d)))
	}
	require.Greater(t, 3*least, 2*size+size/2, "three shards do not fit")
	dir := t.TempDir()
	o := fastOpener()
	defer o.CloseIdleConnections()
	src, err := FromNames(urls, testSchema, decodeTest, UseOpener(o), Cache(dir, 2*size+size/2), CacheReadAhead(0))
	require.NoError(t, err)
	defer src.Close()
	name := func(i int) string { return key(urls[i]) }
	for i := range 2 {
		assert.Equal(t, data[i], readShard(t, src, urls[i]))
		time.Sleep(20 * time.Millisecond) // mtimes apart
	}
	assert.Equal(t, data[0], readShard(t, src, urls[0])) // 0 is now the most recent
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, data[2], readShard(t, src, urls[2]))
	names, total := cachedFiles(t, dir)
	assert.ElementsMatch(t, []string{name(0), name(2)}, names, "shard 1 was used longest ago")
	assert.LessOrEqual(t, total, 2*size+size/2)
	assert.EqualValues(t, 1, src.StorageStats().Evictions)

	// Shard 0, the least recent now, is being read: shard 2 goes instead.
	time.Sleep(20 * time.Millisecond)
	rc, err := src.open(context.Background(), urls[0])
	require.NoError(t, err)
	require.NoError(t, os.Chtimes(filepath.Join(dir, name(0)), time.Unix(1, 0), time.Unix(1, 0)))
	shardRequests(f)
	assert.Equal(t, data[3], readShard(t, src, urls[3]))
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	assert.Equal(t, data[0], b)
	rc.Close()
	names, total = cachedFiles(t, dir)
	assert.ElementsMatch(t, []string{name(0), name(3)}, names)
	assert.LessOrEqual(t, total, 2*size+size/2)
	assert.Equal(t, 1, shardRequests(f))

	// A shard larger than the limit is streamed, not kept.
	small, err := FromNames(urls, testSchema, decodeTest, UseOpener(o), Cache(t.TempDir(), least-1), CacheReadAhead(0))
	require.NoError(t, err)
	defer small.Close()
	assert.Equal(t, data[1], readShard(t, small, urls[1]))
	names, _ = cachedFiles(t, small.o.cacheDir)
	assert.Empty(t, names)
}

// TestCacheReadAhead fetches the next shard while one is read; the open
// of that shard then makes no request.
func TestCacheReadAhead(t *testing.T) {
	f, urls, data := cacheServer(t, 50, 50, 50)
	dir := t.TempDir()
	o := fastOpener()
	defer o.CloseIdleConnections()
	src, err := FromNames(urls, testSchema, decodeTest, UseOpener(o), Cache(dir, 1<<30), CacheReadAhead(1))
	require.NoError(t, err)
	defer src.Close()
	assert.Equal(t, data[0], readShard(t, src, urls[0]))
	require.Eventually(t, func() bool { _, ok := src.cache.cachedSize(urls[1]); return ok }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, 2, shardRequests(f))
	_, ok := src.cache.cachedSize(urls[2])
	assert.False(t, ok, "one shard ahead")
	assert.Equal(t, data[1], readShard(t, src, urls[1]))
	n := 0 // the read-ahead of shard 2 runs in the background: wait for its request
	require.Eventually(t, func() bool { n += shardRequests(f); return n >= 1 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, src.Close())
	assert.Equal(t, 1, n+shardRequests(f), "shard 1 came from the cache; shard 2 was read ahead")
	st := src.StorageStats()
	assert.EqualValues(t, 2, st.ReadAheads)
	assert.EqualValues(t, 1, st.Hits)
}

// logs captures the warnings of slog's default logger during the test.
func logs(t *testing.T) *s3test.Log {
	var log s3test.Log
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&log, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	return &log
}

// TestCacheUnwritableFolderStreams: a folder that cannot be made (a path
// under a regular file: root cannot either) streams, with one warning.
func TestCacheUnwritableFolderStreams(t *testing.T) {
	_, urls, data := cacheServer(t, 20, 20)
	log := logs(t)
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	o := fastOpener()
	defer o.CloseIdleConnections()
	src, err := FromNames(urls, testSchema, decodeTest, UseOpener(o), Cache(filepath.Join(file, "sub"), 1<<30))
	require.NoError(t, err)
	defer src.Close()
	for range 2 {
		for i, u := range urls {
			assert.Equal(t, data[i], readShard(t, src, u))
		}
	}
	assert.Equal(t, 1, strings.Count(log.String(), "cache off"), log.String())
	assert.Contains(t, log.String(), "not a directory")
	assert.EqualValues(t, 4, src.StorageStats().Misses)
}

// TestCacheFullDiskStreams: a write that fails with ENOSPC in the middle
// of a shard removes its temp file; the read completes from the server,
// byte for byte, with one warning, and later reads stream.
func TestCacheFullDiskStreams(t *testing.T) {
	f, urls, data := cacheServer(t, 2000, 20)
	log := logs(t)
	var written int64
	var mu sync.Mutex
	old := cacheWrite
	cacheWrite = func(w *os.File, p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if written+int64(len(p)) > 1<<20 {
			n, _ := w.Write(p[:1<<20-written])
			written += int64(n)
			return n, &os.PathError{Op: "write", Path: w.Name(), Err: syscall.ENOSPC}
		}
		written += int64(len(p))
		return w.Write(p)
	}
	t.Cleanup(func() { cacheWrite = old })
	dir := t.TempDir()
	o := fastOpener()
	defer o.CloseIdleConnections()
	src, err := FromNames(urls, testSchema, decodeTest, UseOpener(o), Cache(dir, 1<<30), CacheReadAhead(0))
	require.NoError(t, err)
	defer src.Close()
	assert.Equal(t, data[0], readShard(t, src, urls[0]))
	assert.Equal(t, data[1], readShard(t, src, urls[1]))
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, de := range des {
		assert.True(t, strings.HasSuffix(de.Name(), ".lock"), "only lock files are left: %s", de.Name())
	}
	assert.Equal(t, 1, strings.Count(log.String(), "cache off"), log.String())
	assert.Contains(t, log.String(), "no space left on device")
	reqs := f.requests()
	assert.Contains(t, reqs, "/train-0001.tar ", "streamed")
	assert.Len(t, reqs, 3, "the download, the rest of shard 0 from where the file stopped, shard 1: %q", reqs)
}

// TestCacheIgnoresCrashLeftovers: a temp file a crashed download left is
// removed; a cached file that disagrees with its .meta is downloaded
// again, never served.
func TestCacheIgnoresCrashLeftovers(t *testing.T) {
	f, urls, data := cacheServer(t, 20, 20)
	dir := t.TempDir()
	k0, k1 := key(urls[0]), key(urls[1])
	require.NoError(t, os.WriteFile(filepath.Join(dir, k0+".part-123"), data[0][:1000], 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, k0+".meta.part-9"), []byte("{"), 0o644))
	// Shard 1's file is cut short, its .meta whole (a half copy by hand).
	require.NoError(t, os.WriteFile(filepath.Join(dir, k1), data[1][:1000], 0o644))
	meta, err := json.Marshal(entryMeta{URL: urls[1], Size: int64(len(data[1]))})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, k1+".meta"), meta, 0o644))
	// A file of the user's is none of the cache's business.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644))

	o := fastOpener()
	defer o.CloseIdleConnections()
	src, err := FromNames(urls, testSchema, decodeTest, UseOpener(o), Cache(dir, int64(len(data[0])+len(data[1]))), CacheReadAhead(0))
	require.NoError(t, err)
	defer src.Close()
	assert.Equal(t, data[0], readShard(t, src, urls[0]))
	assert.Equal(t, data[1], readShard(t, src, urls[1]))
	assert.Equal(t, 2, shardRequests(f))
	assert.NoFileExists(t, filepath.Join(dir, k0+".part-123"))
	assert.NoFileExists(t, filepath.Join(dir, k0+".meta.part-9"))
	assert.FileExists(t, filepath.Join(dir, "notes.txt"))
	names, _ := cachedFiles(t, dir)
	assert.ElementsMatch(t, []string{k0, k1}, names)
	assert.Equal(t, data[1], readShard(t, src, urls[1]))
	assert.Zero(t, shardRequests(f))
}

func TestCacheOptionErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		opt  []Option
		want string
	}{
		{[]Option{Cache("", 1)}, "shards: Cache: no folder"},
		{[]Option{Cache("x", 0)}, "shards: Cache: limit 0 bytes, want > 0"},
		{[]Option{Cache("x", 1), CacheReadAhead(-1)}, "shards: CacheReadAhead: -1, want >= 0"},
	} {
		_, err := FromNames([]string{"http://h/a.tar"}, testSchema, decodeTest, tc.opt...)
		assert.EqualError(t, err, tc.want)
	}
}

// TestCacheDropsAShardOfAnotherSizeThanListed: a shard list's filesize is
// the one staleness check that costs no request.
func TestCacheDropsAShardOfAnotherSizeThanListed(t *testing.T) {
	f, urls, data := cacheServer(t, 20, 20)
	dir := t.TempDir()
	o := fastOpener()
	defer o.CloseIdleConnections()
	src, err := FromNames(urls, testSchema, decodeTest, UseOpener(o), Cache(dir, 1<<30), CacheReadAhead(0))
	require.NoError(t, err)
	defer src.Close()
	for i, u := range urls {
		assert.Equal(t, data[i], readShard(t, src, u))
	}
	// Shard 1 is made again, with 30 samples, and listed again.
	paths, _ := writeShards(t, f.dir, 20, 30)
	l, err := BuildIndex(context.Background(), nil, paths)
	require.NoError(t, err)
	list, err := json.Marshal(l)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "shardlist.json"), list, 0o644))
	want, err := os.ReadFile(paths[1])
	require.NoError(t, err)
	shardRequests(f)

	again, err := FromNames(urls, testSchema, decodeTest, UseOpener(o), Cache(dir, 1<<30), CacheReadAhead(0))
	require.NoError(t, err)
	defer again.Close()
	infos, err := again.Shards(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 30, infos[1].Samples)
	assert.Equal(t, 1, shardRequests(f), "shard 0 is cached and its size agrees; shard 1's size is asked")
	assert.Equal(t, data[0], readShard(t, again, urls[0]))
	assert.Equal(t, want, readShard(t, again, urls[1]))
	assert.Equal(t, 1, shardRequests(f), "shard 1 downloaded again")
}

// TestCacheShardRemovedBehindTheSourceIsFetchedAgain: the Source
// remembers the shards it found whole; when their files are removed from
// outside (another process's eviction, a person invalidating one), its
// next open downloads the shard again instead of trusting the memory.
func TestCacheShardRemovedBehindTheSourceIsFetchedAgain(t *testing.T) {
	f, urls, data := cacheServer(t, 10, 12)
	dir := t.TempDir()
	o := fastOpener()
	defer o.CloseIdleConnections()
	src, err := FromNames(urls, testSchema, decodeTest, UseOpener(o), Cache(dir, 1<<30), CacheReadAhead(0))
	require.NoError(t, err)
	defer src.Close()
	assert.Equal(t, data[0], readShard(t, src, urls[0]))
	require.NoError(t, src.Close()) // waits for the download
	shardRequests(f)
	assert.Equal(t, data[0], readShard(t, src, urls[0]))
	assert.Zero(t, shardRequests(f), "read from the cache")

	k := key(urls[0])
	for _, ext := range []string{"", ".meta"} {
		require.NoError(t, os.Remove(filepath.Join(dir, k+ext)))
	}
	assert.Equal(t, data[0], readShard(t, src, urls[0]))
	assert.Equal(t, 1, shardRequests(f), "removed: read from the server")
	_, ok := src.cache.cachedSize(urls[0])
	assert.False(t, ok, "a closed Source streams, caching nothing")

	// A file of another size at the key is not the shard found before.
	src2, err := FromNames(urls, testSchema, decodeTest, UseOpener(o), Cache(dir, 1<<30), CacheReadAhead(0))
	require.NoError(t, err)
	defer src2.Close()
	assert.Equal(t, data[1], readShard(t, src2, urls[1]))
	require.NoError(t, src2.Close())
	size, ok := src2.cache.cachedSize(urls[1])
	require.True(t, ok)
	require.EqualValues(t, len(data[1]), size)
	k = key(urls[1])
	require.NoError(t, os.WriteFile(filepath.Join(dir, k), data[1][:len(data[1])/2], 0o644))
	_, ok = src2.cache.cachedSize(urls[1])
	assert.False(t, ok, "the size differs from the .meta's")
}

// TestCacheReadAheadFollowsTheRanksOrder: with shuffled shards and two
// ranks, the read-ahead fetches the shards rank 0 opens next, in the
// epoch's order (the engine tells the Source: engine.Prefetcher), and
// none of rank 1's.
func TestCacheReadAheadFollowsTheRanksOrder(t *testing.T) {
	const shards, per = 8, 20
	f, urls, _ := cacheServer(t, slices.Repeat([]int{per}, shards)...)
	shardRequests(f)
	o := fastOpener()
	defer o.CloseIdleConnections()
	src, err := FromNames(urls, testSchema, decodeTest, UseOpener(o), Cache(t.TempDir(), 1<<30), CacheReadAhead(2))
	require.NoError(t, err)
	defer src.Close()
	d, err := engine.FromIterable(context.Background(), src, engine.IterableConfig{ShuffleShards: true})
	require.NoError(t, err)
	shardRequests(f) // the listing's
	for epoch := range 2 {
		ids, _, _, err := load(t, d, engine.Config{BatchSize: 5, Seed: 11, Workers: 2, Rank: 0, WorldSize: 2}, epoch)
		require.NoError(t, err)
		mine := map[string]bool{}
		for _, id := range flat(ids) {
			mine[fmt.Sprintf("/train-%04d.tar", id/per)] = true
		}
		require.Len(t, mine, shards/2)
		f.mu.Lock()
		for _, r := range f.log {
			if path, _, _ := strings.Cut(r, " "); strings.HasSuffix(path, ".tar") {
				assert.True(t, mine[path], "epoch %d: %s is rank 1's, fetched by rank 0", epoch, path)
			}
		}
		f.log = nil
		f.mu.Unlock()
	}
	require.NoError(t, src.Close())
	st := src.StorageStats()
	assert.Positive(t, st.ReadAheads)
	assert.Positive(t, st.Hits, "shards read ahead are opened from the cache")
}

// A shard whose download has committed its file but not yet ended is
// counted once, by its reservation, not again as a file: a download that
// starts in that window finds its room (it was streamed, uncached, and
// TestCacheIgnoresCrashLeftovers failed now and then).
func TestCacheCountsACommittedDownloadOnce(t *testing.T) {
	dir := t.TempDir()
	c := newCache(dir, 300, 0, &Opener{})
	defer c.close()
	k0 := key("http://h/a.tar")
	require.NoError(t, os.WriteFile(filepath.Join(dir, k0), make([]byte, 200), 0o644))
	c.downloads[k0] = &download{} // committed, not yet ended
	c.reserved = 200
	assert.True(t, c.reserve(100), "room: 200 bytes of a.tar (once) and 100 more fit in 300")
	assert.FileExists(t, filepath.Join(dir, k0), "nothing evicted")
	assert.Zero(t, c.evictions.Load())
}
