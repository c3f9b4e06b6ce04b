package shards

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
)

// TestShardListProbeRetriesCutBodies: the size probes that check a shard
// list's counts (one byte of each shard, by a range request) are retried
// when a body is cut short, as every read is, and counted; the listing
// does not fail (issue 35, item 2).
func TestShardListProbeRetriesCutBodies(t *testing.T) {
	f := newFaultServer(t)
	counts := []int{3, 2, 4, 1, 3, 2, 5, 1, 2, 3}
	paths, _ := writeShards(t, f.dir, counts...)
	writeList(t, paths, counts)

	o := fastOpener()
	defer o.CloseIdleConnections()
	src, err := New(context.Background(), f.URL+"/train-{0000..0009}.tar", testSchema, decodeTest, UseOpener(o))
	require.NoError(t, err)
	// The first three probes lose their one byte: the body ends after
	// the headers.
	f.inject(func(f *faultServer) { f.log, f.cuts = nil, []int64{0, 0, 0} })
	d, err := engine.FromIterable(context.Background(), src, engine.IterableConfig{})
	require.NoError(t, err)
	assert.Equal(t, 26, d.Len())
	assert.EqualValues(t, 3, o.ReadRetries(), "each cut probe retried once")
}

// TestClosedBeforeResponseIsTransient: a connection the server closes
// before any response (Go's client says io.EOF, in a *url.Error) is
// retried, on every kind of request (issue 35, item 3).
func TestClosedBeforeResponseIsTransient(t *testing.T) {
	assert.True(t, transient(context.Background(), &url.Error{Op: "Get", URL: "http://x/a.tar", Err: io.EOF}))

	f := newFaultServer(t)
	want := testFile(t, f.dir, "a.tar", 100000)
	var drops atomic.Int32
	drops.Store(2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if drops.Add(-1) >= 0 {
			panic(http.ErrAbortHandler) // closes the connection, nothing written
		}
		f.Config.Handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	o := fastOpener()
	defer o.CloseIdleConnections()
	got, err := readVia(o, context.Background(), srv.URL+"/a.tar")
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.EqualValues(t, 2, o.ReadRetries())

	drops.Store(2)
	size, err := (&Opener{Backoff: time.Millisecond}).size(context.Background(), srv.URL+"/a.tar")
	require.NoError(t, err)
	assert.EqualValues(t, len(want), size)
}

// TestRedirectsAreBounded: a server that redirects without end (to
// itself, or A to B to A) fails the read after 10 redirects, at once,
// naming the shard: a loop is not transient.
func TestRedirectsAreBounded(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/a.tar", "/storage/v1/b/data/o/a.tar":
			http.Redirect(w, r, r.URL.Path+"?again", http.StatusFound) // to itself
		case "/b.tar":
			http.Redirect(w, r, "/c.tar", http.StatusMovedPermanently)
		case "/c.tar":
			http.Redirect(w, r, "/b.tar", http.StatusTemporaryRedirect)
		}
	}))
	defer srv.Close()
	t.Setenv("STORAGE_EMULATOR_HOST", srv.Listener.Addr().String())
	for _, name := range []string{srv.URL + "/a.tar", srv.URL + "/b.tar", "gs://data/a.tar"} {
		hits.Store(0)
		o := fastOpener()
		_, err := o.Open(context.Background(), name)
		assert.ErrorContains(t, err, "shards: "+name+": ")
		assert.ErrorContains(t, err, "more than 10 redirects")
		assert.EqualValues(t, 11, hits.Load(), name)
		assert.Zero(t, o.ReadRetries(), name)
		o.CloseIdleConnections()
	}
}
