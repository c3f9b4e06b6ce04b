package shards_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/shards"
)

// Remote shards through a local cache: the first job asks the server
// for the shard list, each shard's size (checking the list's counts) and
// each shard once, read as it downloads (the second is fetched ahead:
// a hit); a resumed job (a new Source, as a new process makes, on the
// same folder) reads the cache, its shard list included, and asks the
// server nothing.
func ExampleCache() {
	// A server of two shards and their shardlist.json, as a bucket holds them.
	data, _ := os.MkdirTemp("", "bucket")
	defer os.RemoveAll(data)
	var paths []string
	for s := range 2 {
		paths = append(paths, filepath.Join(data, fmt.Sprintf("train-%d.tar", s)))
		writeShard(paths[s], 4*s, 4)
	}
	list, _ := shards.BuildIndex(context.Background(), nil, paths)
	index, _ := json.Marshal(list)
	os.WriteFile(filepath.Join(data, "shardlist.json"), index, 0o644)
	var requests atomic.Int64
	files := http.FileServer(http.Dir(data))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		files.ServeHTTP(w, r)
	}))
	defer srv.Close()

	cache, _ := os.MkdirTemp("", "cache")
	defer os.RemoveAll(cache)
	schema := collate.Schema{{Name: "label", DType: collate.Int64}}
	decode := func(ctx context.Context, rec engine.Record, s *engine.Slot) error {
		label, err := shards.Int(rec, "cls")
		collate.As[int64](s.Tensor("label"))[0] = label
		return err
	}
	for _, job := range []string{"first job", "resumed job"} {
		requests.Store(0)
		src, err := shards.New(context.Background(), srv.URL+"/train-{0..1}.tar", schema, decode,
			shards.Cache(cache, 1<<30))
		if err != nil {
			panic(err)
		}
		ds, err := engine.FromIterable(context.Background(), src, engine.IterableConfig{})
		if err != nil {
			panic(err)
		}
		l, err := engine.New(ds, engine.Config{BatchSize: 8, Backend: "cpu"})
		if err != nil {
			panic(err)
		}
		for b, err := range l.Epoch(context.Background(), 0) {
			if err != nil {
				panic(err)
			}
			fmt.Println(job, collate.As[int64](b.Tensor("label")))
		}
		l.Close()
		src.Close() // waits for the downloads in flight
		fmt.Printf("%s: %d requests to the server, %d cache hits\n", job, requests.Load(), src.StorageStats().Hits)
	}
	// Output:
	// first job [0 1 2 0 1 2 0 1]
	// first job: 5 requests to the server, 1 cache hits
	// resumed job [0 1 2 0 1 2 0 1]
	// resumed job: 0 requests to the server, 2 cache hits
}
