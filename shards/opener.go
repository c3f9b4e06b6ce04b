package shards

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tensorbatch/tensorbatch/internal/regfile"
	"github.com/tensorbatch/tensorbatch/shards/store"
)

// Defaults of an Opener's zero fields.
const (
	DefaultTimeout = 30 * time.Second
	DefaultRetries = 5
	DefaultBackoff = 200 * time.Millisecond
)

// Opener opens shards by name: a local path or file:// URL, an http:// or
// https:// URL, or the URL of an object store whose package the program
// imports (package store): s3://bucket/key (shards/s3), gs://bucket/key
// (Google Cloud Storage, shards/gcs) or az://container/key (Azure Blob
// Storage, shards/azure; azblob:// too). A URL whose store is not linked
// is an error that names the import to add.
//
// Every remote request it makes goes through one retry policy: a page of
// a listing (see List), the one-byte probe of a shard's size (which
// checks a shard list's counts), the footer of a Parquet shard, an open
// and each range request that resumes it, a whole small file (a shard
// list, an index: ReadFile) and a cache download (see Cache). A failure is
// transient, and retried, when the connection is refused, reset or
// closed before a response, when a body is cut short, on a 5xx, 408 or
// 429 status, and when a request waits longer than Timeout for its
// response or a body goes silent that long. It is retried after Backoff
// (see there), up to MaxRetries times in a row, counted in ReadRetries; a
// read resumes by a range request from the byte where it stopped, and its
// count starts again once bytes arrive (a listing's, once a page
// arrives). A 403, a 404, a redirect loop, a shard that changes while it
// is read (its ETag or Last-Modified differ between requests), a host
// that the DNS says does not exist, missing credentials (a
// store.ConfigError) or the last transient failure fails at once, naming
// the shard or folder; the two before last in one line that says what to
// set (for a host: the variable of the store's endpoint,
// store.Driver.Endpoint). The object stores' SDKs do not retry on their
// own: every request is the Opener's, counted in Requests.
//
// What a server sends bounds nothing by itself: redirects are followed
// at most 10 deep (the clients the Opener makes), a listing ends with an
// error when a page repeats a next-page token seen before, or past
// 100,000 pages or 10,000,000 shards, a read stops at the size
// the server declared (more bytes is an error), ReadFile reads 256 MiB at
// most and error bodies are read up to 4 KiB.
//
// The zero Opener is ready to use; it is safe for concurrent use.
type Opener struct {
	// HTTPClient does http(s):// requests, and those of the object
	// stores' clients that the Opener makes (with their credentials
	// added). Nil means a client whose transport bounds dialing, the TLS
	// handshake and the wait for response headers by Timeout.
	HTTPClient *http.Client
	// Stores are the stores of URL schemes ("s3", "gs", "az") that the
	// Opener uses instead of those it would make on first use from the
	// environment: s3.New(client) for an S3 client of your own, say.
	Stores map[string]store.Store
	// Timeout bounds each remote request until its response headers,
	// each silence of a response body, and each silence of an upload's
	// body (Put: the server stopped taking it); 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxRetries is how many times in a row a transient failure is retried
	// before the request fails; the count starts again once bytes arrive
	// (for a listing, once a page arrives). 0 means DefaultRetries;
	// negative, none.
	MaxRetries int
	// Backoff is the wait before the first retry, doubling at each retry
	// in a row up to 32 times; 0 means DefaultBackoff. Each wait is drawn
	// at random between half and all of that ("equal jitter"), from a
	// generator of the Opener's own, so that ranks hit by one outage do
	// not retry in lockstep.
	Backoff time.Duration

	retried  atomic.Int64
	requests atomic.Int64
	fetched  atomic.Int64

	// onRetry, when set (by tests), is called with each failure about to
	// be retried, before its backoff.
	onRetry func(err error)

	randMu sync.Mutex
	rand   *rand.Rand // nil until the first retry

	httpOnce sync.Once
	client   *http.Client

	certsOnce sync.Once
	certsErr  error // checkCerts's

	storesMu sync.Mutex
	stores   map[string]*madeStore // by scheme, made on first use
	clients  []*http.Client        // made for the stores, for CloseIdleConnections
}

// madeStore is a store the Opener made, or failed to.
type madeStore struct {
	s    store.Store
	err  error
	done chan struct{} // closed once made
}

// ReadRetries returns the transient failures retried so far, over every
// shard this Opener has read and folder it has listed.
func (o *Opener) ReadRetries() int64 { return o.retried.Load() }

func (o *Opener) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return DefaultTimeout
}

func (o *Opener) maxRetries() int {
	switch {
	case o.MaxRetries < 0:
		return 0
	case o.MaxRetries == 0:
		return DefaultRetries
	}
	return o.MaxRetries
}

// Requests returns the remote requests made so far (each GET, first or
// resumed, and each page of a listing), over every shard and file this
// Opener has read and folder it has listed.
func (o *Opener) Requests() int64 { return o.requests.Load() }

// BytesFetched returns the bytes read from remote response bodies so
// far, over every shard and file this Opener has read.
func (o *Opener) BytesFetched() int64 { return o.fetched.Load() }

// backoff is the wait before retry number n in a row (from 1): half of
// the doubled Backoff plus a random part of the other half.
func (o *Opener) backoff(n int) time.Duration {
	d := o.Backoff
	if d <= 0 {
		d = DefaultBackoff
	}
	d <<= min(n-1, 5)
	o.randMu.Lock()
	defer o.randMu.Unlock()
	if o.rand == nil {
		// Seeded from the runtime's random source: every Opener, in every
		// process, draws its own waits.
		o.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return d/2 + time.Duration(o.rand.Int64N(int64(d-d/2)+1))
}

// wait counts retry number n in a row (from 1) of the failure err and
// waits its backoff; the error is ctx's cause, if it ends first.
func (o *Opener) wait(ctx context.Context, n int, err error) error {
	o.retried.Add(1)
	if o.onRetry != nil {
		o.onRetry(err)
	}
	t := time.NewTimer(o.backoff(n))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

func (o *Opener) httpClient() *http.Client {
	if o.HTTPClient != nil {
		return o.HTTPClient
	}
	o.httpOnce.Do(func() {
		o.client = o.newClient(http.DefaultTransport.(*http.Transport).Clone())
	})
	return o.client
}

// maxRedirects is the most redirects a request of the clients the Opener
// makes follows.
const maxRedirects = 10

// newClient returns a client of the transport t with the Opener's
// timeouts, which follows maxRedirects redirects at most.
func (o *Opener) newClient(t *http.Transport) *http.Client {
	return &http.Client{Transport: o.transport(t), CheckRedirect: checkRedirect}
}

// checkRedirect is the clients' redirect policy: maxRedirects at most.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return fmt.Errorf("more than %d redirects (the last to %s)", maxRedirects, req.URL.Redacted())
	}
	return nil
}

// transport sets t's timeouts to the Opener's and returns it.
func (o *Opener) transport(t *http.Transport) *http.Transport {
	d := &net.Dialer{Timeout: o.timeout(), KeepAlive: 30 * time.Second}
	t.DialContext = d.DialContext
	t.TLSHandshakeTimeout = o.timeout()
	t.ResponseHeaderTimeout = o.timeout()
	t.MaxIdleConnsPerHost = 64
	return t
}

// CloseIdleConnections closes the idle connections of the Opener's HTTP
// client and of the clients it made for object stores (not those of the
// Stores field's own); for example when a job is done with its shards.
func (o *Opener) CloseIdleConnections() {
	o.httpClient().CloseIdleConnections()
	o.storesMu.Lock()
	clients := slices.Clone(o.clients)
	o.storesMu.Unlock()
	for _, c := range clients {
		c.CloseIdleConnections()
	}
}

// kind is how a shard name is read.
type kind int

const (
	local kind = iota
	viaHTTP
	viaStore // an object store's, by its driver (package store)
)

// storeImports names the package of the driver of each object store's
// scheme, for the error of a URL whose store the program does not link.
var storeImports = map[string]string{
	"s3":     "github.com/tensorbatch/tensorbatch/shards/s3",
	"gs":     "github.com/tensorbatch/tensorbatch/shards/gcs",
	"az":     "github.com/tensorbatch/tensorbatch/shards/azure",
	"azblob": "github.com/tensorbatch/tensorbatch/shards/azure",
}

// location is where a shard name points.
type location struct {
	k      kind
	path   string // a local file's path, or an http(s) URL
	scheme string // an object store's ("s3"), its driver, bucket and key (or prefix)
	driver store.Driver
	bucket string
	key    string
}

// bucketURL parses name when it is an object store's URL
// ("s3://bucket/key"); the key (a prefix) may be "". ok is false for any
// other name; an object store's URL whose store is not linked is an
// error naming the import to add.
func bucketURL(name string) (loc location, ok bool, err error) {
	scheme, rest, found := strings.Cut(name, "://")
	if !found || scheme == "http" || scheme == "https" || scheme == "file" || strings.ContainsAny(scheme, "/\\") {
		return location{}, false, nil
	}
	d, linked := store.Lookup(scheme)
	if !linked {
		if imp, known := storeImports[scheme]; known {
			return location{}, true, fmt.Errorf("shards: %q: the %s:// store is not linked into this program: import _ %q", name, scheme, imp)
		}
		return location{}, true, fmt.Errorf("shards: %q: unknown scheme; want a path, file://, http://, https://, s3://, gs:// or az:// (azblob://)", name)
	}
	loc = location{k: viaStore, scheme: scheme, driver: d}
	loc.bucket, loc.key, _ = strings.Cut(rest, "/")
	return loc, true, nil
}

// parse returns where a shard name points: for an object store, its
// bucket and key (both needed); for a local name, its path.
func parse(name string) (location, error) {
	if loc, ok, err := bucketURL(name); ok || err != nil {
		if err == nil && (loc.bucket == "" || loc.key == "") {
			err = fmt.Errorf("shards: %q: want %s://%s/key", name, loc.scheme, loc.driver.Bucket)
		}
		return loc, err
	}
	switch {
	case strings.HasPrefix(name, "http://"), strings.HasPrefix(name, "https://"):
		return location{k: viaHTTP, path: name}, nil
	case strings.HasPrefix(name, "file://"):
		u, err := url.Parse(name)
		if err != nil {
			return location{}, fmt.Errorf("shards: %q: %w", name, err)
		}
		return location{k: local, path: u.Path}, nil
	}
	return location{k: local, path: name}, nil
}

// Open returns a reader of the shard name from its first byte. Remote
// reads resume after transient failures (see Opener); every error names
// the shard. A local file must be a regular file (ErrNotRegular).
func (o *Opener) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	loc, err := parse(name)
	if err != nil {
		return nil, err
	}
	if loc.k == local {
		f, err := regfile.Open(loc.path)
		if err != nil {
			return nil, err // not a nil *os.File in a non-nil io.ReadCloser
		}
		return f, nil
	}
	return o.openRemote(ctx, name, 0, "", -1)
}

// openRemote returns a reader of the remote shard name from byte off,
// connected. A version or total not "" or -1 is what an earlier read of
// the shard found: a response that differs is an error.
func (o *Opener) openRemote(ctx context.Context, name string, off int64, version string, total int64) (*remoteReader, error) {
	return o.connectRemote(ctx, name, off, -1, version, total)
}

// probe reads the first len(head) bytes (at least one) of the remote
// shard name into head, fewer where the object is shorter, and returns
// them with a reader of it from its start, not connected, that knows the
// object's size (total, -1 when the server does not say) and version,
// which the answer to that range request says (Content-Range). The
// request is retried as any is (see Opener), a body cut short or silent
// included. Its body is read to the end, so that the connection serves
// the next request: a GET of the whole object closed unread, as a size's
// was, dropped its connection after the server had sent what the
// connection's buffers hold.
func (o *Opener) probe(ctx context.Context, name string, head []byte) (*remoteReader, []byte, error) {
	r, err := o.newRemote(ctx, name, 0, -1, "", -1)
	if err != nil {
		return nil, nil, err
	}
	n := 0
	a, err := o.do(ctx, &r.retries, func() string { return "at byte 0" }, func(a *attempt) error {
		body, info, err := r.fetch(a.ctx, 0, int64(len(head)))
		if errors.Is(err, store.ErrPastEnd) { // an empty object (a 416)
			n, r.total = 0, 0
			return nil
		}
		if err != nil {
			return err
		}
		defer body.Close()
		if err := r.check(info); err != nil {
			return err
		}
		// The attempt's timer runs on: the body's bytes come within
		// Timeout too.
		n, err = readHead(body, head, r.total)
		o.fetched.Add(int64(n))
		if err != nil {
			return err
		}
		// A server that ignores ranges sends it all: read a little of the
		// rest, closed unread beyond. What it says is not needed.
		io.Copy(io.Discard, io.LimitReader(body, 4096))
		return nil
	})
	if err != nil {
		return nil, nil, r.fail(err)
	}
	a.end()
	r.retries = retries{} // bytes arrived
	return r, head[:n], nil
}

// readHead reads the first bytes of an object of total bytes (-1:
// unknown) from body into head: all of head, or the whole object where
// it is shorter. A body that ends before (where its framing or total
// says there is more) is errTruncated.
func readHead(body io.Reader, head []byte, total int64) (int, error) {
	want := int64(len(head))
	if total >= 0 {
		want = min(want, total)
	}
	n := 0
	for int64(n) < want {
		m, err := body.Read(head[n:want])
		n += m
		switch {
		case int64(n) == want:
			return n, nil
		case err == io.EOF && total < 0: // the end of an object of unknown size
			return n, nil
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return n, fmt.Errorf("%w at byte %d of %d", errTruncated, n, want)
		case err != nil:
			return n, err
		}
	}
	return n, nil
}

// connectRemote is openRemote of n bytes from off (n < 0: to the end).
func (o *Opener) connectRemote(ctx context.Context, name string, off, n int64, version string, total int64) (*remoteReader, error) {
	r, err := o.newRemote(ctx, name, off, n, version, total)
	if err != nil {
		return nil, err
	}
	// Connect now, so that a missing shard or bad credentials fail Open.
	if err := r.connect(); err != nil {
		return nil, err
	}
	return r, nil
}

// newRemote returns a reader of n bytes from off (n < 0: to the end) of
// the remote shard name, not connected.
func (o *Opener) newRemote(ctx context.Context, name string, off, n int64, version string, total int64) (*remoteReader, error) {
	loc, err := parse(name)
	if err != nil {
		return nil, err
	}
	var f fetcher
	switch loc.k {
	case local:
		return nil, fmt.Errorf("shards: %s: not a remote shard", name)
	case viaHTTP:
		c := o.httpClient()
		f = func(ctx context.Context, off, n int64) (io.ReadCloser, store.Info, error) {
			body, info, err := store.HTTPGet(ctx, c, loc.path, off, n)
			return body, info, noSuchHost(loc, err)
		}
	default:
		s, err := o.store(ctx, loc)
		if err != nil {
			return nil, fmt.Errorf("shards: %s: %w", name, err)
		}
		f = func(ctx context.Context, off, n int64) (io.ReadCloser, store.Info, error) {
			body, info, err := s.Get(ctx, loc.bucket, loc.key, off, n)
			return body, info, noSuchHost(loc, err)
		}
	}
	return &remoteReader{ctx: ctx, o: o, name: name, fetch: f, off: off, n: n, total: total, version: version}, nil
}

// maxReadFile bounds the files ReadFile reads.
const maxReadFile = 256 << 20

// ReadFile returns the whole of a small file (an index), up to 256 MiB,
// read as its bytes arrive: found is false,
// with no error, when it does not exist (a local ENOENT, a 404, S3's
// NoSuchKey).
func (o *Opener) ReadFile(ctx context.Context, name string) (data []byte, found bool, err error) {
	rc, err := o.Open(ctx, name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		return nil, false, err
	}
	defer rc.Close()
	data, err = io.ReadAll(io.LimitReader(rc, maxReadFile+1))
	if err != nil {
		return nil, false, fmt.Errorf("shards: %s: %w", name, err)
	}
	if len(data) > maxReadFile {
		return nil, false, fmt.Errorf("shards: %s: more than %d bytes, too big for an index", name, maxReadFile)
	}
	return data, true, nil
}

// A fetcher starts a GET of a remote shard from byte off: the body and
// what the response said about the object.
type fetcher func(ctx context.Context, off, n int64) (io.ReadCloser, store.Info, error)

// store returns the object store of loc's scheme: the Stores field's,
// else the one its driver makes from the environment on first use
// (once, whoever asks first; an error is kept).
func (o *Opener) store(ctx context.Context, loc location) (store.Store, error) {
	if s := o.Stores[loc.scheme]; s != nil {
		return s, nil
	}
	o.storesMu.Lock()
	m, ok := o.stores[loc.scheme]
	if !ok {
		if o.stores == nil {
			o.stores = map[string]*madeStore{}
		}
		m = &madeStore{done: make(chan struct{})}
		o.stores[loc.scheme] = m
	}
	o.storesMu.Unlock()
	if !ok {
		// The caller's HTTPClient, when set, makes every request (New is
		// nil then); else the Opener's client, or one of a store's own
		// transport with the Opener's timeouts.
		h := store.HTTP{Client: o.HTTPClient}
		if h.Client == nil {
			h.Client = o.httpClient()
			h.New = func(t *http.Transport) *http.Client {
				c := o.newClient(t)
				o.storesMu.Lock()
				o.clients = append(o.clients, c)
				o.storesMu.Unlock()
				return c
			}
		}
		// Made with its own context, not the caller's, which may end
		// before another caller needs the store.
		m.s, m.err = loc.driver.Open(context.WithoutCancel(ctx), h)
		close(m.done)
	}
	select {
	case <-m.done:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	return m.s, m.err
}

// noSuchHost returns err as a store.ConfigError of one line that names
// the host, and for an object store what sets its endpoint
// (store.Driver.Endpoint), where err is a DNS answer that the host does
// not exist, which no retry mends; else err.
func noSuchHost(loc location, err error) error {
	var ce *store.ConfigError
	var de *net.DNSError
	if err == nil || errors.As(err, &ce) || !errors.As(err, &de) || !de.IsNotFound {
		return err
	}
	msg := fmt.Sprintf("no such host %q", de.Name)
	if loc.k == viaStore && loc.driver.Endpoint != "" {
		msg += ": " + loc.driver.Endpoint
	}
	return &store.ConfigError{Msg: msg, Err: err}
}

var (
	errIdle      = errors.New("no bytes arrived within the timeout")
	errTruncated = errors.New("response body ended early")
)

// retryable reports whether a status is worth retrying.
func retryable(code int) bool {
	return code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout
}

// transient reports whether err, the failure of a request made under
// ctx (or of reading its body), is worth retrying: a refused, reset or
// aborted connection, one closed before a response (Go's client says
// io.EOF) or in the middle of a body, a body cut short, a status that
// retryable accepts, a timeout, an SDK's failure to send or to read a
// response. Never when ctx has ended, nor for a store.ConfigError (no
// credentials) or a host that does not exist (a DNS answer that says so;
// a DNS server that does not answer is transient).
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var ce *store.ConfigError
	var de *net.DNSError
	if errors.As(err, &ce) || errors.As(err, &de) && de.IsNotFound {
		return false
	}
	var se *store.StatusError
	if errors.As(err, &se) {
		return retryable(se.Code)
	}
	var ne net.Error
	switch {
	case errors.Is(err, errIdle), errors.Is(err, errTruncated),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return true
	}
	var op *net.OpError
	var te *store.TransientError
	return errors.As(err, &op) || errors.As(err, &te)
}

// NOTE: the retry policy. Every remote request is made by Opener.do, the
// one loop that retries: listing pages, size probes, opens, the range
// requests that resume a read or read a Parquet footer, whole small
// files, cache downloads. A failure is classified by transient alone. A
// read (remoteReader) whose body fails records the failure in its
// retries (retries.fail, the same classification) and the next request
// it makes, by do, waits and counts the retry; so a read's budget
// carries over from one request to the next until bytes arrive.

// retries is where a request, or a read of many, stands in the retry
// policy: the transient failures in a row, and the one the next try
// retries.
type retries struct {
	fails int   // transient failures in a row, with no progress since
	last  error // the failure the next try retries; nil for none
}

// fail records the failure err of a request made under ctx: nil when it
// is transient, for the next try to retry; else the error to return
// (ctx's cause, when ctx ended).
func (rs *retries) fail(ctx context.Context, err error) error {
	if !transient(ctx, err) {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return err
	}
	rs.last = err
	return nil
}

// attempt is one try of a request: its context, which its timer cancels
// with errIdle after Timeout (of waiting for a response, of silence of a
// body).
type attempt struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	timer   *time.Timer
	timeout time.Duration
}

// arm starts the timer again: the next Timeout of silence ends the
// attempt.
func (a *attempt) arm() { a.timer.Reset(a.timeout) }

// disarm stops the timer: what the attempt waits for now is the caller's.
func (a *attempt) disarm() { a.timer.Stop() }

// end ends the attempt, its request and body with it.
func (a *attempt) end() {
	a.timer.Stop()
	a.cancel(nil)
}

// idle returns err, or errIdle where the timer ended the attempt (and
// not the caller's ctx).
func (a *attempt) idle(ctx context.Context, err error) error {
	if errors.Is(context.Cause(a.ctx), errIdle) && ctx.Err() == nil {
		return fmt.Errorf("%w (%v)", errIdle, a.timeout)
	}
	return err
}

// do makes a request by try under the Opener's retry policy (see
// Opener): each try gets a new attempt, whose timer runs until try
// returns; a transient failure is retried after a backoff, up to
// MaxRetries times in a row as rs counts them (rs.fails goes back to 0
// where the caller sees progress), and any other failure, or the last
// transient one (said "giving up" at where()), is returned. On success
// the attempt is returned with its timer stopped, for the caller to end,
// or to keep while it reads the body that try kept.
func (o *Opener) do(ctx context.Context, rs *retries, where func() string, try func(a *attempt) error) (*attempt, error) {
	o.certsOnce.Do(func() { o.certsErr = store.CheckFiles("SSL_CERT_FILE", "") })
	if o.certsErr != nil { // Go reads it by name at the first TLS handshake: a FIFO would block it
		return nil, o.certsErr
	}
	for {
		if rs.last != nil {
			if rs.fails >= o.maxRetries() {
				return nil, fmt.Errorf("giving up %s after %d retries: %w", where(), rs.fails, rs.last)
			}
			rs.fails++
			if err := o.wait(ctx, rs.fails, rs.last); err != nil {
				return nil, err
			}
			rs.last = nil
		}
		actx, cancel := context.WithCancelCause(ctx)
		a := &attempt{ctx: actx, cancel: cancel, timeout: o.timeout()}
		a.timer = time.AfterFunc(a.timeout, func() { cancel(errIdle) })
		o.requests.Add(1)
		err := try(a)
		if err == nil {
			a.disarm()
			return a, nil
		}
		err = a.idle(ctx, err)
		a.end()
		if err := rs.fail(ctx, err); err != nil {
			return nil, err
		}
	}
}

// remoteReader reads a remote shard, resuming at the byte it stopped at
// after a transient failure.
type remoteReader struct {
	ctx   context.Context
	o     *Opener
	name  string
	fetch fetcher

	off     int64
	n       int64  // the bytes asked for from off: -1, to the end
	total   int64  // -1 until a response says
	version string // of the first response
	md5     []byte // of the first response

	body io.ReadCloser
	att  *attempt // the body's request

	retries retries
	err     error // sticky
}

// connect starts a request from r.off, retrying transient failures.
func (r *remoteReader) connect() error {
	a, err := r.o.do(r.ctx, &r.retries, func() string { return fmt.Sprintf("at byte %d", r.off) }, func(a *attempt) error {
		body, info, err := r.fetch(a.ctx, r.off, r.n)
		if err != nil {
			return err
		}
		if err := r.check(info); err != nil {
			body.Close()
			return err
		}
		r.body = body
		return nil
	})
	switch {
	case errors.Is(err, store.ErrPastEnd):
		r.total = r.off
		return nil
	case err != nil:
		return r.fail(err)
	}
	r.att = a
	return nil
}

// check compares a response with the first one.
func (r *remoteReader) check(info store.Info) error {
	if r.version == "" && r.total < 0 {
		r.version, r.total, r.md5 = info.Version, info.Size, info.MD5
		return nil
	}
	if info.Version != r.version || (info.Size >= 0 && r.total >= 0 && info.Size != r.total) {
		return fmt.Errorf("changed while being read (version %q, %d bytes; was %q, %d bytes)", info.Version, info.Size, r.version, r.total)
	}
	return nil
}

func (r *remoteReader) fail(err error) error {
	r.err = &readError{r.name, err}
	return r.err
}

// readError is the failure of a remote read, which names the shard.
type readError struct {
	name string
	err  error
}

func (e *readError) Error() string { return "shards: " + e.name + ": " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

func (r *remoteReader) closeBody() {
	if r.body != nil {
		r.body.Close()
		r.att.end()
		r.body, r.att = nil, nil
	}
}

func (r *remoteReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if r.body == nil {
			if r.total >= 0 && r.off >= r.total {
				return 0, io.EOF
			}
			if err := r.connect(); err != nil {
				return 0, err
			}
			if r.body == nil { // the range starts at the end
				return 0, io.EOF
			}
		}
		q := p
		if r.total >= 0 {
			// No more than the object holds, and one byte past its end,
			// to see the body end there.
			q = p[:min(int64(len(p)), r.total-r.off+1)]
		}
		r.att.arm()
		n, err := r.body.Read(q)
		r.att.disarm()
		if r.total >= 0 && r.off+int64(n) > r.total {
			r.closeBody()
			return 0, r.fail(fmt.Errorf("the server sent more than the %d bytes it said the object holds", r.total))
		}
		r.off += int64(n)
		if n > 0 {
			r.retries.fails = 0
			r.o.fetched.Add(int64(n))
		}
		if err == nil {
			return n, nil
		}
		if err == io.EOF {
			if r.total < 0 || r.off >= r.total {
				r.closeBody()
				r.total = r.off
				return n, io.EOF
			}
			err = fmt.Errorf("%w at byte %d of %d", errTruncated, r.off, r.total)
		} else if ierr := r.att.idle(r.ctx, err); errors.Is(ierr, errIdle) {
			err = fmt.Errorf("%w at byte %d", ierr, r.off)
		}
		r.closeBody()
		if err := r.retries.fail(r.ctx, err); err != nil {
			return n, r.fail(err)
		}
		if n > 0 {
			return n, nil // the next Read resumes
		}
	}
}

func (r *remoteReader) Close() error {
	r.closeBody()
	if r.err == nil {
		r.err = fmt.Errorf("shards: %s: read after Close", r.name)
	}
	return nil
}
