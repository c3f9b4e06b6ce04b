package shards_test

import (
	"archive/tar"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/shards"
)

// writeShard writes a WebDataset tar of samples first..first+n-1: a
// ".txt" member with the sample's text and a ".cls" member with its class.
func writeShard(path string, first, n int) {
	f, _ := os.Create(path)
	w := tar.NewWriter(f)
	for i := first; i < first+n; i++ {
		for ext, body := range map[string]string{"txt": fmt.Sprintf("sample %d", i), "cls": fmt.Sprint(i % 3)} {
			w.WriteHeader(&tar.Header{Name: fmt.Sprintf("%06d.%s", i, ext), Mode: 0o644, Size: int64(len(body))})
			w.Write([]byte(body))
		}
	}
	w.Close()
	f.Close()
}

// Samples streamed from WebDataset tar shards (here on local disk; the same
// pattern takes https:// and s3:// URLs): a decode function writes each
// record's members into its slot, and the engine splits the shards across
// ranks and workers.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "shards")
	defer os.RemoveAll(dir)
	for s := range 3 {
		writeShard(filepath.Join(dir, fmt.Sprintf("train-%d.tar", s)), 4*s, 4)
	}

	schema := collate.Schema{
		{Name: "text", DType: collate.Uint8, Shape: []int{16}},
		{Name: "label", DType: collate.Int64},
	}
	src, err := shards.New(context.Background(), filepath.Join(dir, "train-{0..2}.tar"), schema,
		func(ctx context.Context, rec engine.Record, s *engine.Slot) error {
			label, err := shards.Int(rec, "cls") // an error names the shard and sample
			collate.As[int64](s.Tensor("label"))[0] = label
			copy(s.Tensor("text").Bytes(), rec.Fields["txt"])
			return err
		})
	if err != nil {
		panic(err)
	}
	ds, err := engine.FromIterable(context.Background(), src, engine.IterableConfig{})
	if err != nil {
		panic(err)
	}
	l, err := engine.New(ds, engine.Config{BatchSize: 5, Workers: 2})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			panic(err)
		}
		fmt.Println(b.Indices(), collate.As[int64](b.Tensor("label")))
	}
	// Output:
	// [0 1 2 3 4] [0 1 2 0 1]
	// [5 6 7 8 9] [2 0 1 2 0]
	// [10 11] [1 2]
}
