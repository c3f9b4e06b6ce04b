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

// A training loop over a folder of images, one sub-folder per class, as
// with torchvision's ImageFolder and DataLoader.
func ExampleImageFolder() {
	root, _ := os.MkdirTemp("", "imagefolder")
	defer os.RemoveAll(root)
	for i, f := range []string{"rgb420.jpg", "gray.jpg", "cmyk.jpg", "rgb.png", "palette.png", "progressive.jpg"} {
		class := []string{"cat", "dog"}[i%2]
		b, _ := os.ReadFile(filepath.Join("testdata", f))
		os.MkdirAll(filepath.Join(root, class), 0o755)
		os.WriteFile(filepath.Join(root, class, f), b, 0o644)
	}

	ds, err := vision.ImageFolder(root, vision.Train(64)) // RandomResizedCrop(64), flip, ToTensor, Normalize
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ds.Close()
	fmt.Println("classes:", ds.Classes(), "images:", ds.Len())

	l, err := engine.New(ds, engine.Config{BatchSize: 4, Shuffle: true, Workers: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	for epoch := range 2 {
		for b, err := range l.Epoch(context.Background(), epoch) {
			if err != nil {
				fmt.Println(err) // a *engine.SampleError naming the index, its message the file
				return
			}
			x := b.Tensor("image") // [n, 3, 64, 64] float32 in pinned memory
			y := collate.As[int64](b.Tensor("label"))
			if epoch == 0 {
				fmt.Println(x.DType(), x.Shape(), len(y))
			}
		}
	}
	// Output:
	// classes: [cat dog] images: 6
	// float32 [4 3 64 64] 4
	// float32 [2 3 64 64] 2
}
