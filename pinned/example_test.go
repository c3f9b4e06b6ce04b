package pinned_test

import (
	"fmt"

	"github.com/tensorbatch/tensorbatch/pinned"
)

// Select picks the backend once per process: "auto" (the default, or
// $TENSORBATCH_BACKEND) tries HIP, then CUDA, and falls back to the CPU with
// a reason; "cpu", "cuda", "cuda:1" or "hip" ask for one. engine.New does
// this with Config.Backend.
func ExampleSelect() {
	sel, err := pinned.Select("cpu")
	if err != nil {
		panic(err)
	}
	fmt.Println(sel.Backend.Name(), "-", sel.Reason)

	auto, err := pinned.Select("auto")
	if err != nil {
		panic(err)
	}
	// On a machine with no usable GPU, auto falls back and says why.
	fmt.Println(auto.Backend.Name() != "", auto.Reason != "")
	// Output:
	// cpu - cpu asked for
	// true true
}
