package shards

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tensorbatch/tensorbatch/shards/store"
)

// tokenRewriter is a reverse proxy in front of an object store's
// emulator that rewrites the next-page tokens of its listings: from the
// second page on, each names a page already listed (repeat: page 1's
// token again and again; cycle: page 1's and page 2's in turn), so that
// a client that follows the tokens never ends.
type tokenRewriter struct {
	*httptest.Server
	cycle bool

	mu     sync.Mutex
	lists  int      // listing responses so far
	tokens []string // the tokens of the first two, as the server wrote them
}

// nextToken finds the next-page token in a listing's body: S3's
// NextContinuationToken, Azure's NextMarker, GCS's nextPageToken.
var nextToken = regexp.MustCompile(`<NextContinuationToken>([^<]*)</NextContinuationToken>|<NextMarker>([^<]*)</NextMarker>|"nextPageToken": *"([^"]*)"`)

func newTokenRewriter(t *testing.T, addr string, cycle bool) *tokenRewriter {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	w := &tokenRewriter{cycle: cycle}
	p := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: addr})
			r.Out.Host = r.In.Host                             // signed by the client
			if r.Out.Header.Get("Accept-Encoding") == "gzip" { // the transport's, not signed
				r.Out.Header.Del("Accept-Encoding")
			}
		},
		Transport:      tr,
		ModifyResponse: w.rewrite,
	}
	w.Server = httptest.NewServer(p)
	t.Cleanup(w.Close)
	return w
}

func (w *tokenRewriter) rewrite(resp *http.Response) error {
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	w.mu.Lock()
	if m := nextToken.FindSubmatchIndex(body); m != nil {
		w.lists++
		lo, hi := -1, -1
		for g := 2; g < len(m); g += 2 {
			if m[g] >= 0 {
				lo, hi = m[g], m[g+1]
			}
		}
		tok := string(body[lo:hi])
		if len(w.tokens) < 2 {
			w.tokens = append(w.tokens, tok)
		}
		switch {
		case w.lists == 1 || w.cycle && w.lists == 2:
		case w.cycle && w.lists%2 == 0:
			tok = w.tokens[1]
		default:
			tok = w.tokens[0]
		}
		body = append(append(append([]byte(nil), body[:lo]...), tok...), body[hi:]...)
	}
	w.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

func (w *tokenRewriter) listings() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lists
}

// TestListRepeatedTokenEndToEnd: a store whose listing names a page
// already listed (a token A, A, ... or a cycle A, B, A) fails the listing
// at the first repeat, naming the store, bucket and prefix, on each store
// (issue 35, item 4).
func TestListRepeatedTokenEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("the store emulators: slow; go test without -short runs it")
	}
	for _, st := range objectStores {
		t.Run(st.scheme, func(t *testing.T) {
			srv := storeBucket(t, st.start, "data")
			for i := range 4 {
				require.NoError(t, srv.Put("data", "ds/train-"+strconv.Itoa(i)+".tar", tarBytes(t, sampleMembers(i)...)))
			}
			listPageSize = 1
			defer func() { listPageSize = 0 }()
			what := map[string]string{"s3://": `S3 bucket "data"`, "gs://": `GCS bucket "data"`, "az://": `Azure container "data"`}[st.scheme]
			for _, tc := range []struct {
				name  string
				cycle bool
				pages int // the listing requests until the repeat shows
				msg   string
			}{
				{"A,A", false, 2, "page 2 gives the next-page token page 1 gave"},
				{"A,B,A", true, 3, "page 3 gives the next-page token page 1 gave"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					w := newTokenRewriter(t, srv.Addr(), tc.cycle)
					viaProxy(t, srv, &faultServer{Server: w.Server})
					o := &Opener{Backoff: time.Millisecond, Timeout: 5 * time.Second}
					defer o.CloseIdleConnections()
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					_, err := List(ctx, o, st.scheme+"data/ds/")
					require.Error(t, err)
					assert.ErrorContains(t, err, "shards: listing "+st.scheme+"data/ds/ ("+what+`, prefix "ds/"): `+tc.msg)
					assert.Equal(t, tc.pages, w.listings(), "no page past the repeat")
					assert.EqualValues(t, tc.pages, o.Requests())
				})
			}
		})
	}
}

// fakeListing is a bucketStore whose listing pages are scripted: the
// page that each token (""  first) gives, and failures before it.
type fakeListing struct {
	pages map[string]fakePage
	fails []error // the next calls' errors, in turn
	calls int
}

type fakePage struct {
	keys []string
	next string
}

func (f *fakeListing) Get(context.Context, string, string, int64, int64) (io.ReadCloser, store.Info, error) {
	panic("not a store of objects")
}

func (f *fakeListing) List(ctx context.Context, bucket, prefix, token string, _ int) ([]string, string, error) {
	f.calls++
	if len(f.fails) > 0 {
		err := f.fails[0]
		f.fails = f.fails[1:]
		return nil, "", err
	}
	p, ok := f.pages[token]
	if !ok { // endless: a new token each page
		return []string{prefix + "x" + token + ".txt"}, token + "+", nil
	}
	return p.keys, p.next, nil
}

// bucketLoc is where prefix, an object store's URL, points.
func bucketLoc(t *testing.T, prefix string) location {
	t.Helper()
	loc, ok, err := bucketURL(prefix)
	require.True(t, ok)
	require.NoError(t, err)
	return loc
}

// TestListPagesBounded: the listing loop that S3, GCS and Azure share
// ends with an error naming the store, bucket and prefix at a next-page
// token given before (A, A; A, B, A; a long one), past maxListPages
// pages and past maxListShards shards; a page that fails transiently is
// retried within MaxRetries, counted, and its budget starts again at
// each page.
func TestListPagesBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	long := strings.Repeat("t", 200)
	for _, tc := range []struct {
		name   string
		prefix string
		pages  map[string]fakePage
		calls  int
		err    string
	}{
		{"A,A", "s3://data/ds/", map[string]fakePage{"": {nil, "A"}, "A": {nil, "A"}}, 2,
			`shards: listing s3://data/ds/ (S3 bucket "data", prefix "ds/"): page 2 gives the next-page token page 1 gave ("A"): the listing would never end`},
		{"A,B,A", "gs://data/", map[string]fakePage{"": {[]string{"a.tar"}, "A"}, "A": {[]string{"b.tar"}, "B"}, "B": {nil, "A"}}, 3,
			`shards: listing gs://data/ (GCS bucket "data", prefix ""): page 3 gives the next-page token page 1 gave ("A"): the listing would never end`},
		{"long token", "az://ctr/p/", map[string]fakePage{"": {nil, long}, long: {nil, "B"}, "B": {nil, long}}, 3,
			`shards: listing az://ctr/p/ (Azure container "ctr", prefix "p/"): page 3 gives the next-page token page 1 gave ("` + long[:64] + `"...): the listing would never end`},
		{"endless", "s3://data/ds/", map[string]fakePage{}, 5,
			`shards: listing s3://data/ds/ (S3 bucket "data", prefix "ds/"): more than 5 pages`},
		{"too many shards", "s3://data/ds/", map[string]fakePage{"": {[]string{"ds/a.tar", "ds/b.tar"}, "A"}, "A": {[]string{"ds/c.tar", "ds/d.tar"}, "B"}}, 2,
			`shards: listing s3://data/ds/ (S3 bucket "data", prefix "ds/"): more than 3 shards`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(p, s int) { maxListPages, maxListShards = p, s }(maxListPages, maxListShards)
			maxListPages, maxListShards = 5, 3
			f := &fakeListing{pages: tc.pages}
			o := fastOpener()
			_, err := o.listPages(ctx, f, tc.prefix, bucketLoc(t, tc.prefix))
			assert.EqualError(t, err, tc.err)
			assert.Equal(t, tc.calls, f.calls)
			assert.EqualValues(t, tc.calls, o.Requests())
			assert.Zero(t, o.ReadRetries())
		})
	}

	// Transient failures: retried and counted, within MaxRetries in a row.
	unavailable := &store.StatusError{Code: http.StatusServiceUnavailable}
	pages := map[string]fakePage{"": {[]string{"ds/b.tar"}, "A"}, "A": {[]string{"ds/a.tar", "ds/c.txt", "ds/sub/d.tar"}, ""}}
	f := &fakeListing{pages: pages, fails: []error{unavailable, io.ErrUnexpectedEOF}}
	o := fastOpener()
	o.MaxRetries = 2
	names, err := o.listPages(ctx, f, "s3://data/ds/", bucketLoc(t, "s3://data/ds/"))
	require.NoError(t, err)
	assert.Equal(t, []string{"s3://data/ds/a.tar", "s3://data/ds/b.tar"}, names)
	assert.EqualValues(t, 2, o.ReadRetries())
	f = &fakeListing{pages: pages, fails: []error{unavailable, unavailable, unavailable}}
	o.retried.Store(0)
	_, err = o.listPages(ctx, f, "s3://data/ds/", bucketLoc(t, "s3://data/ds/"))
	assert.EqualError(t, err, "shards: listing s3://data/ds/: giving up at page 1 after 2 retries: HTTP 503 Service Unavailable")
	assert.Equal(t, 3, f.calls)
	assert.EqualValues(t, 2, o.ReadRetries())
	f = &fakeListing{pages: pages, fails: []error{&store.StatusError{Code: http.StatusForbidden}}}
	_, err = o.listPages(ctx, f, "s3://data/ds/", bucketLoc(t, "s3://data/ds/"))
	assert.EqualError(t, err, "shards: listing s3://data/ds/: HTTP 403 Forbidden")
	assert.Equal(t, 1, f.calls, "a 403 is not retried")
}
