package shards

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tensorbatch/tensorbatch/internal/regfile"
)

// DefaultCacheReadAhead is how many shards after the one opened a
// cached Source fetches ahead of use, unless CacheReadAhead says.
const DefaultCacheReadAhead = 2

// Cache keeps the remote shards a Source reads (http://, https://,
// s3://, gs://, az://) in the folder dir, within limit bytes, so that
// later epochs and a resumed job (a new process given the same dir) read
// them from local disk with no request to the server. Local shards are
// read in place. Tar and Parquet shards alike: a cached Parquet file is
// read in place (its row groups by offset), not into memory.
//
// No request: a Source whose remote shards are all in dir lists,
// counts, identifies (see Source.Fingerprint) and reads them with none.
// The shard list (shardlist.json beside the shards, an IndexFile, an
// HTTP folder's list) is kept in dir too, by its URL, as is the answer
// that there is none; the copy is read instead of the server's only
// while every shard of the Source is in dir, so that the counts it gives
// are those of the copies read. When a shard is not (a first job, one
// evicted, a shard added), the list is fetched again, and the copy
// replaced: the shards downloaded then are counted by the server's list.
// The trade-off: a list changed on the server is not seen while every
// shard is cached, just as a changed shard is not (see Trust). The names
// of a folder of an object store ("s3://bucket/train/") are listed by
// New, a request or more, cache or not: name the shards by a pattern
// ("train-{0000..0099}.tar") for none.
//
// A shard is written to dir as it downloads, and its readers read the
// file as it grows: the first record does not wait for the whole shard.
// The download goes on to the end when its reader stops early (another
// rank's span, the next epoch). It is written to a temp file and renamed
// to its name only after its size, and its MD5 where the store says one
// (S3's ETag of a shard uploaded in one part, GCS's x-goog-hash, Azure's
// Content-MD5), match what the server said; a temp file left by a crash
// is removed the next time a Source opens dir. Where the store says no
// MD5 (an HTTP server, an S3 object uploaded in parts or put with no
// checksum), only the size is checked: each such download is counted
// (StorageStats.Unverified, "cache_unverified"), and the first of each
// store is logged, once per process (log/slog, a warning naming the
// store and the shard). A cached
// shard is named by a hash of its URL followed by its base name
// ("3f2a...-train-0001.tar"); a ".meta" file beside it holds its URL,
// size and ETag, and a ".lock" file serializes its download.
//
// Bytes: the shards in dir take at most limit bytes, plus the shards
// being downloaded, so dir holds at most limit + D × the largest shard,
// where D is the downloads in flight on the node (the shards being read
// for the first time, plus CacheReadAhead per process). To make room, the
// least recently used shards are removed (a read sets a shard's mtime),
// never one being read from dir. (A process reading a shard from its own
// download holds no lock on it: another process may remove the file,
// which unix keeps for the reader until it closes it.) A shard larger
// than limit, or whose size the server does not say, is streamed, not
// kept.
//
// Processes: the processes of a node (ranks, jobs) may share dir. A
// shard is downloaded once per node: its downloader holds an exclusive
// lock on its lock file (flock), the others wait for the lock and read
// the file, and a reader holds a shared lock that keeps other processes
// from evicting the shard. On Windows there is no cross-process lock: give
// each process its own dir there.
//
// Trust: the cache is trusted for as long as it exists, as Mosaic
// Streaming's is: a shard found in dir is not checked against the server,
// so a shard replaced on the server under the same URL is read from the
// cache until its file is removed. (A resumed job's state records what
// the cache serves, its version at download: Source.Fingerprint.) The
// one check that costs no request: a shard list that gives a shard's
// size (filesize, as BuildIndex writes for local shards) drops a
// cached copy of another size when the Source lists its shards. To
// invalidate, remove dir (or the files of a shard, "*-<base name>*", or
// of the list, "*-shardlist.json*") between jobs; a shard's size and
// ETag at download are in its .meta file.
//
// Faults: when dir cannot be made or written (a read-only or missing
// mount, a full disk), the Source logs one warning (log/slog) and
// streams from then on; a temp file cut short is removed, never renamed,
// and the reads in progress complete from the server.
//
// Read-ahead: as a rank's reader opens a shard, the next CacheReadAhead
// shards it opens this epoch are fetched into dir in the background, if
// not there already: the epoch's order, shuffled or not, and the rank's
// span only (the engine says it, see Source.Prefetch). A Source whose
// Open is called without the engine fetches the next shards of its list
// (wrapping around) instead.
// Close the Source to cancel the downloads in flight.
//
// Source.StorageStats (and a loader's Stats.Dataset) counts the
// requests, bytes, hits, misses, evictions and unverified downloads.
func Cache(dir string, limit int64) Option {
	return func(o *options) { o.cacheDir, o.cacheLimit, o.cacheSet = dir, limit, true }
}

// CacheReadAhead sets the shards fetched into the cache ahead of use (see
// Cache): DefaultCacheReadAhead by default, 0 for none.
func CacheReadAhead(n int) Option {
	return func(o *options) { o.readAhead, o.readAheadSet = n, true }
}

// cacheWrite writes a downloaded chunk to its temp file; tests swap it to
// inject faults (a full disk).
var cacheWrite = func(f *os.File, p []byte) (int, error) { return f.Write(p) }

// cache is a Source's view of a cache folder.
type cache struct {
	dir   string
	limit int64
	ahead int
	o     *Opener

	ctx    context.Context // of the downloads, cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	setup  sync.Once

	mu        sync.Mutex
	off       error                // why the cache is off; nil while on
	closed    bool                 //
	downloads map[string]*download // in flight, by key
	inUse     map[string]int       // readers of each key
	reserved  int64                // bytes of the downloads in flight
	aheadNow  int                  // read-ahead downloads in flight

	hits, misses, readAheads, evictions, unverified atomic.Int64

	// whole remembers the shards complete found whole and those this
	// cache downloaded, by key, so that the opens of later epochs find
	// them with a stat instead of reading and parsing .meta again, and
	// their read-ahead checks with none. A file is put at a key only by
	// renaming a verified download to it, so one there with the size
	// remembered is the whole shard.
	wholeMu sync.Mutex
	whole   map[string]wholeEntry
}

// wholeEntry is a shard known whole.
type wholeEntry struct {
	name    string
	size    int64
	version string // its ETag (else Last-Modified) at download
}

func newCache(dir string, limit int64, ahead int, o *Opener) *cache {
	ctx, cancel := context.WithCancel(context.Background())
	return &cache{dir: dir, limit: limit, ahead: ahead, o: o, ctx: ctx, cancel: cancel,
		downloads: map[string]*download{}, inUse: map[string]int{}, whole: map[string]wholeEntry{}}
}

// close cancels the downloads in flight and waits for them.
func (c *cache) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// disable turns the cache off for good, with a warning.
func (c *cache) disable(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off == nil {
		c.off = err
		slog.Warn("shards: local shard cache off, streaming instead", "dir", c.dir, "err", err)
	}
}

func (c *cache) isOff() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.off != nil
}

// ready makes dir and removes the temp files that crashed downloads left,
// once.
func (c *cache) ready() {
	c.setup.Do(func() {
		if err := os.MkdirAll(c.dir, 0o755); err != nil {
			c.disable(err)
			return
		}
		ents, err := os.ReadDir(c.dir)
		if err != nil {
			c.disable(err)
			return
		}
		for _, e := range ents {
			key, _, ok := strings.Cut(e.Name(), ".part-")
			if !ok {
				continue
			}
			key = strings.TrimSuffix(key, ".meta")
			// A download in flight holds its lock; a crashed one does not.
			lk, err := openLock(c.path(key) + ".lock")
			if err != nil {
				c.disable(err)
				return
			}
			if lk.try(true) {
				os.Remove(filepath.Join(c.dir, e.Name()))
			}
			lk.close()
		}
	})
}

// key names the cached copy of shard name: a hash of the URL, for
// uniqueness, then its base name, for people.
func key(name string) string {
	sum := sha256.Sum256([]byte(name))
	base := name[strings.LastIndexByte(name, '/')+1:]
	base = strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, base)
	if len(base) > 100 {
		base = base[len(base)-100:]
	}
	return hex.EncodeToString(sum[:8]) + "-" + base
}

// isKey reports whether n is the name of a cached shard: a key, no
// suffix of ours. Other files in the folder are not the cache's.
func isKey(n string) bool {
	if len(n) < 18 || n[16] != '-' || strings.Contains(n, ".part-") || strings.HasSuffix(n, ".meta") || strings.HasSuffix(n, ".lock") {
		return false
	}
	_, err := hex.DecodeString(n[:16])
	return err == nil
}

func (c *cache) path(key string) string { return filepath.Join(c.dir, key) }

// entryMeta is the .meta file of a cached shard, or of a shard list.
type entryMeta struct {
	URL  string `json:"url"`
	Size int64  `json:"size"`
	ETag string `json:"etag,omitempty"`
	// Absent: the file is a shard list's, which did not exist (see
	// cachedList).
	Absent bool `json:"absent,omitempty"`
}

// complete returns the .meta of the cached copy of name, if whole: its
// file and .meta exist, are regular files (a .meta replaced by a FIFO or
// a link to a device is refused unread: the shard downloads again) and
// agree; or, for a shard found whole before, its file exists with the
// size it had then.
func (c *cache) complete(k, name string) (entryMeta, bool) {
	c.wholeMu.Lock()
	w, ok := c.whole[k]
	c.wholeMu.Unlock()
	if ok && w.name == name {
		if fi, err := os.Stat(c.path(k)); err == nil && fi.Size() == w.size && fi.Mode().IsRegular() {
			return entryMeta{URL: name, Size: w.size, ETag: w.version}, true
		}
		c.forget(k)
	}
	data, err := regfile.ReadFile(c.path(k)+".meta", maxMetaBytes)
	if err != nil {
		return entryMeta{}, false
	}
	var m entryMeta
	if json.Unmarshal(data, &m) != nil || m.URL != name {
		return entryMeta{}, false
	}
	fi, err := os.Stat(c.path(k))
	if err != nil || fi.Size() != m.Size || !fi.Mode().IsRegular() {
		return entryMeta{}, false
	}
	if !m.Absent {
		c.remember(k, name, m.Size, m.ETag)
	}
	return m, true
}

// remember notes that the file at key k is shard name whole, of size
// bytes and the version it had at download: complete found it so, or
// its download was just renamed to it.
func (c *cache) remember(k, name string, size int64, version string) {
	c.wholeMu.Lock()
	c.whole[k] = wholeEntry{name, size, version}
	c.wholeMu.Unlock()
}

// knownWhole reports whether shard name is known whole, with no
// system call: read-ahead, which runs at every open, trusts it.
// (Were the shard removed since by another process, its next open
// downloads it.)
func (c *cache) knownWhole(k, name string) bool {
	c.wholeMu.Lock()
	defer c.wholeMu.Unlock()
	w, ok := c.whole[k]
	return ok && w.name == name
}

// forget drops what complete remembers of key k: before its files are
// removed or replaced.
func (c *cache) forget(k string) {
	c.wholeMu.Lock()
	delete(c.whole, k)
	c.wholeMu.Unlock()
}

// cachedSize returns the size of the cached copy of name, if any, with
// no request.
func (c *cache) cachedSize(name string) (int64, bool) {
	m, ok := c.cached(name)
	return m.Size, ok
}

// cached returns the .meta of the cached copy of name, if any, with no
// request.
func (c *cache) cached(name string) (entryMeta, bool) {
	c.ready()
	if c.isOff() {
		return entryMeta{}, false
	}
	m, ok := c.complete(key(name), name)
	return m, ok && !m.Absent
}

// dropStale removes the cached copy of name if its size is not size (a
// shard list's filesize), unless it is being read or downloaded.
func (c *cache) dropStale(name string, size int64) {
	k := key(name)
	if got, ok := c.cachedSize(name); !ok || got == size {
		return
	}
	lk, err := openLock(c.path(k) + ".lock")
	if err != nil {
		return
	}
	defer lk.close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inUse[k] > 0 || c.downloads[k] != nil || !lk.try(true) {
		return
	}
	if got, ok := c.complete(k, name); ok && got.Size != size {
		c.forget(k)
		os.Remove(c.path(k) + ".meta")
		os.Remove(c.path(k))
		slog.Info("shards: cached shard is stale: its size differs from the shard list's", "shard", name, "cached", got.Size, "listed", size)
	}
}

// open returns a reader of the remote shard name: its cached copy, a
// download's file as it grows, or, with the cache off, the server's.
func (c *cache) open(ctx context.Context, name string) (io.ReadCloser, error) {
	c.ready()
	k := key(name)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		c.mu.Lock()
		off, d := c.off != nil, c.downloads[k]
		c.mu.Unlock()
		switch {
		case off:
			c.misses.Add(1)
			return c.o.Open(ctx, name)
		case d != nil:
			c.hits.Add(1)
			return d.follow(ctx)
		}
		lk, err := openLock(c.path(k) + ".lock")
		if err != nil {
			c.disable(err)
			continue
		}
		if lk.try(false) {
			if m, ok := c.complete(k, name); ok {
				if f, err := regfile.Open(c.path(k)); err == nil {
					c.hits.Add(1)
					now := time.Now()
					os.Chtimes(c.path(k), now, now) // for LRU
					r := c.use(k, f, lk)
					r.size, r.version = m.Size, m.ETag
					return r, nil
				}
			}
			lk.unlock()
		}
		if lk.try(true) {
			if _, ok := c.complete(k, name); ok { // downloaded meanwhile
				lk.close()
				continue
			}
			c.misses.Add(1)
			if d := c.start(name, k, lk, false); d != nil {
				return d.follow(ctx)
			}
			return c.o.Open(ctx, name) // closed meanwhile
		}
		lk.close()
		// Another process, or Source, downloads it: wait for its lock.
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("shards: %s: waiting for its download into %s: %w", name, c.dir, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// readAhead starts fetching shard name into the cache in the background,
// unless it is there or on its way, or CacheReadAhead downloads ahead are
// in flight already.
func (c *cache) readAhead(name string) {
	k := key(name)
	c.mu.Lock()
	skip := c.off != nil || c.closed || c.downloads[k] != nil || c.aheadNow >= c.ahead
	c.mu.Unlock()
	if skip || c.knownWhole(k, name) {
		return
	}
	if _, ok := c.complete(k, name); ok {
		return
	}
	lk, err := openLock(c.path(k) + ".lock")
	if err != nil {
		c.disable(err)
		return
	}
	if !lk.try(true) {
		lk.close()
		return
	}
	if _, ok := c.complete(k, name); ok {
		lk.close()
		return
	}
	if c.start(name, k, lk, true) != nil {
		c.readAheads.Add(1)
	}
}

// use marks key k as read until the returned reader of f is closed.
func (c *cache) use(k string, f *os.File, lk *fileLock) *cachedReader {
	c.mu.Lock()
	c.inUse[k]++
	c.mu.Unlock()
	return &cachedReader{File: f, done: func() {
		if lk != nil {
			lk.close()
		}
		c.mu.Lock()
		if c.inUse[k]--; c.inUse[k] == 0 {
			delete(c.inUse, k)
		}
		c.mu.Unlock()
	}}
}

// cachedReader is a cached shard's file, marked as read until Close.
type cachedReader struct {
	*os.File
	once sync.Once
	done func()

	size    int64  // the shard's, for a whole one; else 0
	version string // the shard's at download, for a whole one
}

func (r *cachedReader) Close() error {
	err := r.File.Close()
	r.once.Do(r.done)
	return err
}

// reserve makes room for size bytes by evicting the least recently used
// shards, not being read, and reports whether it did.
func (c *cache) reserve(size int64) bool {
	if size > c.limit {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	type entry struct {
		key  string
		size int64
		used time.Time
	}
	var ents []entry
	var total int64
	des, err := os.ReadDir(c.dir)
	if err != nil {
		return false
	}
	for _, de := range des {
		n := de.Name()
		// A download in flight is counted by c.reserved, its file too once
		// it is committed and until the download ends.
		if !isKey(n) || !de.Type().IsRegular() || c.downloads[n] != nil {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue
		}
		ents = append(ents, entry{n, fi.Size(), fi.ModTime()})
		total += fi.Size()
	}
	need := total + c.reserved + size - c.limit
	slices.SortFunc(ents, func(a, b entry) int { return a.used.Compare(b.used) })
	for _, e := range ents {
		if need <= 0 {
			break
		}
		if c.inUse[e.key] > 0 || c.downloads[e.key] != nil {
			continue
		}
		lk, err := openLock(c.path(e.key) + ".lock")
		if err != nil {
			continue
		}
		// A reader or downloader in another process holds the lock.
		if lk.try(true) {
			c.forget(e.key)
			os.Remove(c.path(e.key) + ".meta")
			if os.Remove(c.path(e.key)) == nil {
				c.evictions.Add(1)
				need -= e.size
			}
		}
		lk.close()
	}
	if need > 0 {
		return false
	}
	c.reserved += size
	return true
}

// cachedList returns the cached copy of the shard list name, with no
// request: found is false where the list did not exist when it was
// fetched; ok is false where no copy is cached.
func (c *cache) cachedList(name string) (data []byte, found, ok bool) {
	c.ready()
	if c.isOff() {
		return nil, false, false
	}
	k := key(name)
	m, ok := c.complete(k, name)
	switch {
	case !ok:
		return nil, false, false
	case m.Absent:
		return nil, false, true
	}
	data, err := regfile.ReadFile(c.path(k), maxReadFile)
	if err != nil || int64(len(data)) != m.Size { // replaced or evicted meanwhile
		return nil, false, false
	}
	now := time.Now()
	os.Chtimes(c.path(k), now, now) // for LRU
	return data, true, true
}

// keepList keeps data, the shard list name as just fetched (found false:
// it does not exist), in the cache, beside its shards and within its
// budget, for later Sources to read with no request (see Cache). It does
// nothing where another process writes it now, and turns the cache off
// where the folder cannot be written.
func (c *cache) keepList(name string, data []byte, found bool) {
	c.ready()
	c.mu.Lock()
	skip := c.off != nil || c.closed
	c.mu.Unlock()
	if skip {
		return
	}
	k := key(name)
	lk, err := openLock(c.path(k) + ".lock")
	if err != nil {
		c.disable(err)
		return
	}
	defer lk.close()
	c.mu.Lock()
	busy := c.inUse[k] > 0
	c.mu.Unlock()
	if busy || !lk.try(true) {
		return
	}
	c.forget(k)
	os.Remove(c.path(k) + ".meta")
	os.Remove(c.path(k))
	if !c.reserve(int64(len(data))) {
		return
	}
	defer func() {
		c.mu.Lock()
		c.reserved -= int64(len(data))
		c.mu.Unlock()
	}()
	if err := c.writeFile(k, data, entryMeta{URL: name, Size: int64(len(data)), Absent: !found}); err != nil {
		c.disable(err)
	}
}

// writeFile writes data and its .meta m at key k, each by a temp file
// renamed, the .meta first: a crash leaves k absent or whole.
func (c *cache) writeFile(k string, data []byte, m entryMeta) error {
	meta, err := json.Marshal(m)
	if err != nil {
		return err
	}
	for _, w := range []struct {
		name string
		data []byte
	}{{c.path(k) + ".meta", meta}, {c.path(k), data}} {
		f, err := os.CreateTemp(c.dir, filepath.Base(w.name)+".part-*")
		if err != nil {
			return err
		}
		_, err = cacheWrite(f, w.data)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(f.Name(), w.name)
		}
		if err != nil {
			os.Remove(f.Name())
			return err
		}
	}
	return nil
}

// allWhole reports whether each remote shard of names is cached whole,
// with no request.
func (c *cache) allWhole(names []string) bool {
	for _, n := range names {
		if !remote(n) {
			continue
		}
		if _, ok := c.cached(n); !ok {
			return false
		}
	}
	return true
}
