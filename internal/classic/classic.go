// Package classic is the classic DataLoader workload of the seed guides,
// shared by the engine's benchmarks and the bench harness: samples of
// randn(3,224,224) as float32 and an int64 label, batch 32, drop last.
package classic

import (
	"context"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// The workload's size.
const (
	Samples = 1000
	Batch   = 32
)

// Schema is one sample: the image and its label.
var Schema = collate.Schema{
	{Name: "image", DType: collate.Float32, Shape: []int{3, 224, 224}},
	{Name: "label", DType: collate.Int64},
}

// SampleBytes is the size of one sample's fields.
const SampleBytes = 3*224*224*4 + 8

// FillMath draws the image with math/rand/v2's NormFloat64 from the
// sample's RNG.
func FillMath(_ context.Context, s *engine.Slot) error {
	img := collate.As[float32](s.Tensor("image"))
	r := s.Rand()
	for i := range img {
		img[i] = float32(r.NormFloat64())
	}
	label(s)
	return nil
}

// FillPhilox draws the image with the vectorized Philox kernel keyed by
// the sample.
func FillPhilox(_ context.Context, s *engine.Slot) error {
	key, stream := s.Seed()
	collate.FillNormal(collate.As[float32](s.Tensor("image")), key, stream)
	label(s)
	return nil
}

func label(s *engine.Slot) { collate.As[int64](s.Tensor("label"))[0] = int64(s.Index() % 10) }
