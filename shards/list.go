package shards

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// listPageSize is the MaxKeys of each ListObjectsV2 request; 0 leaves it
// to the server (1000 on S3). Tests set it small to page.
var listPageSize int32

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
//   - s3://bucket/prefix/: the objects directly under the prefix
//     (ListObjectsV2 with delimiter "/", every page) whose names end in
//     ".tar" or ".parquet", sorted by name; others, such as
//     shardlist.json, and deeper "folders" are skipped.
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
	if strings.HasPrefix(prefix, "s3://") { // parse wants a key; a prefix may be ""
		names, err = o.listS3(ctx, prefix)
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

// listS3 lists s3://bucket/prefix/ page by page.
func (o *Opener) listS3(ctx context.Context, prefix string) ([]string, error) {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(prefix, "s3://"), "/")
	if bucket == "" {
		return nil, fmt.Errorf("shards: %q: want s3://bucket/prefix/", prefix)
	}
	c, err := o.s3Client(ctx)
	if err != nil {
		return nil, fmt.Errorf("shards: %s: %w", prefix, err)
	}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(key), Delimiter: aws.String("/")}
	if listPageSize > 0 {
		in.MaxKeys = aws.Int32(listPageSize)
	}
	var names []string
	p := s3.NewListObjectsV2Paginator(c, in)
	for p.HasMorePages() {
		o.requests.Add(1)
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("shards: listing %s: %w", prefix, s3Error(err))
		}
		for _, obj := range page.Contents {
			k := aws.ToString(obj.Key)
			rest, ok := strings.CutPrefix(k, key)
			if ok && rest != "" && !strings.Contains(rest, "/") && isShardName(rest) {
				names = append(names, "s3://"+bucket+"/"+k)
			}
		}
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
