package shards

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
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
	k, _, _, _ := parse(name)
	return k == local && name != "" && os.IsPathSeparator(name[len(name)-1])
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
//     (or azblob://): the objects directly under the prefix (listed with
//     delimiter "/", every page: S3's ListObjectsV2, GCS's objects.list,
//     Azure's List Blobs) whose names end in ".tar" or ".parquet", sorted
//     by name; others, such as shardlist.json, and deeper "folders" are
//     skipped. A page that fails transiently is retried as reads are (see
//     Opener).
//   - http(s)://host/path/: the shards that the folder's shard list,
//     path/shardlist.json (see ShardList), names, in its order; a folder
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
	var err error
	if _, _, _, _, _, ok := splitBucket(prefix); ok { // parse wants a key; a prefix may be ""
		names, err = o.listBucket(ctx, prefix)
	} else {
		var k kind
		var path string
		if k, path, _, err = parse(prefix); err == nil {
			if k == viaHTTP {
				names, err = o.listHTTP(ctx, prefix)
			} else {
				names, err = listLocal(prefix, path)
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

// listBucket lists an object store's prefix page by page.
func (o *Opener) listBucket(ctx context.Context, prefix string) ([]string, error) {
	k, scheme, what, bucket, key, _ := splitBucket(prefix)
	if bucket == "" {
		return nil, fmt.Errorf("shards: %q: want %s%s/prefix/", prefix, scheme, what)
	}
	s, err := o.store(ctx, k)
	if err != nil {
		return nil, fmt.Errorf("shards: %s: %w", prefix, err)
	}
	var names []string
	for token, fails := "", 0; ; {
		o.requests.Add(1)
		pctx, cancel := context.WithTimeout(ctx, o.timeout()) // a page never hangs
		keys, next, err := s.list(pctx, bucket, key, token)
		cancel()
		if err != nil {
			if fails < o.maxRetries() && transient(ctx, err) {
				fails++
				if err = o.wait(ctx, fails); err == nil {
					continue
				}
			}
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			return nil, fmt.Errorf("shards: listing %s: %w", prefix, err)
		}
		fails = 0
		for _, k := range keys {
			rest, ok := strings.CutPrefix(k, key)
			if ok && rest != "" && !strings.Contains(rest, "/") && isShardName(rest) {
				names = append(names, scheme+bucket+"/"+k)
			}
		}
		if next == "" {
			break
		}
		token = next
	}
	slices.Sort(names)
	return names, nil
}

// listHTTP returns the shards that prefix's shardlist.json names.
func (o *Opener) listHTTP(ctx context.Context, prefix string) ([]string, error) {
	index := prefix + "shardlist.json"
	data, found, err := o.ReadFile(ctx, index)
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, fmt.Errorf("shards: %s: no shard list %s (an HTTP folder is listed by its shardlist.json)", prefix, index)
	}
	if _, _, err := listedCounts(index, data); err != nil { // checks the list
		return nil, err
	}
	var l ShardList
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
		if !isShardName(e.Name()) {
			continue
		}
		if !e.Type().IsRegular() {
			fi, err := os.Stat(path + string(os.PathSeparator) + e.Name()) // a link to a file counts
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
		}
		names = append(names, prefix+e.Name())
	}
	slices.Sort(names) // ReadDir sorts already; the order is part of the contract
	return names, nil
}
