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
// whole file again). Timeout bounds a silence, not the upload: a server
// that stops taking the body for Timeout fails the try.
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
		// The upload may take longer than Timeout; silence may not: each
		// read of the file by the store's client starts the timer again,
		// and the response is due within Timeout of the last.
		body := &armingReader{r: io.NewSectionReader(f, 0, fi.Size()), a: a}
		return p.Put(a.ctx, loc.bucket, loc.key, body, fi.Size())
	})
	if err != nil {
		return fmt.Errorf("shards: %s: %w", name, err)
	}
	a.end()
	return nil
}

// armingReader is an upload's body: each read restarts its attempt's
// timer, so that Timeout bounds a silence, not the upload. It seeks, as
// the section it reads does, for clients that read a body twice (to sign
// it, or to send it again).
type armingReader struct {
	r io.ReadSeeker
	a *attempt
}

func (b *armingReader) Read(p []byte) (int, error) {
	b.a.arm()
	return b.r.Read(p)
}

func (b *armingReader) Seek(off int64, whence int) (int64, error) { return b.r.Seek(off, whence) }
