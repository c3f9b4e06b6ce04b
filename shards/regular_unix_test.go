//go:build unix

package shards

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/shards/store"
)

// notRegular replaces the file at path by one of another kind: "fifo", a
// named pipe, or "zero", a symlink to /dev/zero. It returns what the
// error is to say.
func notRegular(t *testing.T, path, kind string) string {
	t.Helper()
	require.NoError(t, os.RemoveAll(path))
	switch kind {
	case "fifo":
		require.NoError(t, unix.Mkfifo(path, 0o644))
		return "a named pipe (FIFO)"
	case "zero":
		require.NoError(t, os.Symlink("/dev/zero", path))
		return "a character device"
	}
	t.Fatalf("unknown kind %q", kind)
	return ""
}

// soon returns what fn returns, failing the test where it blocks for 10
// s: it then opens each FIFO under dir for writing and closes it, which
// lets a reader blocked on one go on.
func soon(t *testing.T, dir string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	for {
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Errorf("blocks on a FIFO")
			filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Type()&os.ModeNamedPipe != 0 {
					if w, err := os.OpenFile(p, os.O_RDWR, 0); err == nil { // O_RDWR: opens without a reader
						w.Close()
					}
				}
				return nil
			})
		}
	}
}

// epoch0 loads epoch 0 of src and returns its batches' bytes.
func epoch0(src engine.Iterable) ([][]byte, error) {
	d, err := engine.FromIterable(context.Background(), src, engine.IterableConfig{})
	if err != nil {
		return nil, err
	}
	l, err := engine.New(d, engine.Config{BatchSize: 4, Backend: "cpu"})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	_, data, err := batches(nil, l, 0)
	return data, err
}

// Defect 5 (issue 35): a cached shard's .meta replaced by a FIFO hung a
// new Source on the cache's folder; by a symlink to /dev/zero, it ran
// the process out of memory. It is not a regular file: the shard is not
// taken as cached, and is downloaded again.
func TestCacheMetaNotRegular(t *testing.T) {
	for _, kind := range []string{"fifo", "zero"} {
		t.Run(kind, func(t *testing.T) {
			f, urls, _ := cacheServer(t, 5, 3)
			pattern := f.URL + "/train-{0000..0001}.tar"
			dir := t.TempDir()
			o := fastOpener()
			defer o.CloseIdleConnections()
			src, err := New(context.Background(), pattern, testSchema, decodeTest, UseOpener(o), Cache(dir, 1<<30))
			require.NoError(t, err)
			want, err := epoch0(src)
			require.NoError(t, err)
			require.NoError(t, src.Close())
			metas, _ := filepath.Glob(filepath.Join(dir, "*.tar.meta"))
			require.Len(t, metas, len(urls))
			for _, m := range metas {
				notRegular(t, m, kind)
			}
			shardRequests(f)

			var got [][]byte
			err = soon(t, dir, func() error {
				again, err := New(context.Background(), pattern, testSchema, decodeTest, UseOpener(o), Cache(dir, 1<<30))
				if err != nil {
					return err
				}
				defer again.Close()
				got, err = epoch0(again)
				return err
			})
			require.NoError(t, err)
			assert.Equal(t, want, got)
			assert.Positive(t, shardRequests(f), "the shards are downloaded again")
			for _, m := range metas {
				fi, err := os.Lstat(m)
				require.NoError(t, err)
				assert.True(t, fi.Mode().IsRegular(), "%s is replaced by the download's", m)
			}
		})
	}
}

// Every other file a Source of this package reads is refused the same
// way: a local tar or Parquet shard, a shard list.
func TestLocalFilesNotRegular(t *testing.T) {
	for _, kind := range []string{"fifo", "zero"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			paths, _ := writeShards(t, dir, 3, 2)
			pq, _ := writeParquetShards(t, t.TempDir(), 2, 3)
			list := filepath.Join(t.TempDir(), "shardlist.json")
			for name, open := range map[string]struct {
				path string
				run  func() error
			}{
				"tar shard": {paths[1], func() error {
					src, err := FromNames(paths, testSchema, decodeTest)
					if err != nil {
						return err
					}
					defer src.Close()
					_, err = epoch0(src)
					return err
				}},
				"tar shard, counted": {paths[1], func() error {
					_, err := (&Opener{}).Count(context.Background(), paths[1])
					return err
				}},
				"Parquet shard": {pq[0], func() error {
					src, err := FromNames(pq, testSchema, decodeTest)
					if err != nil {
						return err
					}
					defer src.Close()
					_, err = epoch0(src)
					return err
				}},
				"shard list": {list, func() error {
					src, err := FromNames(paths[:1], testSchema, decodeTest, IndexFile(list))
					if err != nil {
						return err
					}
					defer src.Close()
					_, err = epoch0(src)
					return err
				}},
			} {
				what := notRegular(t, open.path, kind)
				err := soon(t, filepath.Dir(open.path), open.run)
				assert.ErrorIs(t, err, ErrNotRegular, name)
				assert.ErrorContains(t, err, open.path, name)
				assert.ErrorContains(t, err, what, name)
			}
		})
	}
}

// A shard in a local folder that cannot be read (a pipe, a link to a
// device, to nothing or to itself) fails the listing, naming it: left
// out, it would shrink the dataset without a word. A folder, or a link
// to one, even named as a shard, is not a shard.
func TestListLocalFolderRefusesUnreadableShards(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		make func(path string) error
		want string
	}{
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o644) }, "is not a regular file (p"},
		{"link to /dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }, "is not a regular file (D"},
		{"link to nothing", func(p string) error { return os.Symlink(p+".missing", p) }, "no such file"},
		{"link loop", func(p string) error { return os.Symlink(p, p) }, "too many levels of symbolic links"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeShards(t, dir, 3)
			require.NoError(t, tc.make(filepath.Join(dir, "train-0001.tar")))
			_, err := List(context.Background(), nil, dir+"/")
			require.Error(t, err)
			assert.ErrorContains(t, err, "train-0001.tar")
			assert.ErrorContains(t, err, tc.want)
		})
	}
	dir := t.TempDir()
	writeShards(t, dir, 3)
	require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(dir, "linked.tar")))
	names, err := List(context.Background(), nil, dir+"/")
	require.NoError(t, err)
	assert.Equal(t, []string{dir + "/train-0000.tar"}, names, "a link to a folder is a folder")
}

// A configuration file that a store's SDK opens by name, made a FIFO (or
// a link to a device), is a one-line error naming it, at once: the SDK's
// own open would block forever.
func TestStoreConfigFilesNotRegular(t *testing.T) {
	for _, tc := range []struct {
		name, url, env string
		set            map[string]string
	}{
		{"s3 config", "s3://data/a.tar", "AWS_CONFIG_FILE", nil},
		{"s3 credentials", "s3://data/a.tar", "AWS_SHARED_CREDENTIALS_FILE", nil},
		{"s3 web identity", "s3://data/a.tar", "AWS_WEB_IDENTITY_TOKEN_FILE", nil},
		{"gs", "gs://data/a.tar", "GOOGLE_APPLICATION_CREDENTIALS", nil},
		{"az", "az://data/a.tar", "AZURE_FEDERATED_TOKEN_FILE", map[string]string{"AZURE_STORAGE_ACCOUNT": "mydata"}},
		{"https roots", "https://127.0.0.1:1/a.tar", "SSL_CERT_FILE", nil}, // read by Go's crypto/x509 at the first handshake
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearStoreEnv(t)
			fifo := filepath.Join(t.TempDir(), "fifo")
			require.NoError(t, syscall.Mkfifo(fifo, 0o644))
			t.Setenv(tc.env, fifo)
			for k, v := range tc.set {
				t.Setenv(k, v)
			}
			done := make(chan error, 1)
			go func() {
				_, err := (&Opener{}).Open(context.Background(), tc.url)
				done <- err
			}()
			select {
			case err := <-done:
				require.Error(t, err)
				assert.ErrorContains(t, err, tc.env+" ("+fifo+"): ")
				assert.ErrorContains(t, err, "named pipe")
				var ce *store.ConfigError
				assert.ErrorAs(t, err, &ce)
			case <-time.After(10 * time.Second):
				w, _ := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0) // lets a blocked open go on
				if w != nil {
					w.Close()
				}
				t.Fatal("the store's open blocks on a FIFO")
			}
		})
	}
	clearStoreEnv(t) // the default ~/.aws/config, as a link to a device
	home := os.Getenv("HOME")
	require.NoError(t, os.Mkdir(filepath.Join(home, ".aws"), 0o755))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(home, ".aws", "config")))
	_, err := (&Opener{}).Open(context.Background(), "s3://data/a.tar")
	assert.ErrorContains(t, err, "the default of AWS_CONFIG_FILE ("+filepath.Join(home, ".aws", "config")+"): ")
}

// What CheckFiles lets through: /dev/null and a link to it (the usual
// "no file"), and a descriptor the process inherited (`<(echo "$KEY")`:
// /dev/fd/N, a pipe its caller writes).
func TestStoreConfigFilesThatPass(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "config")
	require.NoError(t, os.Symlink(os.DevNull, link))
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	for _, path := range []string{os.DevNull, link, "/dev/fd/" + strconv.Itoa(int(r.Fd())), "/dev/stdin"} {
		t.Setenv("TB_TEST_FILE", path)
		assert.NoError(t, store.CheckFiles("TB_TEST_FILE", ""), path)
	}
	t.Setenv("TB_TEST_FILE", "")
	assert.NoError(t, store.CheckFiles("TB_TEST_FILE", ""), "unset, no default")
	assert.NoError(t, store.CheckFiles("TB_TEST_FILE", filepath.Join(dir, "missing")), "a default that is not there")
	assert.ErrorContains(t, store.CheckFiles("TB_TEST_FILE", "/dev/zero"), "the default of TB_TEST_FILE (/dev/zero): ")
}
