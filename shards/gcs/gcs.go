// Package gcs is the Google Cloud Storage store of package shards:
// imported, it makes gs://bucket/key URLs readable by shards' Opener,
// Source and List, and writable by shards.Upload:
//
//	import _ "github.com/tensorbatch/tensorbatch/shards/gcs"
//
// STORAGE_EMULATOR_HOST (host:port or a URL), as Google's client
// libraries read it, is the endpoint, reached without credentials (as
// fake-gcs-server is); else https://storage.googleapis.com with
// Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS,
// gcloud's application-default login, the metadata server of GCE, GKE,
// Cloud Run...). NO_GCE_CHECK=true, as Google's other client libraries
// read it, skips the look for a metadata server (a request to
// 169.254.169.254 and a DNS lookup) where no other credentials are found.
package gcs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/tensorbatch/tensorbatch/shards/store"
)

func init() {
	store.Register(store.Driver{Name: "GCS", Schemes: []string{"gs"}, Bucket: "bucket", Open: open,
		Endpoint: "set STORAGE_EMULATOR_HOST to an emulator's host:port, or unset it for storage.googleapis.com"})
}

// gcsStore reads gs:// URLs with the Cloud Storage JSON API over plain
// HTTP: an object by media download (GET .../b/BUCKET/o/KEY?alt=media,
// with a Range), as an http(s):// shard is read (store.HTTPGet), so its
// ETag, size, MD5 (x-goog-hash) and statuses are read the same way; a
// folder by objects.list. Not the client library
// (cloud.google.com/go/storage): its reader reopens a dropped connection
// by itself, outside the Opener's retry budget and counts, and its Read
// waits to fill the whole buffer, which the Opener's idle timeout would
// take for silence. What the library would add here is Application
// Default Credentials, which golang.org/x/oauth2/google provides.
type gcsStore struct {
	c        *http.Client
	endpoint string // the API's root URL, no trailing slash
}

// scope is the OAuth scope of the requests: reads, listings and, for
// shards.Upload, writes (what a token may do is still the account's
// IAM roles).
const scope = "https://www.googleapis.com/auth/devstorage.read_write"

// maxListPage bounds the bytes of a page of objects.list read.
const maxListPage = 256 << 20

// open returns the store of the environment (see the package doc), its
// requests made with h's client.
func open(ctx context.Context, h store.HTTP) (store.Store, error) {
	s := &gcsStore{c: h.Client, endpoint: "https://storage.googleapis.com"}
	if e := os.Getenv("STORAGE_EMULATOR_HOST"); e != "" {
		if !strings.Contains(e, "://") {
			e = "http://" + e
		}
		s.endpoint = strings.TrimSuffix(e, "/")
		return s, nil
	}
	if err := store.CheckFiles("GOOGLE_APPLICATION_CREDENTIALS", gcloudFile()); err != nil {
		return nil, err
	}
	none := "none found: set GOOGLE_APPLICATION_CREDENTIALS to a service account's key file, run gcloud auth application-default login, or run on Google Cloud (STORAGE_EMULATOR_HOST for an emulator)"
	if noMetadataServer() {
		return nil, &store.ConfigError{Msg: "Google Application Default Credentials: " + none + "; NO_GCE_CHECK is set, so no metadata server was asked"}
	}
	// The token source refreshes with its own context, not the caller's,
	// which may end first.
	ts, err := google.DefaultTokenSource(context.WithoutCancel(ctx), scope)
	if err != nil {
		what := none
		if f := os.Getenv("GOOGLE_APPLICATION_CREDENTIALS"); f != "" {
			what = fmt.Sprintf("GOOGLE_APPLICATION_CREDENTIALS (%s): %v", f, err)
		}
		return nil, &store.ConfigError{Msg: "Google Application Default Credentials: " + what, Err: err}
	}
	c := *h.Client
	c.Transport = &oauth2.Transport{Source: ts, Base: h.Client.Transport}
	s.c = &c
	return s, nil
}

// noMetadataServer reports whether Application Default Credentials
// would come from the metadata server alone (no key file named, none
// where gcloud writes it) and NO_GCE_CHECK forbids asking it.
func noMetadataServer() bool {
	if off, _ := strconv.ParseBool(os.Getenv("NO_GCE_CHECK")); !off || os.Getenv("GOOGLE_APPLICATION_CREDENTIALS") != "" {
		return false
	}
	_, err := os.Stat(gcloudFile())
	return err != nil
}

// gcloudFile is where golang.org/x/oauth2/google looks for gcloud's
// Application Default Credentials.
func gcloudFile() string {
	dir := filepath.Join(os.Getenv("HOME"), ".config", "gcloud")
	if runtime.GOOS == "windows" {
		dir = filepath.Join(os.Getenv("APPDATA"), "gcloud")
	}
	return filepath.Join(dir, "application_default_credentials.json")
}

func (s *gcsStore) bucketURL(bucket string) string {
	return s.endpoint + "/storage/v1/b/" + url.PathEscape(bucket) + "/o"
}

// Get GETs gs://bucket/key by a media download.
func (s *gcsStore) Get(ctx context.Context, bucket, key string, off, n int64) (io.ReadCloser, store.Info, error) {
	return store.HTTPGet(ctx, s.c, s.bucketURL(bucket)+"/"+url.PathEscape(key)+"?alt=media", off, n)
}

// Put writes gs://bucket/key by a simple media upload.
func (s *gcsStore) Put(ctx context.Context, bucket, key string, body io.ReadSeeker, size int64) error {
	u := s.endpoint + "/upload/storage/v1/b/" + url.PathEscape(bucket) + "/o?" + url.Values{"uploadType": {"media"}, "name": {key}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, io.NopCloser(body))
	if err != nil {
		return err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := s.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return &store.StatusError{Code: resp.StatusCode, Message: store.ErrorMessage(msg)}
	}
	return nil
}

// List lists a page of gs://bucket/prefix (objects.list).
func (s *gcsStore) List(ctx context.Context, bucket, prefix, token string, pageSize int) ([]string, string, error) {
	q := url.Values{"prefix": {prefix}, "delimiter": {"/"}, "fields": {"items(name),nextPageToken"}}
	if token != "" {
		q.Set("pageToken", token)
	}
	if pageSize > 0 {
		q.Set("maxResults", strconv.Itoa(pageSize))
	}
	body, _, err := store.HTTPGet(ctx, s.c, s.bucketURL(bucket)+"?"+q.Encode(), 0, -1)
	if err != nil {
		return nil, "", err
	}
	defer body.Close()
	var page struct {
		Items         []struct{ Name string }
		NextPageToken string
	}
	if err := json.NewDecoder(io.LimitReader(body, maxListPage)).Decode(&page); err != nil {
		return nil, "", fmt.Errorf("reading objects.list: %w", err) // a page cut short is io.ErrUnexpectedEOF: retried
	}
	keys := make([]string, len(page.Items))
	for i, it := range page.Items {
		keys[i] = it.Name
	}
	return keys, page.NextPageToken, nil
}
