package shards

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tensorbatch/tensorbatch/shards/store"
)

// faultServer is Go's file server on a temp dir, on 127.0.0.1, with
// faults injected into its next responses.
type faultServer struct {
	*httptest.Server
	dir string

	mu       sync.Mutex
	fail     int           // the next fail responses are 503
	cuts     []int64       // the next responses end (the connection drops) after these many bytes
	stalls   int           // the next stalls responses go silent after stallAt bytes...
	stallAt  int64         //
	stallFor time.Duration // ...for this long
	noRange  bool          // answer every request with the whole file (200)
	etag     string        // ETag to send; "" none
	status   map[string]int
	log      []string        // "path range" of every request (Range, or Azure's x-ms-range)
	clients  map[string]bool // the connections requests came on (remote addresses)
	sent     atomic.Int64    // bytes of response bodies written
}

func newFaultServer(t testing.TB) *faultServer {
	dir := t.TempDir()
	return faultHandler(t, dir, http.FileServer(http.Dir(dir)))
}

// newFaultProxy is a faultServer in front of the HTTP server at addr
// (host:port), a reverse proxy: the faults hit the objects whose path
// ends in .tar.
func newFaultProxy(t testing.TB, addr string) *faultServer {
	p := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: addr})
	tr := &http.Transport{}
	p.Transport = tr
	t.Cleanup(tr.CloseIdleConnections)
	return faultHandler(t, "", p)
}

// faultHandler serves files by h, with the faults injected.
func faultHandler(t testing.TB, dir string, files http.Handler) *faultServer {
	f := &faultServer{dir: dir, status: map[string]int{}, clients: map[string]bool{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		rng := r.Header.Get("Range")
		if rng == "" {
			rng = r.Header.Get("X-Ms-Range")
		}
		f.log = append(f.log, r.URL.Path+" "+rng)
		f.clients[r.RemoteAddr] = true
		code := f.status[r.URL.Path]
		// Faults hit shards only, one at a time: a 503, else a cut or a stall.
		cut, stallAt, stallFor := int64(-1), int64(-1), time.Duration(0)
		switch {
		case code != 0 || !strings.HasSuffix(r.URL.Path, ".tar"):
		case f.fail > 0:
			f.fail--
			code = http.StatusServiceUnavailable
		case len(f.cuts) > 0:
			cut, f.cuts = f.cuts[0], f.cuts[1:]
		case f.stalls > 0:
			f.stalls--
			stallAt, stallFor = f.stallAt, f.stallFor
		}
		noRange, etag := f.noRange, f.etag
		f.mu.Unlock()
		if code != 0 {
			http.Error(w, "injected fault", code)
			return
		}
		if noRange {
			r.Header.Del("Range")
		}
		if etag != "" {
			w.Header().Set("ETag", etag)
		}
		files.ServeHTTP(&faultWriter{ResponseWriter: w, ctx: r.Context(), sent: &f.sent, cut: cut, stallAt: stallAt, stallFor: stallFor}, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *faultServer) inject(fn func(f *faultServer)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *faultServer) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

// faultWriter cuts or stalls a response body, and counts its bytes.
type faultWriter struct {
	http.ResponseWriter
	ctx      context.Context
	sent     *atomic.Int64 // the server's count
	n        int64
	cut      int64
	stallAt  int64
	stallFor time.Duration
}

func (w *faultWriter) Write(p []byte) (int, error) {
	if w.stallAt >= 0 && w.n+int64(len(p)) > w.stallAt {
		k := w.stallAt - w.n
		n, err := w.ResponseWriter.Write(p[:k])
		w.wrote(n)
		if err != nil {
			return n, err
		}
		w.ResponseWriter.(http.Flusher).Flush()
		w.stallAt = -1
		select {
		case <-time.After(w.stallFor):
		case <-w.ctx.Done():
			panic(http.ErrAbortHandler)
		}
		m, err := w.Write(p[k:])
		return n + m, err
	}
	if w.cut >= 0 && w.n+int64(len(p)) > w.cut {
		n, _ := w.ResponseWriter.Write(p[:w.cut-w.n])
		w.wrote(n)
		w.ResponseWriter.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // drops the connection mid-body
	}
	n, err := w.ResponseWriter.Write(p)
	w.wrote(n)
	return n, err
}

func (w *faultWriter) wrote(n int) {
	w.n += int64(n)
	w.sent.Add(int64(n))
}

func (w *faultWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

func testFile(t *testing.T, dir, name string, n int) []byte {
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*131 + i>>8)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	return data
}

func readVia(o *Opener, ctx context.Context, url string) ([]byte, error) {
	rc, err := o.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func fastOpener() *Opener {
	return &Opener{Backoff: time.Millisecond, Timeout: 2 * time.Second}
}

func TestHTTPRetriesAndResumes(t *testing.T) {
	f := newFaultServer(t)
	want := testFile(t, f.dir, "a.tar", 1<<20+123)
	url := f.URL + "/a.tar"
	for _, tc := range []struct {
		name    string
		inject  func(f *faultServer)
		retried int64
		ranges  []string // the Range headers of the requests, in order
	}{
		{"clean", func(*faultServer) {}, 0, []string{""}},
		{"503 twice", func(f *faultServer) { f.fail = 2 }, 2, []string{"", "", ""}},
		{"cut three times", func(f *faultServer) { f.cuts = []int64{1000, 70000, 5} }, 3,
			[]string{"", "bytes=1000-", "bytes=71000-", "bytes=71005-"}},
		{"range ignored", func(f *faultServer) { f.noRange, f.cuts = true, []int64{4096} }, 1, []string{"", "bytes=4096-"}},
		{"stall", func(f *faultServer) { f.stalls, f.stallAt, f.stallFor = 1, 300000, 5*time.Second }, 1, []string{"", "bytes=300000-"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.inject(func(f *faultServer) { f.log, f.noRange = nil, false })
			f.inject(tc.inject)
			o := fastOpener()
			o.Timeout = time.Second
			defer o.CloseIdleConnections()
			t0 := time.Now()
			got, err := readVia(o, context.Background(), url)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(want, got), "bytes differ")
			assert.Equal(t, tc.retried, o.ReadRetries())
			var ranges []string
			for _, r := range f.requests() {
				ranges = append(ranges, strings.TrimPrefix(r, "/a.tar "))
			}
			assert.Equal(t, tc.ranges, ranges)
			assert.Less(t, time.Since(t0), 4*time.Second)
		})
	}
}

func TestHTTPErrorsNameTheURLAndNeverHang(t *testing.T) {
	f := newFaultServer(t)
	testFile(t, f.dir, "a.tar", 200000)
	f.inject(func(f *faultServer) { f.status["/forbidden.tar"] = http.StatusForbidden })

	o := fastOpener()
	defer o.CloseIdleConnections()
	ctx := context.Background()
	_, err := o.Open(ctx, f.URL+"/missing.tar")
	assert.ErrorContains(t, err, "shards: "+f.URL+"/missing.tar: HTTP 404 Not Found")
	assert.True(t, errors.Is(err, fs.ErrNotExist), "a 404 is fs.ErrNotExist, as a missing local file is")
	_, err = o.Open(ctx, f.URL+"/forbidden.tar")
	assert.ErrorContains(t, err, "shards: "+f.URL+"/forbidden.tar: HTTP 403 Forbidden: injected fault")
	assert.Zero(t, o.ReadRetries(), "a 403 or 404 is not retried")

	// A 5xx that lasts past the budget.
	o.MaxRetries = 3
	f.inject(func(f *faultServer) { f.fail = 100 })
	_, err = o.Open(ctx, f.URL+"/a.tar")
	assert.ErrorContains(t, err, f.URL+"/a.tar: giving up at byte 0 after 3 retries: HTTP 503 Service Unavailable: injected fault")
	assert.EqualValues(t, 3, o.ReadRetries())
	f.inject(func(f *faultServer) { f.fail = 0 })

	// The shard changes between a cut and the resumption.
	f.inject(func(f *faultServer) { f.etag, f.cuts = `"v1"`, []int64{1000} })
	rc, err := o.Open(ctx, f.URL+"/a.tar")
	require.NoError(t, err)
	buf := make([]byte, 1000)
	_, err = io.ReadFull(rc, buf)
	require.NoError(t, err)
	f.inject(func(f *faultServer) { f.etag = `"v2"` })
	_, err = io.ReadAll(rc)
	assert.ErrorContains(t, err, `a.tar: changed while being read (version "\"v2\"", 200000 bytes; was "\"v1\"", 200000 bytes)`)
	rc.Close()
	f.inject(func(f *faultServer) { f.etag = "" })

	// A stall is cut by the caller's context, not waited out.
	f.inject(func(f *faultServer) { f.stalls, f.stallAt, f.stallFor = 1, 1000, time.Minute })
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err = readVia(o, cctx, f.URL+"/a.tar")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(t0), 30*time.Second, "not the minute of the stall")

	// A server that is gone: connections refused, retried, then an error.
	gone := httptest.NewServer(http.NotFoundHandler())
	url := gone.URL + "/a.tar"
	gone.Close()
	o2 := fastOpener()
	o2.MaxRetries = 2
	_, err = o2.Open(ctx, url)
	assert.ErrorContains(t, err, url+": giving up at byte 0 after 2 retries")
	assert.ErrorContains(t, err, "connection refused")
	o2.MaxRetries = -1
	_, err = o2.Open(ctx, url)
	assert.ErrorContains(t, err, url+": giving up at byte 0 after 0 retries")

	// Unknown schemes and bad s3 URLs.
	_, err = o.Open(ctx, "ftp://x/a.tar")
	assert.ErrorContains(t, err, `"ftp://x/a.tar": unknown scheme`)
	_, err = o.Open(ctx, "s3://bucket")
	assert.ErrorContains(t, err, `"s3://bucket": want s3://bucket/key`)
}

func TestHTTPEmptyAndSmallFiles(t *testing.T) {
	f := newFaultServer(t)
	testFile(t, f.dir, "empty.tar", 0)
	want := testFile(t, f.dir, "small.tar", 10)
	o := fastOpener()
	defer o.CloseIdleConnections()
	got, err := readVia(o, context.Background(), f.URL+"/empty.tar")
	require.NoError(t, err)
	assert.Empty(t, got)
	f.inject(func(f *faultServer) { f.cuts = []int64{9} })
	got, err = readVia(o, context.Background(), f.URL+"/small.tar")
	require.NoError(t, err)
	assert.Equal(t, want, got)
	data, found, err := o.ReadFile(context.Background(), f.URL+"/nothing.json")
	assert.NoError(t, err)
	assert.False(t, found)
	assert.Nil(t, data)
}

// A Content-Range is read as RFC 9110 writes it: an unknown total ("*")
// is an unknown size, anything else malformed, or a range not from the
// byte asked for, or a total that ends before the range, an error.
func TestRangeTotal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		off    int64
		cr     string
		length int64
		want   int64
		bad    bool
	}{
		{0, "", 100, 100, false},
		{0, "", -1, -1, false},
		{10, "", 90, 0, true},
		{0, "bytes 0-0/100", 1, 100, false},
		{10, "bytes 10-99/100", 90, 100, false},
		{0, "bytes 0-0/*", 1, -1, false},
		{0, "bytes 0--1/0", 0, 0, false},
		{0, "bytes 0--2/0", 0, 0, true},
		{5, "bytes 4-99/100", 96, 0, true},
		{0, "bytes 0-99/99", 100, 0, true},
		{0, "bytes 0-0", 1, 0, true},
		{0, "bytes */100", 0, 0, true},
		{0, "items 0-0/100", 1, 0, true},
		{0, "bytes 0-0/x", 1, 0, true},
	} {
		got, err := store.RangeTotal(c.off, c.cr, c.length)
		if c.bad {
			assert.Error(t, err, "%+v", c)
			continue
		}
		require.NoError(t, err, "%+v", c)
		assert.Equal(t, c.want, got, "%+v", c)
	}
}

// A server that answers the size probe without a total ("bytes 0-0/*")
// leaves the size unknown: the listing's counts go unchecked, as they
// did with a response of unknown length.
func TestSizeUnknownTotal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Range") == "bytes=0-0" {
			w.Header().Set("Content-Range", "bytes 0-0/*")
			w.WriteHeader(http.StatusPartialContent)
			w.Write([]byte{'x'})
			return
		}
		w.Write([]byte("xyz"))
	}))
	defer srv.Close()
	o := &Opener{}
	defer o.CloseIdleConnections()
	size, err := o.size(context.Background(), srv.URL+"/a.tar")
	require.NoError(t, err)
	assert.EqualValues(t, -1, size)
}
