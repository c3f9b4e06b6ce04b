// Package fashion provides Fashion-MNIST as a tensorbatch Dataset, read
// from the gzipped IDX files that Debian's dataset-fashion-mnist installs.
// The examples and benches share it. Images are 28×28 uint8 in memory and
// are written into the batch as float32 in [0, 1].
package fashion

import (
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// DefaultDir is where Debian's dataset-fashion-mnist installs the data.
const DefaultDir = "/usr/share/datasets/fashion-mnist"

// The sizes of a sample.
const (
	Side    = 28
	Pixels  = Side * Side
	Classes = 10
)

// Schema is one sample: the image, flattened, and its class, shaped [1] so
// that a batch's labels are [batch, 1] (what GoMLX's sparse losses take).
var Schema = collate.Schema{
	{Name: "image", DType: collate.Float32, Shape: []int{Pixels}},
	{Name: "label", DType: collate.Int64, Shape: []int{1}},
}

// Set is one split of Fashion-MNIST in memory.
type Set struct {
	Images []byte // Len() images of Pixels bytes, row-major
	Labels []byte // classes 0–9
}

// Len returns the number of samples.
func (s *Set) Len() int { return len(s.Labels) }

// Missing reports why Fashion-MNIST cannot be read from dir, or nil.
func Missing(dir string) error {
	_, err := os.Stat(filepath.Join(dir, "train-images-idx3-ubyte.gz"))
	return err
}

// Load reads split ("train" or "t10k") from dir, keeping the first limit
// samples when limit > 0.
func Load(dir, split string, limit int) (*Set, error) {
	images, err := readIDX(filepath.Join(dir, split+"-images-idx3-ubyte.gz"), 0x803, limit*Pixels)
	if err != nil {
		return nil, err
	}
	labels, err := readIDX(filepath.Join(dir, split+"-labels-idx1-ubyte.gz"), 0x801, limit)
	if err != nil {
		return nil, err
	}
	if len(images) != len(labels)*Pixels {
		return nil, fmt.Errorf("fashion: %s: %d labels for %d bytes of images", split, len(labels), len(images))
	}
	return &Set{Images: images, Labels: labels}, nil
}

// Dataset returns s as a tensorbatch Dataset of Schema. With flip, half the
// images are mirrored left-right, drawn from each sample's own RNG (the same
// flips for any worker count).
func (s *Set) Dataset(flip bool) engine.Dataset {
	return engine.DatasetFunc(s.Len(), Schema, func(_ context.Context, slot *engine.Slot) error {
		i := slot.Index()
		src := s.Images[i*Pixels : (i+1)*Pixels]
		dst := collate.As[float32](slot.Tensor("image"))
		mirror := flip && slot.Rand().IntN(2) == 1
		for y := range Side {
			for x := range Side {
				sx := x
				if mirror {
					sx = Side - 1 - x
				}
				dst[y*Side+x] = float32(src[y*Side+sx]) / 255
			}
		}
		collate.As[int64](slot.Tensor("label"))[0] = int64(s.Labels[i])
		return nil
	})
}

// readIDX returns the payload of a gzipped IDX file with the given magic,
// at most its first n bytes when n > 0.
func readIDX(path string, magic uint32, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("fashion: %w (install Debian's dataset-fashion-mnist, or pass -data)", err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("fashion: %s: %w", path, err)
	}
	defer z.Close()
	var hdr [2]uint32
	if err := binary.Read(z, binary.BigEndian, &hdr); err != nil {
		return nil, fmt.Errorf("fashion: %s: header: %w", path, err)
	}
	if hdr[0] != magic {
		return nil, fmt.Errorf("fashion: %s: magic %#x, want %#x", path, hdr[0], magic)
	}
	dims := int(magic&0xff) - 1 // dimensions after the first
	if _, err := io.CopyN(io.Discard, z, int64(4*dims)); err != nil {
		return nil, fmt.Errorf("fashion: %s: header: %w", path, err)
	}
	var r io.Reader = z
	if n > 0 {
		r = io.LimitReader(z, int64(n))
	}
	return io.ReadAll(r)
}
