package shards

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/tensorbatch/tensorbatch/shards/store"
)

// listPageSize is the most keys a page of a bucket's listing asks for
// (S3's MaxKeys, GCS's maxResults, Azure's maxresults); 0 leaves it to
// the server (1000 on S3). Tests set it small to page.
var listPageSize int

// isFolder reports whether name names a folder to list: it ends in "/"
// (for a local path, in a path separator too).
func isFolder(name string) bool {
	if strings.HasSuffix(name, "/") {
		return true
	}
	loc, err := parse(name)
	return err == nil && loc.k == local && name != "" && os.IsPathSeparator(name[len(name)-1])
}

// isIndexName reports whether name is a shard list's: its base name ends
// in ".json".
func isIndexName(name string) bool {
	base := name[strings.LastIndexAny(name, `/\`)+1:]
	base, _, _ = strings.Cut(base, "?")
	return strings.HasSuffix(strings.ToLower(base), ".json")
}

// isShardName reports whether a listed file is a shard: its name ends in
// ".tar" or ".parquet" (any case).
func isShardName(name string) bool {
	n := strings.ToLower(name)
	return strings.HasSuffix(n, ".tar") || strings.HasSuffix(n, ".parquet")
}

// List returns the shards in the folder prefix, which ends in "/":
//
//   - s3://bucket/prefix/, gs://bucket/prefix/, az://container/prefix/
//     (or azblob://), with the store's package imported: the objects directly under the prefix (listed with
//     delimiter "/", every page: S3's ListObjectsV2, GCS's objects.list,
//     Azure's List Blobs) whose names end in ".tar" or ".parquet", sorted
//     by name; others, such as shardlist.json, and deeper "folders" are
//     skipped. A page that fails transiently is retried as reads are (see
//     Opener). A page whose next-page token a page before it gave (a
//     listing that would never end), more than 100,000 pages or more than
//     10,000,000 shards are an error naming the store, bucket and prefix.
//   - http(s)://host/path/: the shards that the folder's shard list,
//     path/shardlist.json (see Index), names, in its order; a folder
//     without one is an error naming the list's URL, as HTTP has no
//     listing.
//   - a local folder (a path or file:// URL): its files, not its
//     subfolders, ending in ".tar" or ".parquet", sorted by name.
//
// A folder with no shard is an error naming it. o reads remote folders;
// nil means a zero Opener.
func List(ctx context.Context, o *Opener, prefix string) ([]string, error) {
	if !isFolder(prefix) {
		return nil, fmt.Errorf("shards: list %q: not a folder (want a name ending in /)", prefix)
	}
	if o == nil {
		o = &Opener{}
	}
	var names []string
	loc, isBucket, err := bucketURL(prefix) // not parse, which wants a key: a prefix may be ""
	switch {
	case err != nil:
	case isBucket:
		names, err = o.listBucket(ctx, prefix, loc)
	default:
		if loc, err = parse(prefix); err == nil {
			if loc.k == viaHTTP {
				names, err = o.listHTTP(ctx, prefix)
			} else {
				names, err = listLocal(prefix, loc.path)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("shards: %s: no shards (files ending in .tar or .parquet) in the folder", prefix)
	}
	return names, nil
}

// Bounds of a bucket's listing, which the server's answers could
// otherwise stretch without end: pages, and shards kept.
var (
	maxListPages  = 100_000
	maxListShards = 10_000_000
)

// listBucket lists an object store's prefix, at loc, page by page.
func (o *Opener) listBucket(ctx context.Context, prefix string, loc location) ([]string, error) {
	if loc.bucket == "" {
		return nil, fmt.Errorf("shards: %q: want %s://%s/prefix/", prefix, loc.scheme, loc.driver.Bucket)
	}
	s, err := o.store(ctx, loc)
	if err != nil {
		return nil, fmt.Errorf("shards: %s: %w", prefix, err)
	}
	return o.listPages(ctx, s, prefix, loc)
}

// listPages lists the object store's prefix (a URL) by s page by page,
// each page a request under the Opener's retry policy. A page whose
// next-page token one before it gave (A, A or A, B, A: a listing that
// would never end), more than maxListPages pages or maxListShards shards
// are an error naming the store, the bucket and the prefix.
func (o *Opener) listPages(ctx context.Context, s store.Store, prefix string, loc location) ([]string, error) {
	bucket, key := loc.bucket, loc.key
	where := fmt.Sprintf("%s (%s %s %q, prefix %q)", prefix, loc.driver.Name, loc.driver.Bucket, bucket, key)
	var names []string
	seen := map[[sha256.Size]byte]int{} // the pages by the token they gave
	var rs retries
	for page, token := 1, ""; ; page++ {
		if page > maxListPages {
			return nil, fmt.Errorf("shards: listing %s: more than %d pages", where, maxListPages)
		}
		var keys []string
		var next string
		a, err := o.do(ctx, &rs, func() string { return fmt.Sprintf("at page %d", page) }, func(a *attempt) error {
			var err error
			keys, next, err = s.List(a.ctx, bucket, key, token, listPageSize)
			return noSuchHost(loc, err)
		})
		if err != nil {
			return nil, fmt.Errorf("shards: listing %s: %w", prefix, err)
		}
		a.end()
		rs = retries{} // a page arrived
		for _, k := range keys {
			rest, ok := strings.CutPrefix(k, key)
			if ok && rest != "" && !strings.Contains(rest, "/") && isShardName(rest) {
				names = append(names, loc.scheme+"://"+bucket+"/"+k)
			}
		}
		if len(names) > maxListShards {
			return nil, fmt.Errorf("shards: listing %s: more than %d shards", where, maxListShards)
		}
		if next == "" {
			break
		}
		h := sha256.Sum256([]byte(next))
		if first, ok := seen[h]; ok {
			return nil, fmt.Errorf("shards: listing %s: page %d gives the next-page token page %d gave (%s): the listing would never end", where, page, first, abbrev(next))
		}
		seen[h] = page
		token = next
	}
	slices.Sort(names)
	return names, nil
}

// abbrev quotes s, its first 64 bytes where it is longer.
func abbrev(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "..."
	}
	return strconv.Quote(s)
}

// listHTTP returns the shards that prefix's shardlist.json names.
func (o *Opener) listHTTP(ctx context.Context, prefix string) ([]string, error) {
	index := prefix + "shardlist.json"
	data, found, err := o.ReadFile(ctx, index)
	return listedShards(prefix, index, data, found, err)
}

// listedShards returns the shards that the shard list index of the
// folder prefix names, read as data (found false: it does not exist)
// with err.
func listedShards(prefix, index string, data []byte, found bool, err error) ([]string, error) {
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, fmt.Errorf("shards: %s: no shard list %s (an HTTP folder is listed by its shardlist.json)", prefix, index)
	}
	if _, _, err := listedCounts(index, data); err != nil { // checks the list
		return nil, err
	}
	var l Index
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("shards: index %s: %w", index, err)
	}
	names := make([]string, 0, len(l.Shards))
	seen := make(map[string]bool, len(l.Shards))
	for _, e := range l.Shards {
		if name := resolve(index, e.URL); !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	return names, nil
}

// listLocal lists the local folder path (named prefix).
func listLocal(prefix, path string) ([]string, error) {
	entries, err := os.ReadDir(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("shards: %s: no such folder", prefix)
		}
		return nil, fmt.Errorf("shards: listing %s: %w", prefix, err)
	}
	var names []string
	for _, e := range entries {
		if !isShardName(e.Name()) || e.IsDir() {
			continue // a folder, even named so, is not a shard
		}
		if !e.Type().IsRegular() {
			// A link to a file counts, one to a folder is a folder; a
			// pipe, a device, or a link to one or to nothing is a shard
			// that cannot be read: an error, not a shard left out.
			fi, err := os.Stat(path + string(os.PathSeparator) + e.Name())
			switch {
			case err != nil:
				return nil, fmt.Errorf("shards: listing %s: %s: %w", prefix, e.Name(), err)
			case fi.IsDir():
				continue
			case !fi.Mode().IsRegular():
				return nil, fmt.Errorf("shards: listing %s: %s is not a regular file (%v)", prefix, e.Name(), fi.Mode().Type())
			}
		}
		names = append(names, prefix+e.Name())
	}
	slices.Sort(names) // ReadDir sorts already; the order is part of the contract
	return names, nil
}
