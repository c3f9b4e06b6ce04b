package datasets_test

import (
	"context"
	"fmt"

	"github.com/tensorbatch/tensorbatch/datasets"
	"github.com/tensorbatch/tensorbatch/engine"
)

// Fashion-MNIST as Debian's dataset-fashion-mnist installs it, read into
// memory and served as float32 images in [0, 1] with random flips.
func ExampleMNIST() {
	train, err := datasets.MNIST(datasets.FashionMNISTDir, "train", 0)
	if err != nil {
		fmt.Println("Fashion-MNIST is not installed") // apt-get install dataset-fashion-mnist
		return
	}
	fmt.Println(train.Len(), "images of", train.Channels, "x", train.Height, "x", train.Width, "in", train.Classes, "classes")
	l, err := engine.New(train.Dataset(datasets.Config{Flip: true}), engine.Config{BatchSize: 64, Shuffle: true, Workers: 2})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			panic(err)
		}
		fmt.Println(b.Tensor("image").Shape(), b.Tensor("label").Shape())
		break
	}
	// Output:
	// 60000 images of 1 x 28 x 28 in 10 classes
	// [64 1 28 28] [64 1]
}
