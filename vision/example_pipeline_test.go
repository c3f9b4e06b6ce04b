package vision_test

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/shards"
	"github.com/tensorbatch/tensorbatch/vision"
)

// The fused transform on bytes from anywhere (a database, a message, an
// HTTP body): one sample's image field out, with the crop drawn from an
// RNG (in a loader, the slot's).
func ExampleNewPipeline() {
	p, err := vision.NewPipeline(vision.Train(32)) // RandomResizedCrop(32), flip, ToTensor, Normalize
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	fmt.Println(p.Schema())

	data, _ := os.ReadFile(filepath.Join("testdata", "rgb420.jpg"))
	dst := make([]byte, p.Schema()[0].Bytes()) // in a loader: s.Tensor("image").Bytes()
	err = p.Decode(data, rand.New(rand.NewPCG(1, 2)), dst)
	fmt.Println(len(dst), err)

	err = p.Decode(data[:len(data)/2], rand.New(rand.NewPCG(1, 2)), dst)
	fmt.Println(errors.Is(err, vision.ErrCorrupt))
	// Output:
	// [image float32[3,32,32] label int64[]]
	// 12288 <nil>
	// true
}

// A WebDataset tar shard (here on local disk; the same pattern takes
// https:// and s3:// URLs) decoded by a Pipeline into a loader's batches:
// the samples' .jpg (or .jpeg, .png, ...) and .cls (or .label, .json)
// members.
func ExamplePipeline_Record() {
	dir, _ := os.MkdirTemp("", "webdataset")
	defer os.RemoveAll(dir)
	f, _ := os.Create(filepath.Join(dir, "train-0000.tar"))
	w := tar.NewWriter(f)
	for i, name := range []string{"rgb420.jpg", "gray.jpg", "rgb.png", "progressive.jpg", "palette.png"} {
		img, _ := os.ReadFile(filepath.Join("testdata", name))
		ext := filepath.Ext(name) // .jpg or .png
		for _, m := range []struct {
			name string
			data []byte
		}{{fmt.Sprintf("%06d%s", i, ext), img}, {fmt.Sprintf("%06d.cls", i), []byte(fmt.Sprint(i % 2))}} {
			w.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data))})
			w.Write(m.data)
		}
	}
	w.Close()
	f.Close()

	p, err := vision.NewPipeline(vision.Train(48))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	src, err := shards.New(context.Background(), filepath.Join(dir, "train-{0000..0000}.tar"), p.Schema(), p.Record("jpg", "cls"))
	if err != nil {
		fmt.Println(err)
		return
	}
	ds, err := engine.FromIterable(context.Background(), src, engine.IterableConfig{ShuffleBuffer: 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	l, err := engine.New(ds, engine.Config{BatchSize: 4, Workers: 2, SkipZeroing: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			fmt.Println(err) // a *engine.SampleError; its message names the shard, key and member
			return
		}
		fmt.Println(b.Tensor("image").Shape(), len(collate.As[int64](b.Tensor("label"))))
	}
	// Output:
	// [4 3 48 48] 4
	// [1 3 48 48] 1
}
