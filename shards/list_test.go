package shards

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
)

// listFixture writes 5 shards, their shardlist.json and files that are
// not shards into a temp folder, and returns the folder, the shards'
// paths and the run of the local shards every listed Source must match.
func listFixture(t *testing.T) (dir string, paths []string, want [][]int, wantData [][]byte) {
	dir = t.TempDir()
	paths, pattern := writeShards(t, dir, 12, 0, 7, 30, 9)
	writeList(t, paths, []int{12, 0, 7, 30, 9})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.txt"), []byte("not a shard"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "train-9999.tar.idx"), []byte("not a shard"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub.tar"), 0o755)) // a folder, even named so
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub.tar", "deeper.tar"), tarBytes(t, sampleMembers(0)...), 0o644))
	local, err := New(context.Background(), pattern, testSchema, decodeTest)
	require.NoError(t, err)
	want, wantData, _, err = loadAll(t, local, listSC, listCfg, 1)
	require.NoError(t, err)
	return dir, paths, want, wantData
}

var (
	listSC  = engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: 8}
	listCfg = engine.Config{BatchSize: 5, Seed: 4, Workers: 2}
)

func TestListLocalFolder(t *testing.T) {
	t.Parallel()
	dir, paths, want, wantData := listFixture(t)
	for _, prefix := range []string{dir + "/", "file://" + filepath.ToSlash(dir) + "/"} {
		names, err := List(context.Background(), nil, prefix)
		require.NoError(t, err)
		var wantNames []string
		for _, p := range paths {
			wantNames = append(wantNames, prefix+filepath.Base(p))
		}
		assert.Equal(t, wantNames, names, "sorted; README, .idx, shardlist.json and subfolders skipped")

		src, err := New(context.Background(), prefix, testSchema, decodeTest)
		require.NoError(t, err)
		assert.Equal(t, wantNames, src.Names())
		got, gotData, _, err := loadAll(t, src, listSC, listCfg, 1)
		require.NoError(t, err)
		assert.Equal(t, want, got)
		assert.Equal(t, wantData, gotData)
	}

	// Folders in braces: each listed, in the pattern's order.
	parent := t.TempDir()
	for i, sub := range []string{"b", "a"} {
		require.NoError(t, os.Mkdir(filepath.Join(parent, sub), 0o755))
		writeShards(t, filepath.Join(parent, sub), 1+i)
	}
	src, err := New(context.Background(), parent+"/{b,a}/", testSchema, decodeTest)
	require.NoError(t, err)
	assert.Equal(t, []string{parent + "/b/train-0000.tar", parent + "/a/train-0000.tar"}, src.Names())

	empty := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(empty, "notes.txt"), nil, 0o644))
	_, err = New(context.Background(), empty+"/", testSchema, decodeTest)
	assert.EqualError(t, err, "shards: "+empty+"/: no shards (files ending in .tar or .parquet) in the folder")
	_, err = New(context.Background(), filepath.Join(empty, "missing")+"/", testSchema, decodeTest)
	assert.ErrorContains(t, err, "missing/: no such folder")
	_, err = List(context.Background(), nil, dir)
	assert.ErrorContains(t, err, "not a folder")
}

func TestListHTTPFolder(t *testing.T) {
	dir, paths, want, wantData := listFixture(t)
	bare := t.TempDir() // shards, no shardlist.json
	for _, p := range paths {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(bare, filepath.Base(p)), data, 0o644))
	}
	mux := http.NewServeMux()
	mux.Handle("/data/", http.StripPrefix("/data/", http.FileServer(http.Dir(dir))))
	mux.Handle("/bare/", http.StripPrefix("/bare/", http.FileServer(http.Dir(bare))))
	var mu sync.Mutex
	var reqs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, r.URL.Path)
		mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	defer srv.Close()

	o := fastOpener()
	defer o.CloseIdleConnections()
	src, err := New(context.Background(), srv.URL+"/data/", testSchema, decodeTest, UseOpener(o))
	require.NoError(t, err)
	var wantNames []string
	for _, p := range paths {
		wantNames = append(wantNames, srv.URL+"/data/"+filepath.Base(p))
	}
	assert.Equal(t, wantNames, src.Names(), "the shard list's shards, in its order")
	mu.Lock()
	reqs = nil
	mu.Unlock()
	got, gotData, _, err := loadAll(t, src, listSC, listCfg, 1)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, wantData, gotData)
	mu.Lock()
	assert.NotContains(t, reqs, "/data/shardlist.json", "the counts come from the list that New read, not read again")
	mu.Unlock()

	_, err = New(context.Background(), srv.URL+"/bare/", testSchema, decodeTest, UseOpener(o))
	assert.EqualError(t, err, "shards: "+srv.URL+"/bare/: no shard list "+srv.URL+"/bare/shardlist.json (an HTTP folder is listed by its shardlist.json)")
}
