package store_test

import (
	"context"
	"io/fs"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/shards"
	"github.com/tensorbatch/tensorbatch/shards/store"
)

// This test binary links no store: a URL of each is an error that names
// the import to add, and nothing is requested.
func TestUnlinkedStoreNamesItsImport(t *testing.T) {
	for _, scheme := range []string{"s3", "gs", "az", "azblob"} {
		_, linked := store.Lookup(scheme)
		require.False(t, linked, scheme)
	}
	o := &shards.Opener{}
	for url, imp := range map[string]string{
		"s3://bucket/a.tar":    "github.com/tensorbatch/tensorbatch/shards/s3",
		"gs://bucket/a.tar":    "github.com/tensorbatch/tensorbatch/shards/gcs",
		"az://ctr/a.tar":       "github.com/tensorbatch/tensorbatch/shards/azure",
		"azblob://ctr/prefix/": "github.com/tensorbatch/tensorbatch/shards/azure",
	} {
		var err error
		if url[len(url)-1] == '/' {
			_, err = shards.List(context.Background(), o, url)
		} else {
			_, err = o.Open(context.Background(), url)
		}
		require.Error(t, err, url)
		assert.Contains(t, err.Error(), `import _ "`+imp+`"`, url)
	}
	assert.Zero(t, o.Requests())
}

// A 404 matches fs.ErrNotExist, as a missing local file does.
func TestNotFoundIsErrNotExist(t *testing.T) {
	assert.ErrorIs(t, &store.StatusError{Code: http.StatusNotFound}, fs.ErrNotExist)
	assert.NotErrorIs(t, &store.StatusError{Code: http.StatusForbidden}, fs.ErrNotExist)
}

// Register refuses a scheme twice.
func TestRegisterTwicePanics(t *testing.T) {
	d := store.Driver{Name: "X", Schemes: []string{"x-test"}, Bucket: "bucket"}
	store.Register(d)
	assert.Panics(t, func() { store.Register(d) })
}
