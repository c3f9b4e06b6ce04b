package shards

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/internal/objtest"
	"github.com/tensorbatch/tensorbatch/shards/store"
)

// dialCounter is an HTTP client for an Opener that counts its dials and
// fails each one as dial does, by err(host): no request leaves the
// process.
func dialCounter(dials *atomic.Int64, err func(host string) error) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		host, _, _ := net.SplitHostPort(addr)
		return nil, &net.OpError{Op: "dial", Net: network, Err: err(host)}
	}}}
}

// notFound is the DNS's answer that host does not exist.
func notFound(host string) error {
	return &net.DNSError{Err: "no such host", Name: host, Server: "127.0.0.53:53", IsNotFound: true}
}

// clearStoreEnv empties the variables of every store's credentials and
// endpoint, and gives the test a HOME of its own, without ~/.aws or
// gcloud's files.
func clearStoreEnv(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	for _, k := range []string{
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_CONFIG_FILE",
		"AWS_SHARED_CREDENTIALS_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_EC2_METADATA_DISABLED", "AWS_EC2_METADATA_SERVICE_ENDPOINT",
		"GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST", "GCE_METADATA_HOST", "NO_GCE_CHECK",
		"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_CLIENT_ID",
		"AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_TOKEN_CREDENTIALS",
		"IDENTITY_ENDPOINT", "IDENTITY_HEADER", "MSI_ENDPOINT", "IMDS_ENDPOINT",
	} {
		t.Setenv(k, "")
	}
}

// listener returns the address of a listener on 127.0.0.1 and the
// connections it has accepted so far.
func listener(t *testing.T) (string, func() int64) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var accepted atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return l.Addr().String(), accepted.Load
}

// closedPort returns host:port of a port on 127.0.0.1 that nothing
// listens on: a connection to it is refused at once.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Issue 38: with no endpoint, 4.7 s of retries ended in "no such host".
// A DNS answer that a host does not exist is not transient: the read,
// and a listing, fail at once, with one line naming the host and, for an
// object store, what sets its endpoint. A DNS server that does not
// answer, or answers that it failed, is still retried.
func TestNoSuchHostFailsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name, url, folder string
		env               map[string]string
		want              string // after "no such host \"nosuch.invalid\""
	}{
		{name: "http", url: "http://nosuch.invalid/a.tar"},
		{"s3", "s3://data/a.tar", "s3://data/train/", map[string]string{
			"AWS_ACCESS_KEY_ID": "AKEXAMPLE", "AWS_SECRET_ACCESS_KEY": "SECRETEXAMPLE", "AWS_REGION": "us-east-1",
			"AWS_ENDPOINT_URL_S3": "http://nosuch.invalid:7070"}, ": set AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL"},
		{"gs", "gs://data/a.tar", "gs://data/train/", map[string]string{"STORAGE_EMULATOR_HOST": "nosuch.invalid:4443"},
			": set STORAGE_EMULATOR_HOST"},
		{"az", "az://data/a.tar", "az://data/train/", map[string]string{
			"AZURE_STORAGE_CONNECTION_STRING": objtest.AzureConnectionString("http://nosuch.invalid:10000/" + objtest.AzureAccount)},
			": check the BlobEndpoint of AZURE_STORAGE_CONNECTION_STRING"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearStoreEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var dials atomic.Int64
			o := &Opener{HTTPClient: dialCounter(&dials, notFound), Backoff: time.Second}
			t0 := time.Now()
			_, err := o.Open(context.Background(), tc.url)
			require.Error(t, err)
			want := "shards: " + tc.url + `: no such host "nosuch.invalid"` + tc.want
			assert.True(t, strings.HasPrefix(err.Error(), want), "%v\nwant %s...", err, want)
			assert.NotContains(t, err.Error(), "\n")
			var ce *store.ConfigError
			assert.ErrorAs(t, err, &ce)
			var de *net.DNSError
			assert.ErrorAs(t, err, &de, "the DNS's answer stays in the chain")
			assert.Zero(t, o.ReadRetries())
			assert.EqualValues(t, 1, dials.Load(), "one try, through the Opener's HTTPClient")
			assert.Less(t, time.Since(t0), time.Second, "no backoff")
			if tc.folder != "" {
				_, err = List(context.Background(), o, tc.folder)
				assert.ErrorContains(t, err, `no such host "nosuch.invalid"`+tc.want)
				assert.Zero(t, o.ReadRetries())
			}
		})
	}

	ctx := context.Background()
	temporary := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "server misbehaving", Name: "h", IsTemporary: true}}
	assert.True(t, transient(ctx, temporary), "a DNS server that failed to answer: retried")
	assert.True(t, transient(ctx, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "i/o timeout", Name: "h", IsTimeout: true}}))
	assert.False(t, transient(ctx, &net.OpError{Op: "dial", Net: "tcp", Err: notFound("h")}))
	assert.False(t, transient(ctx, &store.TransientError{Err: &net.OpError{Op: "dial", Err: notFound("h")}}), "whatever wraps it")
	assert.False(t, transient(ctx, &store.ConfigError{Msg: "no credentials", Err: syscall.ECONNREFUSED}))

	var dials atomic.Int64
	o := &Opener{HTTPClient: dialCounter(&dials, func(string) error { return temporary.Err }), Backoff: time.Millisecond, MaxRetries: 2}
	_, err := o.Open(ctx, "http://h/a.tar")
	assert.ErrorContains(t, err, "giving up at byte 0 after 2 retries")
	assert.EqualValues(t, 3, dials.Load())
}

// Issue 38: missing credentials showed the SDKs' internals (the AWS
// SDK's account of the EC2 metadata service, retried for seconds;
// DefaultAzureCredential's list of every credential it tried, one a
// line). Each store's error is one line that says what to set, fails at
// once (a store.ConfigError: no retry) and reaches no network: the
// store's endpoint is a listener that accepts nothing or an HTTPClient
// that dials nothing, the EC2 metadata service a closed port.
func TestMissingCredentialsAreOneLine(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		env       func(t *testing.T) map[string]string
		want      string
	}{
		{"s3", "s3://data/a.tar", func(t *testing.T) map[string]string {
			env := map[string]string{"AWS_EC2_METADATA_DISABLED": "true"}
			if !testing.Short() { // the SDK's own 3 tries of the metadata service: 4 s
				env = map[string]string{"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://" + closedPort(t)}
			}
			return env
		}, "shards: s3://data/a.tar: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"},
		{"s3/profile", "s3://data/a.tar", func(t *testing.T) map[string]string {
			return map[string]string{"AWS_EC2_METADATA_DISABLED": "true", "AWS_PROFILE": "default"}
		}, `shards: s3://data/a.tar: AWS configuration: failed to get shared config profile, default`},
		{"gs", "gs://data/a.tar", func(*testing.T) map[string]string {
			return map[string]string{"NO_GCE_CHECK": "true"}
		}, "shards: gs://data/a.tar: Google Application Default Credentials: none found: set GOOGLE_APPLICATION_CREDENTIALS"},
		{"az", "az://data/a.tar", func(*testing.T) map[string]string { return nil },
			"shards: az://data/a.tar: no Azure storage account: set AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT"},
		{"az/identity", "az://data/a.tar", func(t *testing.T) map[string]string {
			// The developer tools of DefaultAzureCredential's chain (its
			// managed identity would ask 169.254.169.254), none installed.
			return map[string]string{"AZURE_STORAGE_ACCOUNT": "mydata", "AZURE_TOKEN_CREDENTIALS": "dev", "PATH": t.TempDir()}
		}, `shards: az://data/a.tar: no Azure credentials for the storage account "mydata": set AZURE_STORAGE_KEY, or AZURE_STORAGE_CONNECTION_STRING, or an identity`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearStoreEnv(t)
			endpoint, accepted := listener(t)
			t.Setenv("AWS_ENDPOINT_URL_S3", "http://"+endpoint)
			for k, v := range tc.env(t) {
				t.Setenv(k, v)
			}
			var dials atomic.Int64
			o := &Opener{Backoff: time.Second}
			if strings.HasPrefix(tc.name, "az") {
				o.HTTPClient = dialCounter(&dials, func(string) error { return syscall.ECONNREFUSED })
			}
			t0 := time.Now()
			_, err := o.Open(context.Background(), tc.url)
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), tc.want), "%v", err)
			assert.NotContains(t, err.Error(), "\n")
			assert.Zero(t, o.ReadRetries())
			if tc.name != "s3/profile" { // the SDK's configuration: no store is made
				var ce *store.ConfigError
				assert.ErrorAs(t, err, &ce)
			}
			assert.Zero(t, accepted(), "no request reached the endpoint")
			assert.Zero(t, dials.Load(), "no request left the process")
			assert.Less(t, time.Since(t0), 10*time.Second)
		})
	}
}
