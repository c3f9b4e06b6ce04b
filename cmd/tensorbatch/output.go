package main

import (
	"context"
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

// newOutput returns the output of out, a local folder or an object
// store's prefix (s3://, gs://, az://).
func newOutput(out string) (*output, error) {
	if !shards.IsRemote(out) {
		return &output{dir: out}, nil
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
