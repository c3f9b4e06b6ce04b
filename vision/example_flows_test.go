package vision_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/vision"
)

// A list of images and labels, one "path,label" a line (CSV), as a custom
// torchvision dataset over an annotations file reads them: the evaluation
// transform (Resize, CenterCrop, ToTensor, Normalize) here.
func ExampleFileList() {
	dir, _ := os.MkdirTemp("", "filelist")
	defer os.RemoveAll(dir)
	list := "path,label\n"
	for i, f := range []string{"rgb420.jpg", "gray.jpg", "rgb.png"} {
		b, _ := os.ReadFile(filepath.Join("testdata", f))
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
		list += fmt.Sprintf("%s,%d\n", f, i%2)
	}
	os.WriteFile(filepath.Join(dir, "val.csv"), []byte(list), 0o644)

	ds, err := vision.FileList(filepath.Join(dir, "val.csv"), vision.Eval(32)) // paths relative to the list's folder
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ds.Close()
	l, err := engine.New(ds, engine.Config{BatchSize: 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(b.Tensor("image").Shape(), collate.As[int64](b.Tensor("label")))
	}
	// Output:
	// [3 3 32 32] [0 1 0]
}

// Samples named in code: paths and class indices, with the class names, and
// uint8 output (normalize on the GPU: a quarter of the bytes of float32).
func ExampleNew() {
	samples := []vision.Sample{
		{Path: filepath.Join("testdata", "rgb420.jpg"), Label: 1},
		{Path: filepath.Join("testdata", "palette.png"), Label: 0},
	}
	t := vision.Train(48)
	t.Output = vision.Uint8CHW
	ds, err := vision.New(samples, []string{"background", "object"}, t)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ds.Close()
	l, err := engine.New(ds, engine.Config{BatchSize: 2, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			fmt.Println(err)
			return
		}
		x := b.Tensor("image")
		fmt.Println(x.DType(), x.Shape(), collate.As[int64](b.Tensor("label")))
	}
	// Output:
	// uint8 [2 3 48 48] [1 0]
}
