package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/tensorbatch/tensorbatch/shards"
)

// output is where shards are written: a local folder, or an object
// store's prefix, whose shards are written to a temporary folder and put
// there one by one as each is complete (so the disk holds one shard at a
// time), then their shardlist.json and classes.json.
type output struct {
	dir    string // the local folder written
	prefix string // the object store's prefix, ending in "/"; "" for a local out
	o      shards.Opener
}

// newOutput returns the output of out: a local folder (a path or a
// file:// URL) or an object store's prefix (s3://, gs://, az://; a
// bucket's root too). Another URL is a usage error: http(s):// cannot be
// written, and a name the loader would not read as a store must not
// become a local folder named "s3:".
func newOutput(out string) (*output, error) {
	scheme, _, isURL := strings.Cut(out, "://")
	switch {
	case out == "":
		return nil, usagef("--out is empty: want a folder, or an s3://, gs:// or az:// prefix")
	case !isURL:
		return &output{dir: out}, nil
	case scheme == "file":
		u, err := url.Parse(out)
		if err != nil || u.Path == "" {
			return nil, usagef("--out %q: want file:///path", out)
		}
		return &output{dir: u.Path}, nil
	case scheme == "http" || scheme == "https":
		return nil, usagef("--out %q: HTTP cannot be written; want a folder, or an s3://, gs:// or az:// prefix", out)
	case !shards.IsRemote(strings.TrimSuffix(out, "/") + "/" + "shardlist.json"):
		return nil, usagef("--out %q: not an object store the command writes; want a folder, or an s3://, gs:// or az:// prefix", out)
	}
	dir, err := os.MkdirTemp("", "tensorbatch-shards-*")
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(out, "/") {
		out += "/"
	}
	return &output{dir: dir, prefix: out}, nil
}

// checkEmpty refuses an output that holds shards, a shard list or class
// names already: a folder is read as every shard in it, so shards of an
// earlier write left beside this one's (more of them, another format or
// prefix) would be read with them, and a write stopped halfway would
// leave the earlier list naming shards it removed.
func (x *output) checkEmpty(ctx context.Context, out string) error {
	var found []string
	if x.prefix == "" {
		entries, err := os.ReadDir(x.dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for _, e := range entries {
			n := strings.ToLower(e.Name())
			if strings.HasSuffix(n, ".tar") || strings.HasSuffix(n, ".parquet") || n == "shardlist.json" || n == "classes.json" {
				found = append(found, e.Name())
			}
		}
	} else {
		_, ok, err := x.o.ReadFile(ctx, x.prefix+"shardlist.json")
		if err != nil {
			return err
		}
		if ok {
			found = append(found, "shardlist.json")
		}
		if names, err := shards.List(ctx, &x.o, x.prefix); err == nil { // an error: none, or the puts will say
			found = append(found, names...)
		}
	}
	if len(found) == 0 {
		return nil
	}
	for i, n := range found {
		found[i] = filepath.Base(n)
	}
	if len(found) > 3 {
		found = append(found[:3], fmt.Sprintf("and %d more", len(found)-3))
	}
	return usagef("--out %s already holds %s: a folder is read as all the shards in it, so remove them or write to another --out", out, strings.Join(found, ", "))
}

// onShard is the WriterConfig.OnShard that puts each shard and removes
// its local copy; nil for a local out.
func (x *output) onShard(ctx context.Context) func(string, shards.IndexEntry) error {
	if x.prefix == "" {
		return nil
	}
	return func(path string, e shards.IndexEntry) error {
		if err := x.o.Put(ctx, x.prefix+e.URL, path); err != nil {
			return err
		}
		return os.Remove(path)
	}
}

// finish puts the named files of the local folder that exist
// (shardlist.json, classes.json) beside the shards.
func (x *output) finish(ctx context.Context, names ...string) error {
	if x.prefix == "" {
		return nil
	}
	for _, n := range names {
		p := filepath.Join(x.dir, n)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if err := x.o.Put(ctx, x.prefix+n, p); err != nil {
			return err
		}
	}
	return nil
}

// close removes the temporary folder of a remote out.
func (x *output) close() {
	if x.prefix != "" {
		os.RemoveAll(x.dir)
	}
	x.o.CloseIdleConnections()
}
