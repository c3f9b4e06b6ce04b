package shards_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/parquet-go/parquet-go"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/shards"
)

// image and row are an image classification dataset's row as Hugging
// Face's datasets writes it: a datasets.Image struct and a ClassLabel.
type image struct {
	Bytes []byte `parquet:"bytes,optional"`
	Path  string `parquet:"path,optional"`
}

type row struct {
	Image image `parquet:"image"`
	Label int64 `parquet:"label"`
}

// Samples streamed from Parquet shards laid out as Hugging Face's datasets
// writes them (here on local disk; the same pattern takes https:// and
// s3:// URLs): each row is a record whose fields are its columns, the
// image's bytes under "image" and under its path's extension ("png"), the
// label as decimal text.
func Example_parquet() {
	dir, _ := os.MkdirTemp("", "shards")
	defer os.RemoveAll(dir)
	for s := range 2 {
		var rows []row
		for i := 3 * s; i < 3*s+3; i++ {
			rows = append(rows, row{Image: image{Bytes: []byte(fmt.Sprintf("png %d", i)), Path: fmt.Sprintf("%d.png", i)}, Label: int64(i % 2)})
		}
		parquet.WriteFile(filepath.Join(dir, fmt.Sprintf("train-%05d-of-00002.parquet", s)), rows)
	}

	schema := collate.Schema{
		{Name: "image", DType: collate.Uint8, Shape: []int{5}},
		{Name: "label", DType: collate.Int64},
	}
	src, err := shards.New(context.Background(), filepath.Join(dir, "train-{00000..00001}-of-00002.parquet"), schema,
		func(ctx context.Context, rec engine.Record, s *engine.Slot) error {
			label, err := shards.Int(rec, "label") // an error names the shard and row
			collate.As[int64](s.Tensor("label"))[0] = label
			copy(s.Tensor("image").Bytes(), rec.Fields["png"]) // or rec.Fields["image"]
			return err
		})
	if err != nil {
		panic(err)
	}
	ds, err := engine.FromIterable(context.Background(), src, engine.IterableConfig{})
	if err != nil {
		panic(err)
	}
	l, err := engine.New(ds, engine.Config{BatchSize: 4, Workers: 2})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			panic(err)
		}
		fmt.Printf("%v %v %q\n", b.Indices(), collate.As[int64](b.Tensor("label")), b.Tensor("image").Bytes())
	}
	// Output:
	// [0 1 2 3] [0 1 0 1] "png 0png 1png 2png 3"
	// [4 5] [0 1] "png 4png 5"
}
