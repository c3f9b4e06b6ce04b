package shards

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

// gcsStore reads gs:// URLs with the Cloud Storage JSON API over plain
// HTTP: an object by media download (GET .../b/BUCKET/o/KEY?alt=media,
// with a Range), by the fetcher of http(s):// URLs, so its ETag, size,
// MD5 (x-goog-hash) and statuses are read the same way; a folder by
// objects.list. Not the client library (cloud.google.com/go/storage):
// its reader reopens a dropped connection by itself, outside the Opener's
// retry budget and counts, and its Read waits to fill the whole buffer,
// which the Opener's idle timeout would take for silence. What the
// library would add here is Application Default Credentials, which
// golang.org/x/oauth2/google provides.
type gcsStore struct {
	c        *http.Client
	endpoint string // the API's root URL, no trailing slash
}

// gcsScope is the OAuth scope of the requests: reads and listings.
const gcsScope = "https://www.googleapis.com/auth/devstorage.read_only"

// gcsStore returns the Opener's GCS store, made on first use:
// STORAGE_EMULATOR_HOST (host:port or a URL), as the client libraries
// read it, is the endpoint, reached without credentials; else
// https://storage.googleapis.com with Application Default Credentials
// (GOOGLE_APPLICATION_CREDENTIALS, gcloud's application-default login,
// the metadata server of GCE, GKE, Cloud Run...).
func (o *Opener) gcsStore(ctx context.Context) (*gcsStore, error) {
	o.gcsOnce.Do(func() {
		base := o.HTTPClient
		if base == nil {
			base = o.newClient(http.DefaultTransport.(*http.Transport).Clone())
			o.gcsHTTP.Store(base)
		}
		s := &gcsStore{c: base, endpoint: "https://storage.googleapis.com"}
		if h := os.Getenv("STORAGE_EMULATOR_HOST"); h != "" {
			if !strings.Contains(h, "://") {
				h = "http://" + h
			}
			s.endpoint = strings.TrimSuffix(h, "/")
		} else {
			// The token source refreshes with its own context, not the
			// caller's, which may end first.
			ts, err := google.DefaultTokenSource(context.WithoutCancel(ctx), gcsScope)
			if err != nil {
				o.gcsErr = fmt.Errorf("Google Application Default Credentials: %w", err)
				return
			}
			c := *base
			c.Transport = &oauth2.Transport{Source: ts, Base: base.Transport}
			s.c = &c
		}
		o.gcs = s
	})
	return o.gcs, o.gcsErr
}

func (s *gcsStore) bucketURL(bucket string) string {
	return s.endpoint + "/storage/v1/b/" + url.PathEscape(bucket) + "/o"
}

func (s *gcsStore) fetcher(bucket, key string) fetcher {
	return httpFetcher(s.c, s.bucketURL(bucket)+"/"+url.PathEscape(key)+"?alt=media")
}

func (s *gcsStore) list(ctx context.Context, bucket, prefix, token string) ([]string, string, error) {
	q := url.Values{"prefix": {prefix}, "delimiter": {"/"}, "fields": {"items(name),nextPageToken"}}
	if token != "" {
		q.Set("pageToken", token)
	}
	if listPageSize > 0 {
		q.Set("maxResults", strconv.Itoa(listPageSize))
	}
	body, _, err := httpFetcher(s.c, s.bucketURL(bucket)+"?"+q.Encode())(ctx, 0, -1)
	if err != nil {
		return nil, "", err
	}
	defer body.Close()
	var page struct {
		Items         []struct{ Name string }
		NextPageToken string
	}
	if err := json.NewDecoder(io.LimitReader(body, maxReadFile)).Decode(&page); err != nil {
		return nil, "", fmt.Errorf("reading objects.list: %w", err)
	}
	keys := make([]string, len(page.Items))
	for i, it := range page.Items {
		keys[i] = it.Name
	}
	return keys, page.NextPageToken, nil
}
