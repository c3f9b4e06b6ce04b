package shards

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"math/bits"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/parquet-go/parquet-go"
	"golang.org/x/sync/errgroup"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/recycle"
	"github.com/tensorbatch/tensorbatch/internal/regfile"
	"github.com/tensorbatch/tensorbatch/shards/store"
)

// DecodeFunc writes a record into its slot: engine.Iterable's Decode. It
// runs on a worker goroutine, concurrently with other calls. The record's
// bytes are its own to keep, unless it calls Release.
type DecodeFunc func(ctx context.Context, rec engine.Record, s *engine.Slot) error

// Release, called by a DecodeFunc with the ctx it was given, tells the
// Source that the function keeps none of the record's bytes once it
// returns: it copied or decoded what it needed, and nothing (a goroutine,
// a cache, a slice of a field) still refers to them. The Source then
// reads later records into those bytes instead of allocating new ones
// for each record and leaving the old to the garbage collector, which
// costs more than reading them (BenchmarkS3Read's source and
// source-kept rows). vision.Pipeline.Record calls it. A function that
// keeps a field must not call it: the bytes would change under it.
func Release(ctx context.Context) { recycle.Release(ctx) }

// Source is a set of WebDataset tar shards as an engine.Iterable: pass it to
// engine.FromIterable, which splits the shards across ranks and workers.
// Shards named "*.parquet" are Parquet files, each row a record (see
// Parquet shards in the package documentation); tar and Parquet shards
// may be mixed.
// Each sample is one engine.Record (see TarReader), decoded into its slot
// by the DecodeFunc. It counts the retries of its remote reads (Retries),
// which the loader reports in Stats.Dataset ("read_retries", see Source.Report).
//
// Sample counts: engine.FromIterable asks for every shard's count once. They
// come from a shard list (see Index) when there is one: the file named
// by the IndexFile option, else, for remote shards, "shardlist.json"
// beside the first shard, when it exists. Shards it does not list are
// scanned: their tar headers are read, seeking over member data for a
// local file, reading the whole shard for a remote one (hence the list).
//
// Identity: a loader's State records the Source's Fingerprint (each
// shard's content, as its version or sampled bytes say, and the
// decoder's parts, see DecoderFingerprint), so that a job resumed on
// other data, or with another decoder, is refused rather than fed other
// batches.
type Source struct {
	names  []string
	pos    map[string]int // of each name in names
	schema collate.Schema
	decode DecodeFunc
	o      options
	cache  *cache // nil without the Cache option

	told          atomic.Bool // Prefetch was called: the reader says what comes next
	warnedVersion atomic.Bool // the warning of shards without a version was logged

	idMu    sync.Mutex
	objects []string // what identifies each shard's content, from the last Shards
	parquet bool     // a shard is a Parquet file
}

// Option configures a Source.
type Option func(*options)

type options struct {
	opener    *Opener
	ownOpener bool // the Source made opener: Close closes its connections
	index     string
	indexSet  bool
	maxMember int64

	cacheDir     string
	cacheLimit   int64
	cacheSet     bool
	readAhead    int
	readAheadSet bool
	maxParquet   int64                // see MaxParquetBytes
	columns      []string             // see ParquetColumns
	decoder      engine.Fingerprinter // see DecoderFingerprint
	read         *readIndex           // a shard list New read
	cache        *cache               // the cache New made for it
}

// readIndex is a shard list as read: its name and bytes.
type readIndex struct {
	name string
	data []byte
}

// DecoderFingerprint records f's Fingerprint, the parts that decide what
// the DecodeFunc writes, in the Source's (see Source.Fingerprint): pass
// the vision.Pipeline whose Record is the DecodeFunc. A DecodeFunc is a
// function, which has no identity of its own: without this option, a
// state saved with one decoder resumes with another unchecked.
func DecoderFingerprint(f engine.Fingerprinter) Option {
	return func(o *options) { o.decoder = f }
}

// UseOpener reads the shards with o (its timeouts, retries, HTTP and S3
// clients); by default, a zero Opener of the Source's own.
func UseOpener(o *Opener) Option { return func(opts *options) { opts.opener = o } }

// IndexFile names the shard list to take sample counts from (see
// Index); it must exist. "" turns the look-up of shardlist.json off,
// so every shard is scanned.
func IndexFile(name string) Option {
	return func(o *options) { o.index, o.indexSet = name, true }
}

// MaxMemberBytes bounds the size of one tar member (DefaultMaxMemberBytes
// by default): a larger one is an error naming it.
func MaxMemberBytes(n int64) Option { return func(o *options) { o.maxMember = n } }

// New returns the Source of the shards that pattern names (see Expand:
// "s3://bucket/train-{0000..0999}.tar"), whose samples decode writes
// into slots of schema.
//
// A name that ends in "/" is a folder, which stands for the shards in it
// (see List): "s3://bucket/train/" (or gs://, az://) lists the prefix
// (every page, the objects ending in .tar or .parquet, sorted); "https://host/train/" is
// the shards its shardlist.json names, which then also gives their
// counts, and an error naming that URL where there is none; "/data/train/"
// lists the local folder as S3 does. A folder with no shard is an error
// naming it. A name whose base ends in ".json" is a shard list (see
// Index; ".../shardlist.json"), local or remote: the shards it names,
// relative to its folder, with their counts. Listing uses the Opener (see
// UseOpener) and happens here, once, under ctx.
func New(ctx context.Context, pattern string, schema collate.Schema, decode DecodeFunc, opts ...Option) (*Source, error) {
	expanded, err := Expand(pattern)
	if err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	names := expanded[:0:0]
	var indexes []readIndex
	var lists *cache // the cache, made early for the shard lists read here
	for _, name := range expanded {
		isList := isIndexName(name)
		if !isFolder(name) && !isList {
			names = append(names, name)
			continue
		}
		if o.opener == nil {
			o.opener = &Opener{}
			opts = append([]Option{UseOpener(o.opener), func(o *options) { o.ownOpener = true }}, opts...)
		}
		var listed []string
		if loc, _ := parse(name); isList || loc.k == viaHTTP {
			folder, index := name, name+"shardlist.json"
			if isList {
				folder, index = dir(name), name
			}
			if lists == nil && o.cacheSet && o.cacheDir != "" && o.cacheLimit > 0 {
				lists = newCache(o.cacheDir, o.cacheLimit, 0, o.opener)
			}
			data, found, err := readList(ctx, o.opener, lists, index, true, nil)
			if err == nil && !found && isList {
				return nil, fmt.Errorf("shards: %s: no such shard list: %w", name, fs.ErrNotExist)
			}
			if listed, err = listedShards(folder, index, data, found, err); err != nil {
				return nil, err
			}
			indexes = append(indexes, readIndex{index, data})
		} else if listed, err = List(ctx, o.opener, name); err != nil {
			return nil, err
		}
		names = append(names, listed...)
	}
	if len(indexes) == 1 && len(expanded) == 1 && !o.indexSet {
		// The list that named the shards gives their counts, wherever
		// they live; it is not read again.
		read := indexes[0]
		opts = append([]Option{IndexFile(read.name), func(o *options) { o.read = &read }}, opts...)
	}
	if lists != nil { // the Source's, which says once if it cannot be written
		opts = append(opts, func(o *options) { o.cache = lists })
	}
	s, err := FromNames(names, schema, decode, opts...)
	if err != nil && lists != nil {
		lists.close()
	}
	return s, err
}

// FromNames returns the Source of the shards names, in this order.
func FromNames(names []string, schema collate.Schema, decode DecodeFunc, opts ...Option) (*Source, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("shards: no shards")
	}
	if decode == nil {
		return nil, fmt.Errorf("shards: nil DecodeFunc")
	}
	if err := schema.Validate(); err != nil {
		return nil, fmt.Errorf("shards: schema: %w", err)
	}
	s := &Source{names: append([]string(nil), names...), schema: schema, decode: decode}
	for _, o := range opts {
		o(&s.o)
	}
	if s.o.opener == nil {
		s.o.opener, s.o.ownOpener = &Opener{}, true
	}
	s.pos = make(map[string]int, len(names))
	for i, n := range names {
		if _, err := parse(n); err != nil {
			return nil, err
		}
		if _, dup := s.pos[n]; !dup {
			s.pos[n] = i
		}
	}
	if s.o.cacheSet {
		switch {
		case s.o.cacheDir == "":
			return nil, fmt.Errorf("shards: Cache: no folder")
		case s.o.cacheLimit <= 0:
			return nil, fmt.Errorf("shards: Cache: limit %d bytes, want > 0", s.o.cacheLimit)
		case s.o.readAhead < 0:
			return nil, fmt.Errorf("shards: CacheReadAhead: %d, want >= 0", s.o.readAhead)
		}
		ahead := DefaultCacheReadAhead
		if s.o.readAheadSet {
			ahead = s.o.readAhead
		}
		if s.cache = s.o.cache; s.cache != nil {
			s.cache.ahead = ahead
		} else {
			s.cache = newCache(s.o.cacheDir, s.o.cacheLimit, ahead, s.o.opener)
		}
	}
	return s, nil
}

// Close cancels the downloads into the cache in flight (see Cache) and
// waits for them to end, then closes the idle connections of the
// Source's own Opener (not one given by UseOpener, which its caller
// closes). The Source can still be read: from the cache where a shard is
// in it, else streaming, with no new download. It returns nil.
func (s *Source) Close() error {
	if s.cache != nil {
		s.cache.close()
	}
	if s.o.ownOpener {
		s.o.opener.CloseIdleConnections()
	}
	return nil
}

// StorageStats counts a Source's reads from storage and its local cache.
type StorageStats struct {
	Requests     int64 // remote GETs (first or resumed) and listing pages
	BytesFetched int64 // bytes of their response bodies
	ReadRetries  int64 // transient failures retried (see Opener)
	Hits         int64 // shard opens served from the local cache or a download in flight
	Misses       int64 // shard opens that started a download or streamed
	ReadAheads   int64 // downloads started ahead of use
	Evictions    int64 // shards removed from the cache to make room
	// Unverified counts the shards downloaded into the cache that no MD5
	// checked, only their size, as their store gives none (see Cache).
	Unverified int64
}

// StorageStats returns the counts of the Source's remote reads and of its
// cache.
func (s *Source) StorageStats() StorageStats {
	st := StorageStats{Requests: s.o.opener.Requests(), BytesFetched: s.o.opener.BytesFetched(), ReadRetries: s.o.opener.ReadRetries()}
	if c := s.cache; c != nil {
		st.Hits, st.Misses, st.ReadAheads, st.Evictions = c.hits.Load(), c.misses.Load(), c.readAheads.Load(), c.evictions.Load()
		st.Unverified = c.unverified.Load()
	}
	return st
}

// Report returns StorageStats by name, for a loader's Stats.Dataset
// (engine.Reporter): requests, fetched_bytes, read_retries, cache_hits,
// cache_misses, cache_read_aheads, cache_evictions, cache_unverified.
func (s *Source) Report() map[string]int64 {
	st := s.StorageStats()
	return map[string]int64{
		"requests": st.Requests, "fetched_bytes": st.BytesFetched, "read_retries": st.ReadRetries,
		"cache_hits": st.Hits, "cache_misses": st.Misses, "cache_read_aheads": st.ReadAheads, "cache_evictions": st.Evictions,
		"cache_unverified": st.Unverified,
	}
}

// Fingerprint returns what identifies the Source's samples besides
// their shards' names and counts, which an engine.IterableDataset over
// it records itself (engine.Fingerprinter):
//
//   - shards.objects: the number of shards and a hash of what identifies
//     each one's content, in listed order, as Shards noted it: for a
//     remote shard its version (ETag, else Last-Modified) and size, as
//     the request that checked or counted it said, or a cached copy's
//     .meta (the content the cache serves); for a local one its size
//     and a hash of 64 blocks of 4 KiB spread over it
//     (engine.FingerprintData). So a shard rewritten under its name with
//     the same count is told apart where its version or size changed or
//     a sampled block did: not a local shard over 256 KiB edited in place
//     between the blocks (a label fixed in a .cls), nor a remote one
//     whose server sends neither ETag nor Last-Modified (a warning says
//     so, once). Shards copied to another folder, bucket or node keep it;
//     a shard moved between a local disk and a store (or HTTP) does not.
//     Absent before Shards is called.
//   - shards.parquet_columns: ParquetColumns, or "all", where a shard is
//     a Parquet file.
//   - shards.decoder.*: the parts of the DecoderFingerprint option's
//     Fingerprinter (a vision.Pipeline's: its transform and decoder).
//     A DecodeFunc alone has no identity: without that option nothing
//     records what it writes.
//
// MaxMemberBytes and MaxParquetBytes are left out: they decide whether
// a shard fails, not its samples; so are the Cache and the Opener.
func (s *Source) Fingerprint() engine.Fingerprint {
	f := engine.Fingerprint{}
	s.idMu.Lock()
	if s.objects != nil {
		f["shards.objects"] = strconv.Itoa(len(s.objects)) + " " + engine.FingerprintHash(s.objects...)
	}
	if s.parquet {
		f["shards.parquet_columns"] = "all"
		if len(s.o.columns) > 0 {
			f["shards.parquet_columns"] = strings.Join(s.o.columns, ",")
		}
	}
	s.idMu.Unlock()
	return f.Nest("shards.decoder", engine.FingerprintOf(s.o.decoder))
}

// Names returns the shard names.
func (s *Source) Names() []string { return append([]string(nil), s.names...) }

// Schema returns the schema of the samples.
func (s *Source) Schema() collate.Schema { return s.schema }

// ReadRetries returns the transient read failures retried so far.
func (s *Source) ReadRetries() int64 { return s.o.opener.ReadRetries() }

// Opener returns the Opener the shards are read with.
func (s *Source) Opener() *Opener { return s.o.opener }

// Shards returns the shards with their sample counts (see Source),
// checking or scanning 16 shards at a time; the first that fails cancels
// the others. It also notes what identifies each shard's content, for
// Fingerprint: the version of a remote shard (its ETag, else its
// Last-Modified, and its size), which the request that checks or counts
// it says (or, for a cached shard, its .meta, with no request), and the
// size and sampled content of a local one (engine.FingerprintData:
// 256 KiB read at most).
func (s *Source) Shards(ctx context.Context) ([]engine.ShardInfo, error) {
	var known map[string]int
	var sizes map[string]int64
	index, required := s.o.index, s.o.indexSet
	if !required && remote(s.names[0]) {
		index = dir(s.names[0]) + "shardlist.json"
	}
	if index != "" {
		var data []byte
		var found bool
		var err error
		if r := s.o.read; r != nil && r.name == index {
			data, found = r.data, true
		} else {
			data, found, err = readList(ctx, s.o.opener, s.cache, index, required, s.names)
		}
		switch {
		case err != nil:
			return nil, err
		case !found && required:
			return nil, fmt.Errorf("shards: index %s: not found", index)
		case found:
			if known, sizes, err = listedCounts(index, data); err != nil {
				return nil, err
			}
		}
	}
	out := make([]engine.ShardInfo, len(s.names))
	ids := make([]string, len(s.names))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(scanConcurrency)
	for i, name := range s.names {
		out[i].Name = name
		listed, ok := known[name]
		g.Go(func() error {
			if s.cache != nil && sizes[name] > 0 && remote(name) {
				s.cache.dropStale(name, sizes[name])
			}
			var err error
			out[i].Samples, ids[i], err = s.shardInfo(gctx, name, listed, ok, index)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	s.idMu.Lock()
	s.objects = ids
	s.parquet = slices.ContainsFunc(s.names, isParquet)
	s.idMu.Unlock()
	s.warnUnversioned(ids)
	return out, nil
}

// warnUnversioned logs, once a Source, that remote shards came without a
// version (their identity is their size alone: see Fingerprint).
func (s *Source) warnUnversioned(ids []string) {
	first, n := "", 0
	for i, id := range ids {
		if strings.HasPrefix(id, strconv.Quote("")+" ") { // remoteIdentity's, without a version
			if n++; n == 1 {
				first = s.names[i]
			}
		}
	}
	if n > 0 && s.warnedVersion.CompareAndSwap(false, true) {
		slog.Warn("shards: the server gives no ETag or Last-Modified, so a shard rewritten with the same size is not told apart when a saved State is resumed",
			"shard", first, "shards", n)
	}
}

// shardInfo returns the sample count of shard name (listed with listed
// samples in index, where isListed), checked or scanned, and what
// identifies its content (see Shards).
func (s *Source) shardInfo(ctx context.Context, name string, listed int, isListed bool, index string) (int, string, error) {
	var id string
	if !remote(name) {
		var err error
		if id, err = localIdentity(name); err != nil {
			return 0, "", err
		}
	}
	if isParquet(name) {
		var f *parquet.File
		var closer io.Closer
		var err error
		if s.cache != nil && remote(name) {
			// Source.parquetFile, with the reader's identity taken first:
			// a download's reader is read whole, then dropped.
			var rc io.ReadCloser
			if rc, err = s.open(ctx, name); err == nil {
				id = readerIdentity(rc)
				f, closer, err = parquetFrom(name, rc, s.o.maxParquetBytes())
			}
		} else if f, closer, err = s.parquetFile(ctx, name, false); err == nil && id == "" {
			id = readerIdentity(closer)
		}
		n, err := parquetRows(name, s.o.columns, f, closer, err)
		if err == nil && isListed && n != listed {
			err = fmt.Errorf("shards: %s: %d rows, listed with %d in %s", name, n, listed, index)
		}
		return n, id, err
	}
	if isListed && listed > 0 {
		rid, err := s.checkListed(ctx, name, listed, index)
		if id == "" {
			id = rid
		}
		return listed, id, err
	}
	n, rid, err := s.count(ctx, name)
	if err != nil {
		return 0, "", err
	}
	if id == "" {
		id = rid
	}
	if isListed && n != listed {
		// A shard listed empty is never opened: its count is checked
		// here, which costs little, as it should be empty.
		return 0, "", fmt.Errorf("shards: %s: %d records, more than the %d it is listed with in %s", name, n, listed, index)
	}
	return n, id, nil
}

// localIdentity is what identifies the content of the local shard name:
// its size and a hash of samples of its bytes (engine.FingerprintData).
func localIdentity(name string) (string, error) {
	loc, err := parse(name)
	if err != nil {
		return "", err
	}
	f, err := regfile.Open(loc.path)
	if err != nil {
		return "", fmt.Errorf("shards: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("shards: %s: %w", name, err)
	}
	id, err := engine.FingerprintData(f, fi.Size())
	if err != nil {
		return "", fmt.Errorf("shards: %s: %w", name, err)
	}
	return id, nil
}

// remoteIdentity is what identifies the content of a remote shard: its
// version (ETag, else Last-Modified; "" when the server says neither)
// and its size (-1 when unknown).
func remoteIdentity(version string, size int64) string {
	return strconv.Quote(version) + " " + strconv.FormatInt(size, 10)
}

// readerIdentity is remoteIdentity of the shard that r, a reader of a
// remote shard the Source made (from the server, the cache or a
// download), reads; "" for another reader.
func readerIdentity(r io.Closer) string {
	switch r := r.(type) {
	case *remoteReader:
		return remoteIdentity(r.version, r.total)
	case *cachedReader:
		return remoteIdentity(r.version, r.size)
	case *follower:
		r.d.mu.Lock()
		defer r.d.mu.Unlock()
		return remoteIdentity(r.d.version, r.d.total)
	}
	return ""
}

// readList reads the shard list index with o, through the cache c (nil:
// none). A copy in the cache is read instead, with no request, where
// the cache holds it (or, for a list not required, holds that it did
// not exist) and every remote shard of shards (nil: those it names) is
// cached whole: the list then describes shards as they were when it was
// fetched, which are the shards read. Else it is fetched, and kept in
// the cache for the next Source. A 403 of a list not required is its
// absence: S3 answers it for a missing key to those who may not list
// the bucket, and the shards' own reads will say if it is more.
func readList(ctx context.Context, o *Opener, c *cache, index string, required bool, shards []string) (data []byte, found bool, err error) {
	cacheable := c != nil && remote(index)
	if cacheable {
		if data, found, ok := c.cachedList(index); ok && (found || !required) {
			names := shards
			if names == nil && found {
				names, _ = listedShards(dir(index), index, data, true, nil)
			}
			if names != nil && c.allWhole(names) {
				return data, found, nil
			}
		}
	}
	data, found, err = o.ReadFile(ctx, index)
	var se *store.StatusError
	if !required && errors.As(err, &se) && se.Code == http.StatusForbidden {
		data, found, err = nil, false, nil
	}
	if err == nil && cacheable {
		c.keepList(index, data, found)
	}
	return data, found, err
}

// scanConcurrency bounds the shards checked or scanned at once by
// Source.Shards and BuildIndex.
const scanConcurrency = 16

// checkListed checks the count listed for shard name in index against
// the shard's size (see Opener.checkListed), and returns the
// remoteIdentity of a remote shard. A cached shard's size is its copy's,
// with no request.
func (s *Source) checkListed(ctx context.Context, name string, listed int, index string) (string, error) {
	if s.cache != nil && remote(name) {
		if m, ok := s.cache.cached(name); ok {
			return remoteIdentity(m.ETag, m.Size), checkSize(name, listed, index, m.Size)
		}
	}
	if !remote(name) {
		return "", s.o.opener.checkListed(ctx, name, listed, index)
	}
	size, version, err := s.o.opener.probeSize(ctx, name)
	if err != nil {
		return "", err
	}
	return remoteIdentity(version, size), checkSize(name, listed, index, size)
}

// count returns the records of shard name, read through its headers (a
// remote shard through the cache, which keeps it), and the
// remoteIdentity of a remote shard.
func (s *Source) count(ctx context.Context, name string) (int, string, error) {
	if !remote(name) {
		n, err := s.o.opener.count(ctx, name, s.o.maxMember)
		return n, "", err
	}
	var rc io.ReadCloser
	var err error
	if s.cache != nil {
		rc, err = s.cache.open(ctx, name)
	} else {
		rc, err = s.o.opener.Open(ctx, name)
	}
	if err != nil {
		return 0, "", err
	}
	t := NewTarReader(name, rc, s.o.maxMember)
	defer t.Close()
	n, err := t.Count(ctx)
	return n, readerIdentity(rc), err
}

// open returns a reader of shard name, through the cache if there is one.
func (s *Source) open(ctx context.Context, name string) (io.ReadCloser, error) {
	if s.cache == nil || !remote(name) {
		return s.o.opener.Open(ctx, name)
	}
	rc, err := s.cache.open(ctx, name)
	if err != nil {
		return nil, err
	}
	if !s.told.Load() { // the list's order: a guess where shards are shuffled
		for j := 1; j <= s.cache.ahead && j < len(s.names); j++ {
			if next := s.names[(s.pos[name]+j)%len(s.names)]; remote(next) {
				s.cache.readAhead(next)
			}
		}
	}
	return rc, nil
}

// Prefetch fetches the first CacheReadAhead shards of next into the
// cache in the background, those not there or on their way already; it
// does nothing without a Cache. The engine's reader of each rank calls it
// (engine.Prefetcher) as it opens a shard, with the shards it opens after
// it this epoch, in their order, just before it opens it: shuffled or
// not, the read-ahead fetches what will be read. Once it has been called, Open no longer guesses the
// next shards from the Source's list.
func (s *Source) Prefetch(next []engine.ShardInfo) {
	if s.cache == nil {
		return
	}
	s.told.Store(true)
	for _, sh := range next[:min(s.cache.ahead, len(next))] {
		if remote(sh.Name) {
			s.cache.readAhead(sh.Name)
		}
	}
}

// Open starts reading a shard from its first sample.
func (s *Source) Open(ctx context.Context, shard engine.ShardInfo) (engine.RecordReader, error) {
	if isParquet(shard.Name) {
		return s.openParquet(ctx, shard)
	}
	rc, err := s.open(ctx, shard.Name)
	if err != nil {
		return nil, err
	}
	t := NewTarReader(shard.Name, rc, s.o.maxMember)
	t.bufs = recordBuffers // the members go back to it in Decode
	return &listedReader{t: t, listed: shard.Samples}, nil
}

// listedReader is a shard's TarReader that holds it to its listed count:
// a shard that ends early, or holds a record past the count, is an error
// naming it. The record past the count is looked for when the last listed
// one is read, so that the error comes with a record the loader waits
// for, wherever the shard falls in the epoch.
type listedReader struct {
	t            *TarReader
	listed, read int
	err          error // sticky
}

func (r *listedReader) Next(ctx context.Context) (engine.Record, error) {
	if r.err != nil {
		return engine.Record{}, r.err
	}
	rec, err := r.t.Next(ctx)
	switch {
	case err == io.EOF && r.read < r.listed:
		err = fmt.Errorf("shards: %s: ended after %d records, listed with %d", r.t.shard, r.read, r.listed)
	case err == nil && r.read >= r.listed:
		err = r.more()
	case err == nil && r.read+1 == r.listed:
		if _, err = r.t.Next(ctx); err == nil {
			err = r.more()
		} else if err == io.EOF {
			err = nil
		}
	}
	if err != nil {
		r.err = err
		return engine.Record{}, err
	}
	r.read++
	return rec, nil
}

func (r *listedReader) more() error {
	return fmt.Errorf("shards: %s: more records than the %d it is listed with", r.t.shard, r.listed)
}

func (r *listedReader) Close() error { return r.t.Close() }

// listedCounts parses the shard list data, read from index, into the
// sample count of each shard it lists, by name. A negative count, a
// shard listed twice with two counts and counts whose sum overflows are
// errors naming the list and the shard. Counts are claims: Shards checks
// each against its shard's size before anything is sized by it.
//
// It also returns the sizes the list gives (filesize), by name: a cached
// copy of another size is stale.
func listedCounts(index string, data []byte) (map[string]int, map[string]int64, error) {
	var l Index
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, nil, fmt.Errorf("shards: index %s: %w", index, err)
	}
	known := make(map[string]int, len(l.Shards))
	sizes := map[string]int64{}
	total := 0
	for _, e := range l.Shards {
		name := resolve(index, e.URL)
		if e.Samples < 0 || total > math.MaxInt-e.Samples {
			return nil, nil, fmt.Errorf("shards: index %s: %q has %d samples, want 0 to %d in all", index, e.URL, e.Samples, math.MaxInt)
		}
		if n, dup := known[name]; dup && n != e.Samples {
			return nil, nil, fmt.Errorf("shards: index %s: %q is listed twice, with %d and %d samples", index, e.URL, n, e.Samples)
		}
		known[name] = e.Samples
		total += e.Samples
		if e.Bytes > 0 {
			sizes[name] = e.Bytes
		}
	}
	return known, sizes, nil
}

// minSampleBytes is the fewest bytes a sample takes in a tar: the header
// block of its one member.
const minSampleBytes = 512

// checkListed checks the count listed for shard name in index against
// the shard's size: a sample takes a tar header block at least, and a
// tar ends with an end block. Its size comes from a stat, or from the
// response to one request, whose body is not read.
func (o *Opener) checkListed(ctx context.Context, name string, listed int, index string) error {
	size, err := o.size(ctx, name)
	if err != nil {
		return err
	}
	return checkSize(name, listed, index, size)
}

// checkSize checks the count listed for shard name in index against its
// size; -1 is unknown.
func checkSize(name string, listed int, index string, size int64) error {
	if most := max(size-512, 0) / minSampleBytes; size >= 0 && int64(listed) > most {
		return fmt.Errorf("shards: %s: listed with %d samples in %s, but its %d bytes hold %d at most", name, listed, index, size, most)
	}
	return nil
}

// probeSize returns the bytes of the remote shard name (-1 when the
// server does not say) and its version, from a request for its first
// byte.
func (o *Opener) probeSize(ctx context.Context, name string) (int64, string, error) {
	r, _, err := o.probe(ctx, name, make([]byte, 1))
	if err != nil {
		return 0, "", err
	}
	r.Close()
	return r.total, r.version, nil
}

// size returns the bytes of shard name; -1 when the server does not say.
func (o *Opener) size(ctx context.Context, name string) (int64, error) {
	loc, err := parse(name)
	if err != nil {
		return 0, err
	}
	k, path := loc.k, loc.path
	if k == local {
		fi, err := os.Stat(path)
		if err != nil {
			return 0, fmt.Errorf("shards: %w", err)
		}
		return fi.Size(), nil
	}
	r, _, err := o.probe(ctx, name, make([]byte, 1))
	if err != nil {
		return 0, err
	}
	r.Close()
	return r.total, nil
}

// Decode writes rec into s with the Source's DecodeFunc. Where that
// called Release (vision.Pipeline.Record's does), keeping none of rec's
// bytes once it returns, Decode then takes back the record's large fields (tar members
// and Parquet byte arrays of 4 KiB and more) that the Source's readers
// made, to read later records into: so an epoch reads its images into the
// memory the images before them held, as an ImageFolder reads each file
// into its worker's buffer, instead of allocating their bytes anew and
// collecting them (a GC cycle every few MB, and the page faults of memory
// the runtime gave back), which cost a record more CPU than a file
// (BenchmarkRecordReaders, BenchmarkS3Read). Any other DecodeFunc may
// keep the record's bytes: they are the garbage collector's, as are those of a
// record never decoded and fields the Source's readers did not make.
func (s *Source) Decode(ctx context.Context, rec engine.Record, slot *engine.Slot) error {
	c := &recycle.Context{Context: ctx}
	err := s.decode(c, rec, slot)
	if c.Released() {
		recordBuffers.putFields(rec.Fields)
	}
	return err
}

// recordBuffers are the buffers of large record fields: see Source.Decode.
var recordBuffers = newBufferPool()

// Buffers of 4 KiB (1<<minBufferShift) to 64 MiB (1<<maxBufferShift),
// a power of two each, are recycled; smaller fields cost little to
// allocate, and a larger one is rare enough to leave to the collector.
const minBufferShift, maxBufferShift = 12, 26

// bufferPool recycles record fields: get hands out a buffer and notes
// it, put takes back only a buffer that get handed out and that nobody
// gave back since. A note is a weak pointer, by the buffer's address: a
// buffer never given back is still collected (its note is dropped
// later), and a field that lies where a collected buffer lay is told
// apart by the weak pointer, which no longer points there. (put makes no
// weak pointer of its own: the runtime refuses one to memory that is not
// Go's, such as a mapped file a caller's record may hold.)
type bufferPool struct {
	sizes [maxBufferShift - minBufferShift + 1]sync.Pool // of *[]byte, by size class

	mu    sync.Mutex
	out   map[uintptr]lent // buffers handed out, not given back, by address
	sweep int              // len(out) at which out drops the notes of collected buffers
}

// lent is a buffer that bufferPool.get handed out.
type lent struct {
	w     weak.Pointer[byte]
	class int
}

func newBufferPool() *bufferPool {
	return &bufferPool{out: make(map[uintptr]lent), sweep: 1024}
}

// get returns a buffer of n bytes, of unspecified contents, or nil where
// n is outside the recycled sizes (the caller allocates then). Its
// capacity is its size class's: put gives it back whole.
func (p *bufferPool) get(n int) []byte {
	if p == nil || n < 1<<minBufferShift || n > 1<<maxBufferShift {
		return nil
	}
	c := max(bits.Len(uint(n-1)), minBufferShift) - minBufferShift
	var b []byte
	if v, ok := p.sizes[c].Get().(*[]byte); ok {
		b = *v
	} else {
		b = make([]byte, 1<<(c+minBufferShift))
	}
	p.mu.Lock()
	if len(p.out) >= p.sweep {
		p.dropCollected()
	}
	p.out[uintptr(unsafe.Pointer(&b[0]))] = lent{weak.Make(&b[0]), c}
	p.mu.Unlock()
	return b[:n]
}

// alloc returns a buffer of n bytes from get, or else a new one of
// exactly n bytes.
func (p *bufferPool) alloc(n int) []byte {
	if b := p.get(n); b != nil {
		return b
	}
	return make([]byte, n)
}

// dropCollected drops the notes of buffers collected without being given
// back (those of records never decoded). Called with p.mu held, when
// the notes have doubled since the last time.
func (p *bufferPool) dropCollected() {
	for a, l := range p.out {
		if l.w.Value() == nil {
			delete(p.out, a)
		}
	}
	p.sweep = max(1024, 2*len(p.out))
}

// putFields puts each buffer of a record's fields, once: a Parquet
// record holds its image under several names (the column, its struct,
// the path's extension and its alias), and put tells a buffer given back
// twice from one handed out again only while no get comes between: a
// second put after another worker's get would give that worker's buffer
// away.
func (p *bufferPool) putFields(fields map[string][]byte) {
	var given [8]*byte
	seen := given[:0]
	for _, b := range fields {
		if cap(b) == 0 || slices.Contains(seen, unsafe.SliceData(b)) {
			continue
		}
		seen = append(seen, unsafe.SliceData(b))
		p.put(b)
	}
}

// put takes b back where it is a buffer that get handed out (b is its
// start, with the capacity get gave it) and not given back since.
func (p *bufferPool) put(b []byte) {
	if p == nil || cap(b) < 1<<minBufferShift {
		return
	}
	b = b[:cap(b)]
	a := uintptr(unsafe.Pointer(&b[0]))
	p.mu.Lock()
	l, ok := p.out[a]
	ok = ok && l.w.Value() == &b[0] && len(b) == 1<<(l.class+minBufferShift)
	if ok {
		delete(p.out, a)
	}
	p.mu.Unlock()
	if ok {
		p.sizes[l.class].Put(&b)
	}
}

// Count returns the samples of the tar shard name, from its headers: for
// a local file it seeks over the member data; a remote shard is read
// whole. A Parquet shard's rows are counted from its footer alone.
func (o *Opener) Count(ctx context.Context, name string) (int, error) { return o.count(ctx, name, 0) }

func (o *Opener) count(ctx context.Context, name string, maxMember int64) (int, error) {
	if isParquet(name) {
		return o.parquetCount(ctx, name, nil)
	}
	loc, err := parse(name)
	if err != nil {
		return 0, err
	}
	k, path := loc.k, loc.path
	var t *TarReader
	if k == local {
		f, err := regfile.Open(path)
		if err != nil {
			return 0, fmt.Errorf("shards: %w", err)
		}
		t = newTarReader(name, f, f, maxMember)
	} else {
		rc, err := o.Open(ctx, name)
		if err != nil {
			return 0, err
		}
		t = NewTarReader(name, rc, maxMember)
	}
	defer t.Close()
	return t.Count(ctx)
}

func remote(name string) bool {
	loc, err := parse(name)
	return err == nil && loc.k != local
}

// dir returns name up to and including its last slash, or a local
// path's last separator on Windows ("" for none).
func dir(name string) string {
	i := strings.LastIndexByte(name, '/')
	if filepath.Separator != '/' && !strings.Contains(name, "://") { // a local path on Windows
		i = strings.LastIndexAny(name, `/\`)
	}
	return name[:i+1]
}

// resolve returns the name of a shard that the shard list index lists as
// u: u itself when it is absolute (a URL, or a path from /), else u
// relative to the list's folder.
func resolve(index, u string) string {
	if strings.Contains(u, "://") || strings.HasPrefix(u, "/") || !strings.Contains(index, "://") && filepath.IsAbs(u) {
		return u
	}
	return dir(index) + strings.TrimPrefix(u, "./")
}

// Index is a shard index in the format of WebDataset's wids
// ("wids-shard-index-v1"): the shards with their sample counts, so that a
// remote dataset's shards need not be scanned. Relative URLs are relative
// to the list's folder. Make one with BuildIndex and upload it as
// shardlist.json beside the shards.
type Index struct {
	Kind    string       `json:"__kind__"`
	Version int          `json:"wids_version"`
	Name    string       `json:"name,omitempty"`
	Shards  []IndexEntry `json:"shardlist"`
}

// IndexEntry is one shard of an Index.
type IndexEntry struct {
	URL     string `json:"url"`
	Samples int    `json:"nsamples"`
	Bytes   int64  `json:"filesize,omitempty"`
}

// BuildIndex counts the samples of the shards names (with o; nil
// means a zero Opener), 16 at a time, and returns their list in the order
// of names, each named by its base name, to be stored beside them as
// shardlist.json. The first shard that fails cancels the others' reads.
func BuildIndex(ctx context.Context, o *Opener, names []string) (Index, error) {
	if o == nil {
		o = &Opener{}
	}
	l := Index{Kind: "wids-shard-index-v1", Version: 1, Shards: make([]IndexEntry, len(names))}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(scanConcurrency)
	for i, name := range names {
		g.Go(func() error {
			n, err := o.Count(gctx, name)
			if err != nil {
				return err
			}
			e := IndexEntry{URL: name[len(dir(name)):], Samples: n}
			if loc, _ := parse(name); loc.k == local {
				if fi, err := os.Stat(loc.path); err == nil {
					e.Bytes = fi.Size()
				}
			}
			l.Shards[i] = e
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return Index{}, err
	}
	return l, nil
}

// Field returns the bytes of rec's member ext, or an error naming the
// shard, the sample and the members it has. As in a WebDataset sample,
// "__key__" is the sample's key and "__url__" its shard, unless the
// sample has members of those names.
func Field(rec engine.Record, ext string) ([]byte, error) {
	b, ok := rec.Fields[ext]
	switch {
	case ok:
	case ext == "__key__":
		return []byte(rec.Key), nil
	case ext == "__url__":
		return []byte(rec.Shard), nil
	}
	if !ok {
		return nil, fmt.Errorf("shards: %s: sample %q has no .%s member (it has %s)", rec.Shard, rec.Key, ext, fieldList(rec.Fields))
	}
	return b, nil
}

// Int returns rec's member ext parsed as a decimal integer, as WebDataset
// stores class labels (".cls"); errors name the shard and sample.
func Int(rec engine.Record, ext string) (int64, error) {
	b, err := Field(rec, ext)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("shards: %s: sample %q: .%s: %w", rec.Shard, rec.Key, ext, err)
	}
	return v, nil
}
