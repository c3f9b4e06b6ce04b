// Package store is the interface between package shards and the object
// stores it reads, as database/sql/driver is for database/sql: each store
// is a Driver that its package registers under its URL schemes when it is
// imported, so that a program links the SDK of a store only when it
// names the store:
//
//	import _ "github.com/tensorbatch/tensorbatch/shards/s3"    // s3://
//	import _ "github.com/tensorbatch/tensorbatch/shards/gcs"   // gs://
//	import _ "github.com/tensorbatch/tensorbatch/shards/azure" // az://, azblob://
//
// A Store retries nothing and counts nothing: shards.Opener makes every
// request, with its one retry policy. This package imports only the
// standard library; the helpers here (HTTPGet, RangeTotal, StatusError)
// are what the drivers share.
package store

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tensorbatch/tensorbatch/internal/regfile"
)

// Store reads one object store by bucket and key.
type Store interface {
	// Get starts a GET of n bytes of bucket/key from byte off (n < 0: to
	// the end): the response's body and what it says of the object. A
	// range that starts at the object's end is ErrPastEnd; a status that
	// is not a success, a *StatusError (a 404 matches fs.ErrNotExist).
	Get(ctx context.Context, bucket, key string, off, n int64) (io.ReadCloser, Info, error)
	// List returns the keys right under prefix (delimiter "/") of one
	// page of a listing, from token ("" for the first page), at most
	// pageSize (0: the store's default), and the next page's token, ""
	// after the last page. Its errors are Get's.
	List(ctx context.Context, bucket, prefix, token string, pageSize int) (keys []string, next string, err error)
}

// Putter is a Store that can write: Put writes body, of size bytes, as
// bucket/key, replacing what is there. The Opener retries a transient
// failure by putting the whole object again, from a new body.
type Putter interface {
	Put(ctx context.Context, bucket, key string, body io.ReadSeeker, size int64) error
}

// Info is what a response says of the object.
type Info struct {
	Size    int64  // the object's size; -1 when unknown
	Version string // its ETag, else Last-Modified; "" when neither came
	MD5     []byte // the whole object's MD5, when the store says it; or nil (see MD5)
}

// Driver is one kind of object store, as its package registers it.
type Driver struct {
	Name    string   // for messages: "S3"
	Schemes []string // its URL schemes, without "://": "s3"
	Bucket  string   // what it calls a bucket: "bucket", "container"
	// Endpoint says what sets the store's endpoint, for the error of a
	// host that does not exist: "set AWS_ENDPOINT_URL_S3 (or
	// AWS_ENDPOINT_URL) to the S3 server's URL".
	Endpoint string
	// Open returns the store the environment configures (credentials,
	// endpoint), making its requests with h.
	Open func(ctx context.Context, h HTTP) (Store, error)
}

// HTTP is how an Opener's stores make requests: with its timeouts and
// its bound on redirects.
type HTTP struct {
	// Client is the Opener's HTTPClient when the caller set one, else a
	// client of the Opener's own with its timeouts and redirect bound.
	Client *http.Client
	// New returns a client of transport t with the Opener's timeouts
	// (dialing, TLS, response headers) and redirect bound, for a store
	// whose SDK brings its own transport (custom roots, say); nil when
	// the caller set the Opener's HTTPClient, which the store then uses.
	New func(t *http.Transport) *http.Client
}

var (
	mu      sync.RWMutex
	drivers = map[string]Driver{}
)

// Register makes d the driver of its schemes. It panics when a scheme
// has a driver already, as database/sql.Register does; a store's package
// calls it from init.
func Register(d Driver) {
	mu.Lock()
	defer mu.Unlock()
	for _, s := range d.Schemes {
		if _, dup := drivers[s]; dup {
			panic("store: Register called twice for scheme " + s)
		}
		drivers[s] = d
	}
}

// Lookup returns the driver of scheme ("s3"), if one is registered.
func Lookup(scheme string) (Driver, bool) {
	mu.RLock()
	defer mu.RUnlock()
	d, ok := drivers[scheme]
	return d, ok
}

// Schemes returns the schemes that have a driver, sorted.
func Schemes() []string {
	mu.RLock()
	defer mu.RUnlock()
	var out []string
	for s := range drivers {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// ErrPastEnd is a Get's answer to a range that starts at the object's end.
var ErrPastEnd = errors.New("store: the range starts at the object's end")

// StatusError is an HTTP status that is not a success. A 404 matches
// fs.ErrNotExist, as a missing local file does.
type StatusError struct {
	Code    int
	Message string // the store's own words, if any
	Err     error  // the client's own error, if any
}

func (e *StatusError) Unwrap() error { return e.Err }

func (e *StatusError) Error() string {
	if e.Message != "" && e.Message != http.StatusText(e.Code) {
		return fmt.Sprintf("HTTP %d %s: %s", e.Code, http.StatusText(e.Code), e.Message)
	}
	return fmt.Sprintf("HTTP %d %s", e.Code, http.StatusText(e.Code))
}

// Is matches fs.ErrNotExist for a 404.
func (e *StatusError) Is(target error) bool {
	return target == fs.ErrNotExist && e.Code == http.StatusNotFound
}

// TransientError is a failure to send a request or to read its response
// that an SDK reports in a type of its own: the Opener retries it as it
// does a dropped connection.
type TransientError struct{ Err error }

func (e *TransientError) Error() string { return e.Err.Error() }
func (e *TransientError) Unwrap() error { return e.Err }

// ConfigError is a failure that no retry mends, because the environment
// lacks something or names what does not exist (no credentials, an
// endpoint whose host no DNS server knows): the Opener fails at once.
// Its message is one line that says what to set; Err, in its chain, is
// the SDK's own account.
type ConfigError struct {
	Msg string
	Err error
}

func (e *ConfigError) Error() string { return e.Msg }
func (e *ConfigError) Unwrap() error { return e.Err }

// CheckFiles refuses, as a ConfigError naming it, a configuration file
// that a store's SDK would open by name and that is not a regular file
// (a FIFO blocks the SDK's open forever): each of names is an
// environment variable naming a file, else, where it is unset, the
// default path that follows it ("" for none). Unset variables without a
// default, and files that do not exist, pass: the SDK says what is
// missing. So do os.DevNull (or a link to it), the usual way to say
// "no file", and a descriptor the process inherited (/dev/fd/N,
// /dev/stdin: `<(echo "$KEY")`), whose pipe the caller writes.
func CheckFiles(names ...string) error {
	for i := 0; i+1 < len(names); i += 2 {
		what, path := names[i], os.Getenv(names[i])
		if path == "" {
			what, path = "the default of "+names[i], names[i+1]
		}
		if path == "" || inherited(path) {
			continue
		}
		if real, err := filepath.EvalSymlinks(path); err == nil && real == os.DevNull {
			continue
		}
		if err := regfile.Check(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return &ConfigError{Msg: fmt.Sprintf("%s (%s): %v", what, path, err), Err: err}
		}
	}
	return nil
}

// inherited reports whether path names a descriptor the process was
// given: a pipe its caller writes, which an open does not block on.
func inherited(path string) bool {
	return path == "/dev/stdin" || strings.HasPrefix(path, "/dev/fd/") || strings.HasPrefix(path, "/proc/self/fd/")
}

// RangeHeader is the HTTP Range of n bytes from off (n < 0: to the end),
// "" for the whole object.
func RangeHeader(off, n int64) string {
	switch {
	case n > 0:
		return fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	case off > 0:
		return fmt.Sprintf("bytes=%d-", off)
	}
	return ""
}

// PastEnd reports whether a 416 (range not satisfiable) to a request of
// n bytes from off means that off is at the object's end (ErrPastEnd): it
// does for a range, and a request of the whole object never gets one.
func PastEnd(off, n int64) bool { return off > 0 || n > 0 }

// MD5 returns sum when it is an MD5, the whole object's checksum that a
// store may report (S3's ETag of an object uploaded in one part, GCS's
// x-goog-hash, Azure's Content-MD5); else nil.
func MD5(sum []byte) []byte {
	if len(sum) != md5.Size {
		return nil
	}
	return sum
}

// RangeTotal returns the size of an object from the response to a GET
// from byte off: its Content-Range (as "bytes first-last/total", where
// total "*" is unknown; last is first-1 for an empty object, as Azurite
// says it), else, from byte 0, the body's length; -1 when unknown.
func RangeTotal(off int64, contentRange string, length int64) (int64, error) {
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

// HTTPGet GETs n bytes of url from byte off (n < 0: to the end) with c,
// by a range request, as Store.Get does: what an http(s):// shard and
// GCS's media downloads are read with.
func HTTPGet(ctx context.Context, c *http.Client, url string, off, n int64) (io.ReadCloser, Info, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, Info{}, err
	}
	// Offsets count the bytes as stored: no transparent gzip.
	req.Header.Set("Accept-Encoding", "identity")
	if r := RangeHeader(off, n); r != "" {
		req.Header.Set("Range", r)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, Info{}, err
	}
	info := Info{Size: -1, Version: resp.Header.Get("ETag")}
	if info.Version == "" {
		info.Version = resp.Header.Get("Last-Modified")
	}
	// GCS (and servers like it) say the whole object's MD5, as
	// "x-goog-hash: crc32c=...,md5=...".
	for _, h := range strings.Split(strings.Join(resp.Header.Values("X-Goog-Hash"), ","), ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(h), "md5="); ok {
			sum, _ := base64.StdEncoding.DecodeString(v)
			info.MD5 = MD5(sum)
		}
	}
	switch resp.StatusCode {
	case http.StatusOK:
		info.Size = resp.ContentLength
		if off > 0 { // the server ignored the range: skip to off
			if n, err := io.CopyN(io.Discard, resp.Body, off); err != nil {
				resp.Body.Close()
				if err == io.EOF { // not a body cut short: a shorter object
					err = fmt.Errorf("range from byte %d answered with the whole object, of %d bytes", off, n)
				}
				return nil, Info{}, err
			}
		}
		return resp.Body, info, nil
	case http.StatusPartialContent:
		if info.Size, err = RangeTotal(off, resp.Header.Get("Content-Range"), -1); err != nil {
			resp.Body.Close()
			return nil, Info{}, err
		}
		return resp.Body, info, nil
	case http.StatusRequestedRangeNotSatisfiable:
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096)) // read, the connection is reused
		resp.Body.Close()
		if PastEnd(off, n) {
			return nil, Info{}, ErrPastEnd
		}
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return nil, Info{}, &StatusError{Code: resp.StatusCode, Message: ErrorMessage(msg)}
}

// ErrorMessage returns the message of an error response's body: a JSON
// API's error.message, else the text, at most 256 bytes of it.
func ErrorMessage(body []byte) string {
	var j struct {
		Error struct{ Message string } `json:"error"`
	}
	if json.Unmarshal(body, &j) == nil && j.Error.Message != "" {
		return j.Error.Message
	}
	return strings.TrimSpace(string(body[:min(len(body), 256)]))
}
