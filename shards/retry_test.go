package shards

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/internal/objtest"
	"github.com/tensorbatch/tensorbatch/internal/s3test"
	"github.com/tensorbatch/tensorbatch/shards/store"
)

// A faultKind is what faultProxy does to a request.
type faultKind int

const (
	pass       faultKind = iota // forwarded as is: a step before the fault
	refuse                      // the proxy stops listening: connections are refused
	closeEarly                  // the connection closes before any response
	cutBody                     // the body ends after `at` bytes: the connection drops
	status503                   // 503 Service Unavailable
	stall                       // the body goes silent after `at` bytes, past the Opener's Timeout
)

// A step is what faultProxy does to the next request that match selects.
// A refuse step selects no request: the proxy goes down when the step is
// reached, and up again once the client has retried a refused
// connection (faultProxy.onRetry).
type step struct {
	match func(r *http.Request) bool
	fault faultKind
	at    int64 // cutBody, stall: the body bytes sent first
}

// faultProxy is an HTTP server on 127.0.0.1 in front of a backend (an
// emulator, through a reverse proxy, or a file server) that injects the
// faults of its steps, in order, into the requests they select; other
// requests pass.
type faultProxy struct {
	backend http.Handler
	srv     *http.Server
	addr    string
	url     string
	serving sync.WaitGroup

	mu    sync.Mutex
	ln    net.Listener // nil while refusing
	conns map[net.Conn]http.ConnState
	steps []step
	sent  atomic.Int64
	quit  chan struct{} // closed at the test's end: stalled uploads' handlers return
}

type connCount struct{}

func newFaultProxyOf(t testing.TB, backend http.Handler) *faultProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &faultProxy{backend: backend, addr: ln.Addr().String(), conns: map[net.Conn]http.ConnState{}, quit: make(chan struct{})}
	p.url = "http://" + p.addr
	p.srv = &http.Server{
		Handler: p,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connCount{}, new(atomic.Int32))
		},
		ConnState: p.connState,
	}
	p.serve(ln)
	t.Cleanup(func() {
		close(p.quit)
		p.srv.Close()
		p.serving.Wait()
	})
	return p
}

// newStoreProxy is a faultProxy in front of the emulator at addr.
func newStoreProxy(t testing.TB, addr string) *faultProxy {
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: addr})
	tr := &http.Transport{}
	rp.Transport = tr
	rp.ErrorLog = log.New(io.Discard, "", 0) // the faults' aborted copies
	t.Cleanup(tr.CloseIdleConnections)
	return newFaultProxyOf(t, rp)
}

func (p *faultProxy) serve(ln net.Listener) {
	p.ln = ln
	p.serving.Add(1)
	go func() {
		defer p.serving.Done()
		p.srv.Serve(ln)
	}()
}

func (p *faultProxy) connState(c net.Conn, s http.ConnState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s == http.StateClosed || s == http.StateHijacked {
		delete(p.conns, c)
		return
	}
	p.conns[c] = s
	if p.ln == nil && (s == http.StateNew || s == http.StateIdle) { // down: no connection serves another request
		c.Close()
	}
}

// arm sets the steps to take; a refuse step first goes down at once.
func (p *faultProxy) arm(steps ...step) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.steps = steps
	p.reached()
}

// advance takes the current step off; p.mu is held.
func (p *faultProxy) advance() {
	p.steps = p.steps[1:]
	p.reached()
}

// reached goes down where the current step is a refuse; p.mu is held.
func (p *faultProxy) reached() {
	if len(p.steps) == 0 || p.steps[0].fault != refuse || p.ln == nil {
		return
	}
	p.ln.Close()
	p.ln = nil
	for c, s := range p.conns {
		if s != http.StateActive {
			c.Close()
		}
	}
}

// onRetry is the Opener's hook: a refused connection retried brings the
// proxy up again, past its refuse step.
func (p *faultProxy) onRetry(err error) {
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		panic(fmt.Sprintf("faultProxy: listening again on %s: %v", p.addr, err))
	}
	p.serve(ln)
	p.advance()
}

// done reports whether every step was taken.
func (p *faultProxy) done() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.steps) == 0
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	first := r.Context().Value(connCount{}).(*atomic.Int32).Add(1) == 1
	p.mu.Lock()
	if p.ln == nil { // down: a request on a connection kept open
		p.mu.Unlock()
		panic(http.ErrAbortHandler)
	}
	st := step{fault: pass}
	if len(p.steps) > 0 && p.steps[0].fault != refuse && p.steps[0].match(r) {
		st = p.steps[0]
		// Go's client retries a request closed early on a connection
		// used before, by itself and unseen: the fault holds until one
		// on a new connection.
		if st.fault != closeEarly || first {
			p.advance()
		}
	}
	p.mu.Unlock()
	fw := &faultWriter{ResponseWriter: w, ctx: r.Context(), sent: &p.sent, cut: -1, stallAt: -1}
	switch st.fault {
	case closeEarly:
		panic(http.ErrAbortHandler) // nothing written
	case status503:
		http.Error(w, "injected fault", http.StatusServiceUnavailable)
		return
	case cutBody:
		if upload(r) { // the request's body: the connection drops after at bytes of it
			io.CopyN(io.Discard, r.Body, st.at)
			panic(http.ErrAbortHandler)
		}
		fw.cut = st.at
	case stall:
		if upload(r) { // the request's body: read no further, so that the client's writes block
			io.CopyN(io.Discard, r.Body, st.at)
			select {
			case <-p.quit:
			case <-time.After(time.Minute):
			}
			panic(http.ErrAbortHandler)
		}
		fw.stallAt, fw.stallFor = st.at, time.Minute // until the client goes
	}
	p.backend.ServeHTTP(fw, r)
}

// failedWrite reports whether err is a write to a connection the
// server dropped, or that the client closed on the server's answer.
func failedWrite(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

// upload reports whether r writes an object (S3's PutObject, GCS's
// media upload, Azure's Put Blob or Put Block): its faults hit its body.
func upload(r *http.Request) bool {
	return r.Method == http.MethodPut || r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/upload/")
}

// rangeOf is a request's Range (Azure's x-ms-range too).
func rangeOf(r *http.Request) string {
	if v := r.Header.Get("Range"); v != "" {
		return v
	}
	return r.Header.Get("X-Ms-Range")
}

// listing reports whether r asks for a page of a bucket's listing, and
// whether it has a next-page token (S3's ListObjectsV2, GCS's
// objects.list, Azure's List Blobs).
func listing(r *http.Request) (page, token bool) {
	q := r.URL.Query()
	switch {
	case q.Get("list-type") == "2":
		return true, q.Has("continuation-token")
	case q.Get("comp") == "list":
		return true, q.Get("marker") != ""
	case strings.HasSuffix(r.URL.Path, "/o") && q.Has("delimiter"):
		return true, q.Has("pageToken")
	}
	return false, false
}

// object selects the GETs of an object whose path ends in suffix, with a
// Range for which rng is true.
func object(suffix string, rng func(string) bool) func(*http.Request) bool {
	return func(r *http.Request) bool {
		return strings.HasSuffix(r.URL.Path, suffix) && rng(rangeOf(r))
	}
}

func whole(rng string) bool { return rng == "" || rng == "bytes=0-" }

// retryFixture is what every store of TestRetryPolicy holds: 5 tar
// shards under ds/ (and, for HTTP, their shardlist.json), and a Parquet
// file of more than footerTail bytes under pq/.
type retryFixture struct {
	dir       string // ds/ and pq/
	big       string // a file of 24 MiB to put, not in dir
	shard     []byte // ds/train-0001.tar
	shardList []string
	rows      int
}

func newRetryFixture(t *testing.T) *retryFixture {
	f := &retryFixture{dir: t.TempDir(), rows: 60}
	f.big = filepath.Join(t.TempDir(), "up.tar")
	big := make([]byte, 24<<20)
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < len(big); i += 8 {
		binary.LittleEndian.PutUint64(big[i:], r.Uint64())
	}
	require.NoError(t, os.WriteFile(f.big, big, 0o644))
	ds, pq := filepath.Join(f.dir, "ds"), filepath.Join(f.dir, "pq")
	require.NoError(t, os.Mkdir(ds, 0o755))
	require.NoError(t, os.Mkdir(pq, 0o755))
	counts := []int{5, 6, 4, 3, 5}
	paths, _ := writeShards(t, ds, counts...)
	writeList(t, paths, counts)
	var err error
	f.shard, err = os.ReadFile(paths[1])
	require.NoError(t, err)
	require.Greater(t, len(f.shard), 3000)
	rng := rand.New(rand.NewPCG(1, 2))
	rows := make([]wdsRow, f.rows)
	for i := range rows {
		b := make([]byte, 2000) // random: Snappy keeps them as large
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		v := int64(i)
		rows[i] = wdsRow{Image: &hfImage{Bytes: b}, Cls: &v}
	}
	pqPath := filepath.Join(pq, "train-0000.parquet")
	writeParquet(t, pqPath, rows, 20)
	fi, err := os.Stat(pqPath)
	require.NoError(t, err)
	require.Greater(t, fi.Size(), int64(footerTail), "the footer is read by a range request")
	for i := range counts {
		f.shardList = append(f.shardList, fmt.Sprintf("ds/train-%04d.tar", i))
	}
	return f
}

// upload puts the fixture's files into the bucket "data" of srv.
func (f *retryFixture) upload(t *testing.T, srv emulator) {
	require.NoError(t, srv.CreateBucket("data"))
	for _, key := range append(slices.Clone(f.shardList), "pq/train-0000.parquet") {
		data, err := os.ReadFile(filepath.Join(f.dir, key))
		require.NoError(t, err)
		require.NoError(t, srv.Put("data", key, data))
	}
}

// TestRetryPolicy: every kind of remote request the package makes goes
// through the Opener's one retry policy, on every store. Each cell
// injects one failure into one request, through a faultProxy in front
// of the store (the emulators of S3, GCS and Azure; a file server for
// HTTP), and checks that the operation gets the right answer, that
// ReadRetries counted the retries, and that a retried failure was the
// one injected.
func TestRetryPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("fault injection on every store: slow; go test without -short runs it")
	}
	fx := newRetryFixture(t)
	defer func(n int) { listPageSize = n }(listPageSize)
	listPageSize = 2 // the 5 shards' listing takes 3 pages

	failures := []struct {
		name  string
		fault faultKind
		is    func(err error) bool // the retried failure is the one injected
	}{
		{"refused", refuse, func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }},
		{"closed before a response", closeEarly, func(err error) bool {
			return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
		}},
		{"body cut short", cutBody, func(err error) bool {
			return errors.Is(err, errTruncated) || errors.Is(err, io.ErrUnexpectedEOF)
		}},
		{"503", status503, func(err error) bool {
			var se *store.StatusError
			return errors.As(err, &se) && se.Code == http.StatusServiceUnavailable
		}},
		{"stall", stall, func(err error) bool { return errors.Is(err, errIdle) }},
	}

	// The kinds of request. before are the steps up to the request that
	// takes the fault (target); at is where a cut or a stall hits its
	// body; retries the least ReadRetries counts (a resumed read is cut
	// once first).
	type request struct {
		name    string
		stores  []string                       // the stores it is made on; nil: all
		is      map[faultKind]func(error) bool // by fault: the retried failure, where the failure's own is does not say
		note    map[string]string              // by store: how the cell reads there
		before  func(store string) []step
		target  func(store string) func(*http.Request) bool
		at      int64
		retries int64
		run     func(t *testing.T, o *Opener, base string)
	}
	probe := func(rng string) bool { return rng == "bytes=0-0" }
	requests := []request{{
		name: "listing page",
		note: map[string]string{"http": "HTTP has no listing pages: List reads the folder's shardlist.json, whose GET takes the fault"},
		before: func(store string) []step {
			if store == "http" {
				return nil
			}
			return []step{{match: func(r *http.Request) bool { page, token := listing(r); return page && !token }, fault: pass}}
		},
		target: func(store string) func(*http.Request) bool {
			if store == "http" {
				return object("ds/shardlist.json", whole)
			}
			return func(r *http.Request) bool { page, token := listing(r); return page && token } // page 2
		},
		at:      20,
		retries: 1,
		run: func(t *testing.T, o *Opener, base string) {
			names, err := List(context.Background(), o, base+"ds/")
			require.NoError(t, err)
			var want []string
			for _, k := range fx.shardList {
				want = append(want, base+k)
			}
			assert.Equal(t, want, names)
		},
	}, {
		name:    "size probe",
		target:  func(string) func(*http.Request) bool { return object("ds/train-0001.tar", probe) },
		at:      0,
		retries: 1,
		run: func(t *testing.T, o *Opener, base string) {
			size, err := o.size(context.Background(), base+"ds/train-0001.tar")
			require.NoError(t, err)
			assert.EqualValues(t, len(fx.shard), size)
		},
	}, {
		name:    "open",
		target:  func(string) func(*http.Request) bool { return object("ds/train-0001.tar", whole) },
		at:      0,
		retries: 1,
		run: func(t *testing.T, o *Opener, base string) {
			got, err := readVia(o, context.Background(), base+"ds/train-0001.tar")
			require.NoError(t, err)
			assert.True(t, slices.Equal(fx.shard, got), "the shard's bytes")
		},
	}, {
		name: "range read (resume mid-object)",
		before: func(string) []step {
			return []step{{match: object("ds/train-0001.tar", whole), fault: cutBody, at: 1000}}
		},
		target: func(string) func(*http.Request) bool {
			return object("ds/train-0001.tar", func(rng string) bool { return strings.HasPrefix(rng, "bytes=1000-") })
		},
		at:      500,
		retries: 2,
		run: func(t *testing.T, o *Opener, base string) {
			got, err := readVia(o, context.Background(), base+"ds/train-0001.tar")
			require.NoError(t, err)
			assert.True(t, slices.Equal(fx.shard, got), "the shard's bytes")
		},
	}, {
		name:    "cache download",
		target:  func(string) func(*http.Request) bool { return object("ds/train-0001.tar", whole) },
		at:      1000,
		retries: 1,
		run: func(t *testing.T, o *Opener, base string) {
			name, dir := base+"ds/train-0001.tar", t.TempDir()
			src, err := FromNames([]string{name}, testSchema, decodeTest, UseOpener(o), Cache(dir, 1<<30), CacheReadAhead(0))
			require.NoError(t, err)
			defer src.Close()
			assert.True(t, slices.Equal(fx.shard, readShard(t, src, name)), "the shard's bytes")
			cached, _ := cachedFiles(t, dir)
			assert.Equal(t, []string{key(name)}, cached, "the download committed")
			assert.EqualValues(t, 1, src.StorageStats().Misses, "one download, no read from the server beside it")
		},
	}, {
		name: "Parquet footer",
		before: func(string) []step {
			return []step{{match: object("pq/train-0000.parquet", func(rng string) bool { return rng == "bytes=0-3" }), fault: pass}}
		},
		target: func(string) func(*http.Request) bool {
			return object("pq/train-0000.parquet", func(rng string) bool { return rng != "" && rng != "bytes=0-3" })
		},
		at:      100,
		retries: 1,
		run: func(t *testing.T, o *Opener, base string) {
			n, err := o.parquetCount(context.Background(), base+"pq/train-0000.parquet", nil)
			require.NoError(t, err)
			assert.Equal(t, fx.rows, n)
		},
	}, {
		// A cut drops the connection after 1000 bytes of the upload's
		// body; a stall reads no more of it, so that the client's writes
		// block, the file being larger than the sockets' buffers.
		name:   "put",
		stores: []string{"s3", "gcs", "azure"}, // HTTP cannot write
		// A server that answers, or drops the connection, before it has
		// read the body may meet the client still writing it: the
		// client's failure is then its write's.
		is: map[faultKind]func(error) bool{
			closeEarly: func(err error) bool { return errors.Is(err, io.EOF) || failedWrite(err) },
			cutBody:    func(err error) bool { return errors.Is(err, io.EOF) || failedWrite(err) },
			status503: func(err error) bool {
				var se *store.StatusError
				return errors.As(err, &se) && se.Code == http.StatusServiceUnavailable || failedWrite(err)
			},
			stall: func(err error) bool { // the Opener's Timeout, or the client's own wait for a response
				var ne net.Error
				return errors.Is(err, errIdle) || errors.As(err, &ne) && ne.Timeout()
			},
		},
		target: func(string) func(*http.Request) bool {
			return func(r *http.Request) bool {
				return upload(r) && (strings.Contains(r.URL.Path, "up/train-0001.tar") || r.URL.Query().Get("name") == "up/train-0001.tar")
			}
		},
		at:      1000,
		retries: 1,
		run: func(t *testing.T, o *Opener, base string) {
			name := base + "up/train-0001.tar"
			require.NoError(t, o.Put(context.Background(), name, fx.big))
			got, err := readVia(o, context.Background(), name)
			require.NoError(t, err)
			want, err := os.ReadFile(fx.big)
			require.NoError(t, err)
			assert.True(t, slices.Equal(want, got), "the object put holds the file's bytes")
		},
	}}

	stores := []struct {
		name  string
		start func(t *testing.T) (proxy *faultProxy, base string)
	}{
		{"http", func(t *testing.T) (*faultProxy, string) {
			p := newFaultProxyOf(t, http.FileServer(http.Dir(fx.dir)))
			return p, p.url + "/"
		}},
		{"s3", func(t *testing.T) (*faultProxy, string) { return proxied(t, fx, s3test.ForTest(t), "s3://data/") }},
		{"gcs", func(t *testing.T) (*faultProxy, string) { return proxied(t, fx, objtest.GCS(t), "gs://data/") }},
		{"azure", func(t *testing.T) (*faultProxy, string) { return proxied(t, fx, objtest.Azure(t), "az://data/") }},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			p, base := st.start(t)
			for _, rq := range requests {
				if rq.stores != nil && !slices.Contains(rq.stores, st.name) {
					continue
				}
				for _, fl := range failures {
					t.Run(rq.name+"/"+fl.name, func(t *testing.T) {
						if note := rq.note[st.name]; note != "" {
							t.Log(note)
						}
						var steps []step
						if rq.before != nil {
							steps = rq.before(st.name)
						}
						steps = append(steps, step{match: rq.target(st.name), fault: fl.fault, at: rq.at})
						if fl.fault == refuse {
							steps[len(steps)-1] = step{fault: refuse}
						}
						var mu sync.Mutex
						var retried []error
						o := &Opener{Backoff: time.Millisecond, Timeout: 500 * time.Millisecond, MaxRetries: 10}
						o.onRetry = func(err error) {
							mu.Lock()
							retried = append(retried, err)
							mu.Unlock()
							p.onRetry(err)
						}
						defer o.CloseIdleConnections()
						p.arm(steps...)
						rq.run(t, o, base)
						assert.True(t, p.done(), "the fault was injected")
						p.arm()
						assert.GreaterOrEqual(t, o.ReadRetries(), rq.retries, "ReadRetries counts the retries")
						mu.Lock()
						defer mu.Unlock()
						is := fl.is
						if rq.is[fl.fault] != nil {
							is = rq.is[fl.fault]
						}
						assert.True(t, slices.ContainsFunc(retried, is), "a retried failure is the one injected: %v", retried)
					})
				}
			}
		})
	}
}

// proxied uploads the fixture to the store srv, puts a faultProxy in
// front of it and points the test's clients at the proxy.
func proxied(t *testing.T, fx *retryFixture, srv emulator, base string) (*faultProxy, string) {
	srv.Setenv(t)
	fx.upload(t, srv)
	p := newStoreProxy(t, srv.Addr())
	viaProxy(t, srv, &faultServer{Server: &httptest.Server{URL: p.url}})
	return p, base
}
