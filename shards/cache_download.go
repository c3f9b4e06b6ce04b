package shards

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/tensorbatch/tensorbatch/internal/regfile"
)

// NOTE: the cache's protocol. Each cached shard k has three files in
// the folder: k (the shard), k.meta (its URL, size and ETag) and k.lock
// (never removed; an flock on it is the shard's state across processes).
//
//   - Read: take k.lock shared; if k and k.meta agree, read k, holding the
//     lock until Close (it keeps evictors out). Set k's mtime (LRU). A
//     process remembers the shards it found whole or downloaded: for those
//     a k of the size it had stands for the agreement (a file reaches k
//     only by the rename of a checked download), and read-ahead skips them
//     without looking.
//   - Download: take k.lock exclusive (non-blocking); check again that k is
//     not whole; remove what is at k; reserve room (evicting); write
//     k.part-*; on EOF check size and ETag, fsync, write k.meta (temp and
//     rename), rename k.part-* to k; release the lock. Readers in this
//     process follow the temp file as it grows (a download); other
//     processes poll for the lock, then read k.
//   - Evict: take k.lock exclusive (non-blocking, so never one read or
//     downloaded elsewhere), skip k read or downloaded in this process;
//     remove k.meta, then k.
//   - Crash: a temp file whose lock can be taken exclusive is a crashed
//     download's, removed when a Source first opens the folder. k.meta
//     without k, or k that disagrees with k.meta, is not whole.
//   - Faults: a write that fails (ENOSPC, EROFS) removes the temp file and
//     turns the cache off (one warning); its readers go on from the
//     server, from the byte the file reached. Close cancels the downloads:
//     their readers go on from the server too.

// start starts downloading shard name, whose lock lk it holds
// exclusively, into the cache; nil, with lk closed, once the cache is
// closed or off, or too many read-aheads are in flight.
func (c *cache) start(name, k string, lk *fileLock, ahead bool) *download {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off != nil || c.closed || c.downloads[k] != nil || ahead && c.aheadNow >= c.ahead {
		lk.close()
		return nil
	}
	d := &download{c: c, name: name, key: k, ahead: ahead, total: -1, changed: make(chan struct{})}
	c.downloads[k] = d
	if ahead {
		c.aheadNow++
	}
	c.wg.Add(1)
	go d.run(lk)
	return d
}

// A download's states.
const (
	starting  = iota // no response yet
	writing          // bytes go to the temp file
	committed        // the whole shard is in the cache
	failed           // the read failed: err
	abandoned        // the cache is not written: readers go on from the server
)

// download is a shard being fetched into the cache, which readers
// (followers) read as its file grows. Its fields after c are guarded by
// mu.
type download struct {
	c     *cache
	name  string
	key   string
	ahead bool

	mu       sync.Mutex
	state    int
	err      error
	tmp      string // the temp file, then the cached file
	written  int64
	total    int64
	version  string
	reserved int64
	changed  chan struct{} // closed and replaced at each change
}

func (d *download) update(fn func()) {
	d.mu.Lock()
	fn()
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
}

func (d *download) run(lk *fileLock) {
	c := d.c
	defer c.wg.Done()
	d.fetch()
	c.mu.Lock()
	delete(c.downloads, d.key)
	c.reserved -= d.reserved
	if d.ahead {
		c.aheadNow--
	}
	c.mu.Unlock()
	lk.close()
}

// fetch downloads the shard into a temp file and renames it.
func (d *download) fetch() {
	c := d.c
	r, err := c.o.openRemote(c.ctx, d.name, 0, "", -1)
	if err != nil {
		d.fail(err)
		return
	}
	defer r.Close()
	d.update(func() { d.total, d.version = r.total, r.version })
	// What is there under the shard's name is not whole (else there would
	// be no download) and no one reads it (the lock is this download's).
	c.forget(d.key)
	os.Remove(c.path(d.key) + ".meta")
	os.Remove(c.path(d.key))
	if r.total < 0 || !c.reserve(r.total) {
		// No size, or no room beside the shards being read: stream.
		d.update(func() { d.state = abandoned })
		return
	}
	d.reserved = r.total
	f, err := os.CreateTemp(c.dir, d.key+".part-*")
	if err != nil {
		c.disable(err)
		d.update(func() { d.state = abandoned })
		return
	}
	d.update(func() { d.state, d.tmp = writing, f.Name() })
	var sum hash.Hash
	if r.md5 != nil {
		sum = md5.New()
	}
	buf := make([]byte, 256<<10)
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			if _, err := cacheWrite(f, buf[:n]); err != nil {
				d.drop(f, err, true)
				return
			}
			if sum != nil {
				sum.Write(buf[:n])
			}
			d.update(func() { d.written += int64(n) })
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			f.Close()
			os.Remove(f.Name())
			d.fail(rerr)
			return
		}
	}
	switch {
	case d.written != r.total:
		d.drop(f, fmt.Errorf("shards: %s: downloaded %d bytes, the server said %d", d.name, d.written, r.total), false)
		return
	case sum != nil && !bytes.Equal(sum.Sum(nil), r.md5):
		d.drop(f, fmt.Errorf("shards: %s: downloaded bytes with MD5 %x, the server says %x (ETag %s)", d.name, sum.Sum(nil), r.md5, r.version), false)
		return
	}
	if err := d.commit(f, r.version); err != nil {
		d.drop(f, err, true)
		return
	}
	if sum == nil {
		c.unverified.Add(1)
		warnUnverified(d.name)
	}
}

// warnedUnverified holds the stores (see storeName) whose downloads,
// unchecked by an MD5, have been warned of in this process.
var warnedUnverified sync.Map

// warnUnverified warns, once per store and process, that the download
// of shard name, the first of its store, was checked by its size alone:
// the store gives no MD5 of its objects (HTTP servers but GCS's; S3
// objects uploaded in parts, whose ETag is not one; objects put into a
// store with no checksum).
func warnUnverified(name string) {
	st := storeName(name)
	if _, dup := warnedUnverified.LoadOrStore(st, true); !dup {
		slog.Warn("shards: the store gives no MD5 of its objects, so the cache checks what it downloads by size alone (StorageStats.Unverified counts them)", "store", st, "shard", name)
	}
}

// storeName names the store of the remote shard name: its scheme and
// host, or bucket ("https://host:8080", "s3://bucket").
func storeName(name string) string {
	scheme, rest, _ := strings.Cut(name, "://")
	host, _, _ := strings.Cut(rest, "/")
	return scheme + "://" + host
}

// fail ends the download with err, its readers' error, unless it is
// the cache's close: then they go on from the server.
func (d *download) fail(err error) {
	if d.c.ctx.Err() != nil {
		d.update(func() { d.state = abandoned })
		return
	}
	d.update(func() { d.state, d.err = failed, err })
}

// commit syncs and closes the temp file f, writes the shard's .meta and
// renames f to the shard's cached name.
func (d *download) commit(f *os.File, version string) error {
	c := d.c
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	meta, err := json.Marshal(entryMeta{URL: d.name, Size: d.written, ETag: version})
	if err != nil {
		return err
	}
	mf, err := os.CreateTemp(c.dir, d.key+".meta.part-*")
	if err != nil {
		return err
	}
	_, err = cacheWrite(mf, meta)
	if cerr := mf.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(mf.Name(), c.path(d.key)+".meta")
	}
	if err != nil {
		os.Remove(mf.Name())
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := os.Rename(f.Name(), c.path(d.key)); err != nil {
		return err
	}
	c.remember(d.key, d.name, d.written, version)
	d.state, d.tmp = committed, c.path(d.key)
	close(d.changed)
	d.changed = make(chan struct{})
	return nil
}

// drop removes the temp file f and abandons the download, turning the
// cache off when err is the cache's fault (a full disk), else logging
// err; its readers go on from the server.
func (d *download) drop(f *os.File, err error, cacheFault bool) {
	f.Close()
	os.Remove(f.Name())
	if cacheFault {
		d.c.disable(err)
	} else {
		slog.Warn("shards: shard not cached", "err", err)
	}
	d.update(func() { d.state = abandoned })
}

// follow returns a reader of the download's shard, once the server has
// answered: its error, if it failed then.
func (d *download) follow(ctx context.Context) (io.ReadCloser, error) {
	d.mu.Lock()
	for d.state == starting {
		ch := d.changed
		d.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("shards: %s: %w", d.name, context.Cause(ctx))
		}
		d.mu.Lock()
	}
	state, err, path := d.state, d.err, d.tmp
	var f *os.File
	if state != failed && path != "" {
		// Opened under mu, which the rename to the cached name holds.
		f, err = regfile.Open(path)
	}
	d.mu.Unlock()
	switch {
	case state == failed:
		return nil, err
	case f == nil: // abandoned before a byte was written, or dropped since
		return d.c.o.Open(ctx, d.name)
	}
	return &follower{d: d, ctx: ctx, f: d.c.use(d.key, f, nil)}, nil
}

// follower reads a download's file as it grows, then, if the download
// is abandoned, the rest from the server.
type follower struct {
	d      *download
	ctx    context.Context
	f      io.ReadCloser // *cachedReader
	off    int64
	direct io.ReadCloser
	err    error // sticky
}

func (r *follower) Read(p []byte) (int, error) {
	if r.direct != nil {
		return r.direct.Read(p)
	}
	if r.err != nil {
		return 0, r.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	d := r.d
	for {
		d.mu.Lock()
		state, err, written, total, version, ch := d.state, d.err, d.written, d.total, d.version, d.changed
		d.mu.Unlock()
		if r.off < written {
			n, err := r.f.(*cachedReader).ReadAt(p[:min(int64(len(p)), written-r.off)], r.off)
			r.off += int64(n)
			if n > 0 {
				return n, nil
			}
			r.err = fmt.Errorf("shards: %s: reading its download: %w", d.name, err)
			return 0, r.err
		}
		switch state {
		case committed:
			return 0, io.EOF
		case failed:
			r.err = err
			return 0, err
		case abandoned:
			if total >= 0 && r.off >= total {
				return 0, io.EOF
			}
			rr, err := d.c.o.openRemote(r.ctx, d.name, r.off, version, total)
			if err != nil {
				r.err = err
				return 0, err
			}
			r.direct = rr
			return rr.Read(p)
		}
		select {
		case <-ch:
		case <-r.ctx.Done():
			r.err = fmt.Errorf("shards: %s: %w", d.name, context.Cause(r.ctx))
			return 0, r.err
		}
	}
}

func (r *follower) Close() error {
	if r.direct != nil {
		r.direct.Close()
	}
	if r.err == nil {
		r.err = fmt.Errorf("shards: %s: read after Close", r.d.name)
	}
	return r.f.Close()
}
