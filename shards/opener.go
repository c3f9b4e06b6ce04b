package shards

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tensorbatch/tensorbatch/internal/regfile"
)

// Defaults of an Opener's zero fields.
const (
	DefaultTimeout = 30 * time.Second
	DefaultRetries = 5
	DefaultBackoff = 200 * time.Millisecond
)

// Opener opens shards by name: a local path or file:// URL, an http:// or
// https:// URL, s3://bucket/key, gs://bucket/key (Google Cloud Storage) or
// az://container/key (Azure Blob Storage; azblob:// too).
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
// is read (its ETag or Last-Modified differ between requests) or the
// last transient failure fails at once, naming the shard or folder. The
// object stores' SDKs do not retry on their own: every request is the
// Opener's, counted in Requests.
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
	// HTTPClient does http(s):// requests, and those of the S3, GCS and
	// Azure clients that the Opener makes (GCS's with its credentials
	// added). Nil means a client whose transport bounds dialing, the TLS
	// handshake and the wait for response headers by Timeout.
	HTTPClient *http.Client
	// S3 reads s3:// URLs. Nil means a client made on first use by
	// NewS3Client, from the standard AWS configuration.
	S3 *s3.Client
	// Azure reads az:// and azblob:// URLs. Nil means a client made on
	// first use by NewAzureClient, from the environment. (gs:// URLs need
	// no client: see the package doc for their credentials.)
	Azure *azblob.Client
	// Timeout bounds each remote request until its response headers and
	// each silence of a response body; 0 means DefaultTimeout.
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
	s3Once   sync.Once
	s3       *s3.Client
	s3HTTP   atomic.Pointer[http.Client] // of s3, unless it is httpClient()
	s3Err    error
	gcsOnce  sync.Once
	gcs      *gcsStore
	gcsHTTP  atomic.Pointer[http.Client] // of gcs, unless it is HTTPClient
	gcsErr   error
	azOnce   sync.Once
	az       *azblob.Client
	azErr    error
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

// s3HTTPClient returns the client of S3 requests, given the SDK's: the
// HTTPClient field when set, else one with the SDK's transport (which
// holds the roots of AWS_CA_BUNDLE or ca_bundle) and the Opener's
// timeouts. Called once.
func (o *Opener) s3HTTPClient(sdk s3.HTTPClient) s3.HTTPClient {
	b, ok := sdk.(*awshttp.BuildableClient)
	if o.HTTPClient != nil || !ok {
		return o.httpClient()
	}
	c := o.newClient(b.GetTransport())
	o.s3HTTP.Store(c)
	return c
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

func (o *Opener) s3Client(ctx context.Context) (*s3.Client, error) {
	if o.S3 != nil {
		return o.S3, nil
	}
	o.s3Once.Do(func() {
		o.s3, o.s3Err = NewS3Client(ctx, func(so *s3.Options) { so.HTTPClient = o.s3HTTPClient(so.HTTPClient) })
	})
	return o.s3, o.s3Err
}

// CloseIdleConnections closes the idle connections of the Opener's HTTP,
// S3, GCS and Azure clients (but the S3 and Azure fields' own); for
// example when a job is done with its shards.
func (o *Opener) CloseIdleConnections() {
	o.httpClient().CloseIdleConnections()
	if c := o.s3HTTP.Load(); c != nil {
		c.CloseIdleConnections()
	}
	if c := o.gcsHTTP.Load(); c != nil {
		c.CloseIdleConnections()
	}
}

// kind is how a shard name is read.
type kind int

const (
	local kind = iota
	viaHTTP
	viaS3
	viaGCS
	viaAzure
)

// buckets are the object stores' URL schemes.
var buckets = []struct {
	scheme string
	k      kind
	what   string // what the store calls a bucket
}{
	{"s3://", viaS3, "bucket"},
	{"gs://", viaGCS, "bucket"},
	{"az://", viaAzure, "container"},
	{"azblob://", viaAzure, "container"},
}

// storeName is the name of the object store of kind k, for errors.
func storeName(k kind) string {
	switch k {
	case viaS3:
		return "S3"
	case viaGCS:
		return "GCS"
	case viaAzure:
		return "Azure"
	}
	return "HTTP"
}

// splitBucket splits an object store's URL into its kind, scheme, bucket
// and key (or prefix, which may be ""); ok is false for another name.
func splitBucket(name string) (k kind, scheme, what, bucket, key string, ok bool) {
	for _, b := range buckets {
		if rest, found := strings.CutPrefix(name, b.scheme); found {
			bucket, key, _ = strings.Cut(rest, "/")
			return b.k, b.scheme, b.what, bucket, key, true
		}
	}
	return local, "", "", "", "", false
}

// parse splits a shard name into its kind and, for an object store,
// bucket and key; for a local name, the path.
func parse(name string) (k kind, a, b string, err error) {
	if k, scheme, what, bucket, key, ok := splitBucket(name); ok {
		if bucket == "" || key == "" {
			return 0, "", "", fmt.Errorf("shards: %q: want %s%s/key", name, scheme, what)
		}
		return k, bucket, key, nil
	}
	switch {
	case strings.HasPrefix(name, "http://"), strings.HasPrefix(name, "https://"):
		return viaHTTP, name, "", nil
	case strings.HasPrefix(name, "file://"):
		u, err := url.Parse(name)
		if err != nil {
			return 0, "", "", fmt.Errorf("shards: %q: %w", name, err)
		}
		return local, u.Path, "", nil
	case strings.Contains(name, "://"):
		return 0, "", "", fmt.Errorf("shards: %q: unknown scheme; want a path, file://, http://, https://, s3://, gs:// or az:// (azblob://)", name)
	}
	return local, name, "", nil
}

// Open returns a reader of the shard name from its first byte. Remote
// reads resume after transient failures (see Opener); every error names
// the shard. A local file must be a regular file (ErrNotRegular).
func (o *Opener) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	k, a, _, err := parse(name)
	if err != nil {
		return nil, err
	}
	if k == local {
		f, err := regfile.Open(a)
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
		if errors.Is(err, errEOF) { // an empty object (a 416)
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
	k, a, b, err := parse(name)
	if err != nil {
		return nil, err
	}
	var f fetcher
	switch k {
	case local:
		return nil, fmt.Errorf("shards: %s: not a remote shard", name)
	case viaHTTP:
		f = httpFetcher(o.httpClient(), a)
	default:
		s, err := o.store(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("shards: %s: %w", name, err)
		}
		f = s.fetcher(a, b)
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
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, errNotFound) {
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
type fetcher func(ctx context.Context, off, n int64) (io.ReadCloser, objectInfo, error)

// rangeHeader is the HTTP Range of n bytes from off (n < 0: to the end),
// "" for the whole object.
func rangeHeader(off, n int64) string {
	switch {
	case n > 0:
		return fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	case off > 0:
		return fmt.Sprintf("bytes=%d-", off)
	}
	return ""
}

// pastEnd reports whether a 416 (range not satisfiable) to a request of
// n bytes from off means that off is at the object's end (errEOF): it
// does for a range, and a request of the whole object never gets one.
func pastEnd(off, n int64) bool { return off > 0 || n > 0 }

type objectInfo struct {
	total   int64  // the object's size; -1 when unknown
	version string // ETag, else Last-Modified; "" when neither came
	md5     []byte // of the whole object, when the store says it (see md5Of); or nil
}

// md5Of returns sum when it is an MD5, the whole object's checksum that a
// store may report (S3's ETag of an object uploaded in one part, GCS's
// x-goog-hash, Azure's Content-MD5); else nil.
func md5Of(sum []byte) []byte {
	if len(sum) != md5.Size {
		return nil
	}
	return sum
}

// A bucketStore reads one kind of object store by bucket and key.
type bucketStore interface {
	// fetcher returns the fetcher of an object.
	fetcher(bucket, key string) fetcher
	// list returns a page of the keys right under prefix (delimiter "/")
	// from token ("" for the first page), and the next page's token, ""
	// after the last page. Its errors are like a fetcher's.
	list(ctx context.Context, bucket, prefix, token string) (keys []string, next string, err error)
}

// store returns the bucketStore of kind k.
func (o *Opener) store(ctx context.Context, k kind) (bucketStore, error) {
	switch k {
	case viaS3:
		c, err := o.s3Client(ctx)
		return s3Store{c}, err
	case viaGCS:
		return o.gcsStore(ctx)
	case viaAzure:
		c, err := o.azureClient()
		return azureStore{c}, err
	}
	return nil, fmt.Errorf("not an object store")
}

// rangeTotal returns the size of an object from the response to a GET
// from byte off: its Content-Range (as "bytes first-last/total", where
// total "*" is unknown; last is first-1 for an empty object, as Azurite
// says it), else, from byte 0, the body's length; -1 when
// unknown.
func rangeTotal(off int64, contentRange string, length int64) (int64, error) {
	if contentRange == "" {
		if off > 0 {
			return 0, fmt.Errorf("range from byte %d answered with the whole object", off)
		}
		return length, nil
	}
	bad := fmt.Errorf("range from byte %d answered with Content-Range %q", off, contentRange)
	span, size, ok := strings.Cut(contentRange, "/")
	var first, last int64
	// last is first-1 for an empty object (Azurite's "bytes 0--1/0")
	if _, err := fmt.Sscanf(span, "bytes %d-%d", &first, &last); !ok || err != nil || first != off || last < first-1 {
		return 0, bad
	}
	if size == "*" {
		return -1, nil
	}
	total, err := strconv.ParseInt(size, 10, 64)
	if err != nil || total <= last {
		return 0, bad
	}
	return total, nil
}

var (
	errNotFound  = errors.New("not found")
	errIdle      = errors.New("no bytes arrived within the timeout")
	errTruncated = errors.New("response body ended early")
)

// statusError is an HTTP status that is not a success.
type statusError struct {
	code int
	msg  string
	err  error // the client's own error, if any
}

func (e *statusError) Unwrap() error { return e.err }

func (e *statusError) Error() string {
	if e.msg != "" && e.msg != http.StatusText(e.code) {
		return fmt.Sprintf("HTTP %d %s: %s", e.code, http.StatusText(e.code), e.msg)
	}
	return fmt.Sprintf("HTTP %d %s", e.code, http.StatusText(e.code))
}

func (e *statusError) Is(target error) bool {
	return target == errNotFound && e.code == http.StatusNotFound
}

// retryable reports whether a status is worth retrying.
func retryable(code int) bool {
	return code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout
}

// transient reports whether err, the failure of a request made under
// ctx (or of reading its body), is worth retrying: a refused, reset or
// aborted connection, one closed before a response (Go's client says
// io.EOF) or in the middle of a body, a body cut short, a status that
// retryable accepts, a timeout, an SDK's failure to send or to read a
// response. Never when ctx has ended.
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var se *statusError
	if errors.As(err, &se) {
		return retryable(se.code)
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
	return errors.As(err, &op) || s3Transient(err)
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
	case errors.Is(err, errEOF):
		r.total = r.off
		return nil
	case err != nil:
		return r.fail(err)
	}
	r.att = a
	return nil
}

// check compares a response with the first one.
func (r *remoteReader) check(info objectInfo) error {
	if r.version == "" && r.total < 0 {
		r.version, r.total, r.md5 = info.version, info.total, info.md5
		return nil
	}
	if info.version != r.version || (info.total >= 0 && r.total >= 0 && info.total != r.total) {
		return fmt.Errorf("changed while being read (version %q, %d bytes; was %q, %d bytes)", info.version, info.total, r.version, r.total)
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

// errEOF is a fetch's answer to a range that starts at the object's end.
var errEOF = errors.New("range starts at the end")

// httpFetcher GETs u from a byte offset with a range request, by c.
func httpFetcher(c *http.Client, u string) fetcher {
	return func(ctx context.Context, off, n int64) (io.ReadCloser, objectInfo, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, objectInfo{}, err
		}
		// Offsets count the bytes as stored: no transparent gzip.
		req.Header.Set("Accept-Encoding", "identity")
		if r := rangeHeader(off, n); r != "" {
			req.Header.Set("Range", r)
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, objectInfo{}, err
		}
		info := objectInfo{total: -1, version: resp.Header.Get("ETag")}
		if info.version == "" {
			info.version = resp.Header.Get("Last-Modified")
		}
		// GCS (and servers like it) say the whole object's MD5, as
		// "x-goog-hash: crc32c=...,md5=...".
		for _, h := range strings.Split(strings.Join(resp.Header.Values("X-Goog-Hash"), ","), ",") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(h), "md5="); ok {
				sum, _ := base64.StdEncoding.DecodeString(v)
				info.md5 = md5Of(sum)
			}
		}
		switch resp.StatusCode {
		case http.StatusOK:
			info.total = resp.ContentLength
			if off > 0 { // the server ignored the range: skip to off
				if n, err := io.CopyN(io.Discard, resp.Body, off); err != nil {
					resp.Body.Close()
					if err == io.EOF { // not a body cut short: a shorter object
						err = fmt.Errorf("range from byte %d answered with the whole object, of %d bytes", off, n)
					}
					return nil, objectInfo{}, err
				}
			}
			return resp.Body, info, nil
		case http.StatusPartialContent:
			if info.total, err = rangeTotal(off, resp.Header.Get("Content-Range"), -1); err != nil {
				resp.Body.Close()
				return nil, objectInfo{}, err
			}
			return resp.Body, info, nil
		case http.StatusRequestedRangeNotSatisfiable:
			io.Copy(io.Discard, io.LimitReader(resp.Body, 4096)) // read, the connection is reused
			resp.Body.Close()
			if pastEnd(off, n) {
				return nil, objectInfo{}, errEOF
			}
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, objectInfo{}, &statusError{code: resp.StatusCode, msg: errorMessage(msg)}
	}
}

// errorMessage returns the message of an error response's body: a JSON
// API's error.message, else the text, at most 256 bytes of it.
func errorMessage(body []byte) string {
	var j struct {
		Error struct{ Message string } `json:"error"`
	}
	if json.Unmarshal(body, &j) == nil && j.Error.Message != "" {
		return j.Error.Message
	}
	return strings.TrimSpace(string(body[:min(len(body), 256)]))
}
