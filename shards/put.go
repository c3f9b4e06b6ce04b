package shards

import (
	"context"
	"fmt"
	"io"

	"github.com/tensorbatch/tensorbatch/internal/regfile"
	"github.com/tensorbatch/tensorbatch/shards/store"
)

// IsRemote reports whether name is read over the network: an http(s)://
// URL or an object store's.
func IsRemote(name string) bool { return remote(name) }

// Put writes the local file path as the object name
// ("s3://bucket/train/shard-000000.tar"), by the store's upload (S3: one
// PutObject, of at most 5 GiB; GCS: a media upload; Azure: a block blob's
// blocks), under the Opener's retry policy (a transient failure puts the
// whole file again).
// The store must be one that can write (package store's Putter: S3, GCS
// and Azure can; http(s):// cannot). With WriterConfig.OnShard, each shard
// is put as it is complete; then put the shardlist.json.
func (o *Opener) Put(ctx context.Context, name, path string) error {
	loc, err := parse(name)
	if err != nil {
		return err
	}
	if loc.k != viaStore {
		return fmt.Errorf("shards: %s: not an object store's URL: shards are put to s3://, gs:// or az://", name)
	}
	s, err := o.store(ctx, loc)
	if err != nil {
		return fmt.Errorf("shards: %s: %w", name, err)
	}
	p, ok := s.(store.Putter)
	if !ok {
		return fmt.Errorf("shards: %s: the %s store cannot write", name, loc.driver.Name)
	}
	f, err := regfile.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	var rs retries
	a, err := o.do(ctx, &rs, func() string { return "putting it" }, func(a *attempt) error {
		a.disarm() // an upload of many bytes may take longer than Timeout
		return p.Put(a.ctx, loc.bucket, loc.key, io.NewSectionReader(f, 0, fi.Size()), fi.Size())
	})
	if err != nil {
		return fmt.Errorf("shards: %s: %w", name, err)
	}
	a.end()
	return nil
}
