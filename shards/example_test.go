package shards_test

import (
	"fmt"

	"github.com/tensorbatch/tensorbatch/shards"
)

func ExampleExpand() {
	names, err := shards.Expand("s3://bucket/{train,val}-{0000..0002}.tar")
	if err != nil {
		panic(err)
	}
	for _, n := range names {
		fmt.Println(n)
	}
	// Output:
	// s3://bucket/train-0000.tar
	// s3://bucket/train-0001.tar
	// s3://bucket/train-0002.tar
	// s3://bucket/val-0000.tar
	// s3://bucket/val-0001.tar
	// s3://bucket/val-0002.tar
}

func ExampleSplitKey() {
	key, ext, ok := shards.SplitKey("train/n01530575_10086.seg.png")
	fmt.Println(key, ext, ok)
	// Output: train/n01530575_10086 seg.png true
}
