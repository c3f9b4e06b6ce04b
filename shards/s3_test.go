package shards

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/s3test"
)

// s3Bucket starts versitygw with its variables set for the test, makes a
// bucket and uploads files to it under their base names.
func s3Bucket(t *testing.T, bucket string, files ...string) *s3test.Server {
	t.Helper()
	return storeBucket(t, s3test.ForTest, bucket, files...)
}

func TestS3ErrorsNameTheShard(t *testing.T) {
	dir := t.TempDir()
	paths, _ := writeShards(t, dir, 3)
	srv := s3Bucket(t, "data", paths...)
	ctx := context.Background()

	o := &Opener{MaxRetries: 1, Backoff: time.Millisecond}
	defer o.CloseIdleConnections()
	_, err := o.Open(ctx, "s3://data/missing.tar")
	assert.ErrorContains(t, err, "shards: s3://data/missing.tar: HTTP 404 Not Found: NoSuchKey")
	_, err = o.Open(ctx, "s3://nobucket/a.tar")
	assert.ErrorContains(t, err, "shards: s3://nobucket/a.tar: HTTP 404 Not Found: NoSuchBucket")
	assert.Zero(t, o.ReadRetries())

	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey+"x")
	bad := &Opener{}
	defer bad.CloseIdleConnections()
	_, err = bad.Open(ctx, "s3://data/train-0000.tar")
	assert.ErrorContains(t, err, "shards: s3://data/train-0000.tar: HTTP 403 Forbidden: SignatureDoesNotMatch")
	src, err := New(context.Background(), "s3://data/train-0000.tar", testSchema, decodeTest, UseOpener(bad))
	require.NoError(t, err)
	_, err = engine.FromIterable(ctx, src, engine.IterableConfig{})
	assert.ErrorContains(t, err, "s3://data/train-0000.tar: HTTP 403 Forbidden")
	assert.Zero(t, bad.ReadRetries())
}

// TestS3ConfigFiles reads credentials and the endpoint from the AWS
// CLI's files alone.
func TestS3ConfigFiles(t *testing.T) {
	dir := t.TempDir()
	paths, _ := writeShards(t, dir, 4)
	srv := s3Bucket(t, "data", paths...)
	cfgFile, credFile := filepath.Join(dir, "config"), filepath.Join(dir, "credentials")
	require.NoError(t, os.WriteFile(cfgFile, fmt.Appendf(nil, "[profile tb]\nregion = %s\nservices = local\n\n[services local]\ns3 =\n  endpoint_url = %s\n", srv.Region, srv.Endpoint), 0o600))
	require.NoError(t, os.WriteFile(credFile, fmt.Appendf(nil, "[tb]\naws_access_key_id = %s\naws_secret_access_key = %s\n", srv.AccessKey, srv.SecretKey), 0o600))
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AWS_CONFIG_FILE", cfgFile)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", credFile)
	t.Setenv("AWS_PROFILE", "tb")
	o := &Opener{}
	defer o.CloseIdleConnections()
	n, err := o.Count(context.Background(), "s3://data/train-0000.tar")
	require.NoError(t, err)
	assert.Equal(t, 4, n)
}

// TestS3KillAndRestart kills the S3 server (SIGKILL) in the middle of an
// epoch read by 2 workers, streaming or through the cache (with no
// read-ahead, so that shard 1's download starts after the kill).
// Restarted on the same data within the retry budget, the epoch
// completes with every sample once (the ids are those of the
// uninterrupted run, in its order), byte-identical to the local run, and
// the retries show in Stats().Dataset["read_retries"]; left down, the epoch fails
// naming the shard after MaxRetries retries, after batches that repeat
// and skip nothing.
func TestS3KillAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("the S3 emulator, killed and restarted: slow; go test without -short runs it")
	}
	dir := t.TempDir()
	// Shards of 7 MB, more than the socket buffers hold: the kill cuts a
	// response in the middle of shard 0 when streaming.
	paths, pattern := writeShards(t, dir, 2000, 2000, 2000)
	index := writeList(t, paths, []int{2000, 2000, 2000})
	srv := s3Bucket(t, "data", append(paths, index)...)
	sc := engine.IterableConfig{ReadAheadBytes: 32 << 10}
	cfg := engine.Config{BatchSize: 10, Workers: 2, WorldSize: 1, Backend: "cpu"}
	local, err := New(context.Background(), pattern, testSchema, decodeTest)
	require.NoError(t, err)
	want, wantData, _, err := loadAll(t, local, sc, cfg, 0)
	require.NoError(t, err)
	require.Equal(t, seq(6000), flat(want))

	for _, cached := range []bool{false, true} {
		for _, restart := range []bool{true, false} {
			t.Run(fmt.Sprintf("cache=%v/restart=%v", cached, restart), func(t *testing.T) {
				o := &Opener{MaxRetries: 8, Backoff: 50 * time.Millisecond, Timeout: 5 * time.Second}
				if !restart {
					o.MaxRetries = 2
				}
				defer o.CloseIdleConnections()
				opts := []Option{UseOpener(o)}
				if cached {
					opts = append(opts, Cache(t.TempDir(), 1<<30), CacheReadAhead(0))
				}
				remote, err := New(context.Background(), "s3://data/train-{0000..0002}.tar", testSchema, decodeTest, opts...)
				require.NoError(t, err)
				defer remote.Close()
				d, err := engine.FromIterable(context.Background(), remote, sc)
				require.NoError(t, err)
				l, err := engine.New(d, cfg)
				require.NoError(t, err)
				defer l.Close()
				var got [][]int
				var gotData [][]byte
				restarted := make(chan error, 1)
				var epochErr error
				start := time.Now()
				for b, err := range l.Epoch(context.Background(), 0) {
					if err != nil {
						epochErr = err
						break
					}
					got = append(got, b.Indices())
					var all []byte
					for _, f := range testSchema {
						all = append(all, b.Tensor(f.Name).Bytes()...)
					}
					gotData = append(gotData, all)
					if len(got) == 20 { // in the middle of shard 0
						srv.Kill()
						if restart {
							// Down until a read has failed and been retried:
							// streaming, the read in flight at once; cached,
							// shard 1's download when the reader opens it.
							go func() {
								for deadline := time.Now().Add(10 * time.Second); o.ReadRetries() == 0 && time.Now().Before(deadline); {
									time.Sleep(5 * time.Millisecond)
								}
								time.Sleep(100 * time.Millisecond)
								restarted <- srv.Restart()
							}()
						}
					}
				}
				elapsed := time.Since(start)
				seen := map[int]bool{}
				for _, id := range flat(got) {
					assert.False(t, seen[id], "sample %d delivered twice", id)
					seen[id] = true
				}
				if restart {
					require.NoError(t, <-restarted)
					require.NoError(t, epochErr)
					ids := flat(got)
					slices.Sort(ids)
					assert.Equal(t, seq(6000), ids, "every sample exactly once")
					assert.Equal(t, want, got)
					assert.Equal(t, wantData, gotData, "byte-identical to the local run")
					assert.Positive(t, o.ReadRetries(), "reads were retried")
					assert.Equal(t, o.ReadRetries(), l.Stats().Dataset["read_retries"])
					t.Logf("retries: %d, epoch %v", o.ReadRetries(), elapsed)
					return
				}
				// The shard being read when the server died: shard 0, unless the
				// socket buffers (or, cached, the download) held all of it.
				require.Error(t, epochErr)
				assert.Regexp(t, `shards: s3://data/train-000[0-2]\.tar: .*giving up at byte \d+`, epochErr.Error())
				assert.Contains(t, epochErr.Error(), "after 2 retries")
				assert.Equal(t, want[:len(got)], got, "the batches before the error")
				assert.EqualValues(t, 2, o.ReadRetries())
				assert.Equal(t, o.ReadRetries(), l.Stats().Dataset["read_retries"])
				// 2 retries of at most 100 ms of backoff and refused connections:
				// the failure comes at once, not after a hang.
				assert.Less(t, elapsed, 20*time.Second)
				t.Logf("error after %v: %v", elapsed, epochErr)
				require.NoError(t, srv.Restart())
			})
		}
	}
}

// TestS3CABundle reads an object over HTTPS from an endpoint whose
// certificate only AWS_CA_BUNDLE vouches for, as the AWS CLI does.
func TestS3CABundle(t *testing.T) {
	want := []byte("shard bytes")
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/data/a.tar" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		w.Write(want)
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	t.Setenv("AWS_CA_BUNDLE", ca)
	t.Setenv("AWS_ENDPOINT_URL_S3", srv.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	o := &Opener{MaxRetries: -1}
	defer o.CloseIdleConnections()
	got, err := readVia(o, context.Background(), "s3://data/a.tar")
	require.NoError(t, err)
	assert.Equal(t, want, got)

	t.Setenv("AWS_CA_BUNDLE", "")
	os.Unsetenv("AWS_CA_BUNDLE")
	o2 := &Opener{MaxRetries: -1}
	defer o2.CloseIdleConnections()
	_, err = readVia(o2, context.Background(), "s3://data/a.tar")
	assert.ErrorContains(t, err, "shards: s3://data/a.tar: ")
	assert.ErrorContains(t, err, "certificate", "no bundle: the server's certificate is unknown")
}

// TestS3CacheChecksTheETag: a shard whose bytes do not hash to its S3
// ETag (an MD5, for an object uploaded in one part) is read, but not
// cached; one that does is.
func TestS3CacheChecksTheETag(t *testing.T) {
	want := bytes.Repeat([]byte("shard bytes "), 1000)
	sum := md5.Sum(want)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		etag := map[string]string{"/data/good.tar": hex.EncodeToString(sum[:]), "/data/bad.tar": strings.Repeat("0", 32)}[r.URL.Path]
		if etag == "" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", `"`+etag+`"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(want))
	}))
	defer srv.Close()
	t.Setenv("AWS_ENDPOINT_URL_S3", srv.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	log := logs(t)
	dir := t.TempDir()
	o := &Opener{MaxRetries: -1}
	defer o.CloseIdleConnections()
	src, err := FromNames([]string{"s3://data/good.tar", "s3://data/bad.tar"}, testSchema, decodeTest, UseOpener(o), Cache(dir, 1<<20), CacheReadAhead(0))
	require.NoError(t, err)
	defer src.Close()
	for _, name := range []string{"s3://data/good.tar", "s3://data/bad.tar"} {
		assert.Equal(t, want, readShard(t, src, name))
	}
	src.Close()
	names, _ := cachedFiles(t, dir)
	assert.Equal(t, []string{key("s3://data/good.tar")}, names)
	assert.Contains(t, log.String(), "s3://data/bad.tar: downloaded bytes with MD5 "+hex.EncodeToString(sum[:]))
	assert.NotContains(t, log.String(), "cache off", "a bad shard does not turn the cache off")
}
