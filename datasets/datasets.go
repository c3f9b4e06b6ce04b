package datasets

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/regfile"
)

var (
	// ErrNotRegular is wrapped by the error of a path that is not a
	// regular file (a directory, FIFO, device or socket, or a link to
	// one): it is refused without blocking, before a byte is read. It is
	// vision.ErrNotRegular and shards.ErrNotRegular.
	ErrNotRegular = regfile.ErrNotRegular
	// ErrFileTooLarge is wrapped by the error of a CIFAR-10 batch file of
	// more than 1 GiB. It is vision.ErrFileTooLarge and
	// shards.ErrFileTooLarge.
	ErrFileTooLarge = regfile.ErrTooLarge
)

// maxCIFARBytes bounds a CIFAR-10 batch file, read whole: one holds
// 10,000 records, 30,730,000 bytes.
const maxCIFARBytes = 1 << 30

// FashionMNISTDir is where Debian's dataset-fashion-mnist package installs
// Fashion-MNIST.
const FashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// Images is one split of an image classification dataset in memory.
type Images struct {
	Pixels                  []byte // Len() images of Channels×Height×Width bytes, channel-major (CHW)
	Labels                  []byte // one class a sample
	Channels, Height, Width int
	Classes                 int // the number of classes
}

// Len returns the number of samples.
func (s *Images) Len() int { return len(s.Labels) }

// Size returns the number of bytes (and float32 values) of one image.
func (s *Images) Size() int { return s.Channels * s.Height * s.Width }

// Config shape the samples Dataset writes.
type Config struct {
	Flat bool // image shaped [Channels×Height×Width] (what a dense layer takes) instead of [Channels, Height, Width]
	Flip bool // mirror half the images left-right, drawn from each sample's own RNG (the same flips for any worker count)
}

// Schema returns the fields of Dataset's samples: "image", float32 in [0, 1],
// and "label", int64 shaped [1] (what sparse cross-entropy losses take).
func (s *Images) Schema(o Config) collate.Schema {
	shape := []int{s.Channels, s.Height, s.Width}
	if o.Flat {
		shape = []int{s.Size()}
	}
	return collate.Schema{
		{Name: "image", DType: collate.Float32, Shape: shape},
		{Name: "label", DType: collate.Int64, Shape: []int{1}},
	}
}

// Dataset returns s as an engine Dataset of Schema(o), over the pixels
// and labels s holds now. Its Fingerprint (engine.Fingerprinter), which a
// loader's State records, is:
//
//   - images.shape: Channels×Height×Width, which a Flat schema hides;
//   - images.pixels and images.labels: each one's size and a hash of its
//     bytes, sampled as engine.FingerprintBytes samples large data (all of them up
//     to 256 KiB, else 64 blocks of 4 KiB spread over them). The bytes
//     are those in memory, after gunzip and limit, so a split read from
//     gzipped or plain files, or built by hand, is identified alike;
//   - images.flip: Options.Flip.
//
// Labels are hashed whole up to 262,144 samples. Pixels are sampled: two
// splits, or two data sets, differ, but an edit of a few images between
// the sampled blocks is not seen (a resumed job would load the edited
// images).
func (s *Images) Dataset(o Config) engine.Dataset {
	d := &imagesDataset{pixels: s.Pixels, labels: s.Labels, c: s.Channels, h: s.Height, w: s.Width, schema: s.Schema(o), flip: o.Flip}
	d.fp = engine.Fingerprint{
		"images.shape":  fmt.Sprintf("%dx%dx%d", s.Channels, s.Height, s.Width),
		"images.pixels": engine.FingerprintBytes(s.Pixels),
		"images.labels": engine.FingerprintBytes(s.Labels),
		"images.flip":   strconv.FormatBool(o.Flip),
	}
	return d
}

// imagesDataset is Images.Dataset's: the images as float32 in [0, 1].
type imagesDataset struct {
	pixels, labels []byte
	c, h, w        int
	schema         collate.Schema
	flip           bool
	fp             engine.Fingerprint
}

func (d *imagesDataset) Len() int                        { return len(d.labels) }
func (d *imagesDataset) Schema() collate.Schema          { return d.schema }
func (d *imagesDataset) Fingerprint() engine.Fingerprint { return maps.Clone(d.fp) }

// Fill writes image s.Index(), mirrored when Flip draws it, and its label.
func (d *imagesDataset) Fill(_ context.Context, slot *engine.Slot) error {
	i := slot.Index()
	if i < 0 || i >= len(d.labels) {
		return fmt.Errorf("datasets: index %d out of range [0, %d)", i, len(d.labels))
	}
	size, w := d.c*d.h*d.w, d.w
	src := d.pixels[i*size : (i+1)*size]
	dst := collate.As[float32](slot.Tensor("image"))
	mirror := d.flip && slot.Rand().IntN(2) == 1
	for row := 0; row < len(src); row += w {
		for x := range w {
			sx := x
			if mirror {
				sx = w - 1 - x
			}
			dst[row+x] = float32(src[row+sx]) / 255
		}
	}
	collate.As[int64](slot.Tensor("label"))[0] = int64(d.labels[i])
	return nil
}

// MNIST reads split ("train" or "t10k") of MNIST, Fashion-MNIST or any set
// in their layout from dir: split-images-idx3-ubyte and
// split-labels-idx1-ubyte, each optionally gzipped (.gz). With limit > 0
// only the first limit samples are kept. A missing file is an error that
// matches fs.ErrNotExist.
func MNIST(dir, split string, limit int) (*Images, error) {
	images, err := readIDXFile(filepath.Join(dir, split+"-images-idx3-ubyte"), limit)
	if err != nil {
		return nil, err
	}
	labels, err := readIDXFile(filepath.Join(dir, split+"-labels-idx1-ubyte"), limit)
	if err != nil {
		return nil, err
	}
	if len(images.Dims) != 3 || len(labels.Dims) != 1 {
		return nil, fmt.Errorf("datasets: %s: images of %d dimensions and labels of %d, want 3 and 1", split, len(images.Dims), len(labels.Dims))
	}
	if images.Dims[0] != labels.Dims[0] {
		return nil, fmt.Errorf("datasets: %s: %d images and %d labels", split, images.Dims[0], labels.Dims[0])
	}
	s := &Images{Pixels: images.Data, Labels: labels.Data, Channels: 1, Height: images.Dims[1], Width: images.Dims[2]}
	return s, s.countClasses(split)
}

// countClasses sets Classes to 10 (MNIST's, Fashion-MNIST's and
// CIFAR-10's), or one more than the largest label where that is more.
func (s *Images) countClasses(name string) error {
	s.Classes = 10
	for _, l := range s.Labels {
		s.Classes = max(s.Classes, int(l)+1)
	}
	if s.Len() == 0 {
		return fmt.Errorf("datasets: %s: no samples", name)
	}
	return nil
}

// IDX is the content of an IDX file of unsigned bytes (type code 0x08).
type IDX struct {
	Dims []int  // the dimensions, outermost first
	Data []byte // the values, row-major
}

// ReadIDX reads an IDX file of unsigned bytes from r. With limit > 0 it
// keeps only the first limit entries of the outermost dimension (and
// Dims[0] says how many it kept).
func ReadIDX(r io.Reader, limit int) (IDX, error) {
	return readIDX(r, limit, nil)
}

// readIDX is ReadIDX; check, where not nil, is given the bytes the
// header declares (its own included) before anything is allocated for
// them, and may refuse them.
func readIDX(r io.Reader, limit int, check func(declared int64) error) (IDX, error) {
	var magic [4]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return IDX{}, fmt.Errorf("header: %w", err)
	}
	if magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08 || magic[3] == 0 {
		return IDX{}, fmt.Errorf("magic % x: not an IDX file of unsigned bytes", magic)
	}
	dims := make([]int, magic[3])
	rowBytes := int64(1)
	for i := range dims {
		var d uint32
		if err := binary.Read(r, binary.BigEndian, &d); err != nil {
			return IDX{}, fmt.Errorf("header: %w", err)
		}
		dims[i] = int(d)
		if i > 0 {
			rowBytes *= int64(d)
			if rowBytes > 1<<40 {
				return IDX{}, fmt.Errorf("header: dimensions %v too large", dims[:i+1])
			}
		}
	}
	if rowBytes > 0 && int64(dims[0]) > (1<<62)/rowBytes {
		return IDX{}, fmt.Errorf("header: dimensions %v too large", dims)
	}
	if check != nil {
		if err := check(4 + 4*int64(len(dims)) + int64(dims[0])*rowBytes); err != nil {
			return IDX{}, fmt.Errorf("dimensions %v: %w", dims, err)
		}
	}
	if limit > 0 && limit < dims[0] {
		dims[0] = limit
	}
	want := int64(dims[0]) * rowBytes
	var data []byte
	var err error
	if check != nil { // the size is the file's: allocated once
		data = make([]byte, want)
		var n int
		n, err = io.ReadFull(r, data)
		data = data[:n]
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			err = nil // said below
		}
	} else { // read what exists, up to the declared size: never allocate by the header alone
		data, err = io.ReadAll(io.LimitReader(r, want))
	}
	if err != nil {
		return IDX{}, err
	}
	if int64(len(data)) != want {
		return IDX{}, fmt.Errorf("dimensions %v declare %d bytes, the file has %d: %w", dims, want, len(data), io.ErrUnexpectedEOF)
	}
	return IDX{Dims: dims, Data: data}, nil
}

// maxInflate is the most a deflate stream inflates a byte to.
const maxInflate = 1032

// readIDXFile reads path, or path.gz where path does not exist.
func readIDXFile(path string, limit int) (IDX, error) {
	f, err := regfile.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		path += ".gz"
		f, err = regfile.Open(path)
	}
	if err != nil {
		return IDX{}, fmt.Errorf("datasets: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return IDX{}, fmt.Errorf("datasets: %w", err)
	}
	// The header's dimensions must fit in the file, or in what a gzip
	// file of its size can inflate to (deflate's ratio is at most about
	// 1032:1), before the data are allocated: a few bytes must not make
	// it allocate GBs. (Whether they are all there is checked as they
	// are read.)
	most, what := fi.Size(), "the file has"
	if strings.HasSuffix(path, ".gz") {
		most, what = maxInflate*fi.Size(), fmt.Sprintf("a gzip file of %d bytes inflates to at most", fi.Size())
	}
	check := func(declared int64) error {
		if declared > most {
			return fmt.Errorf("declare %d bytes, %s %d", declared, what, most)
		}
		return nil
	}
	var r io.Reader = bufio.NewReader(f)
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(r)
		if err != nil {
			return IDX{}, fmt.Errorf("datasets: %s: %w", path, err)
		}
		defer z.Close()
		r = z
	}
	idx, err := readIDX(r, limit, check)
	if err != nil {
		return IDX{}, fmt.Errorf("datasets: %s: %w", path, err)
	}
	return idx, nil
}

// The CIFAR-10 binary version: each record is a label byte and a 32×32 RGB
// image, channel-major.
const (
	cifarSide   = 32
	cifarRecord = 1 + 3*cifarSide*cifarSide
)

// CIFAR10 reads the binary version of CIFAR-10 from dir (the folder
// cifar-10-batches-bin of cifar-10-binary.tar.gz): data_batch_1.bin to
// data_batch_5.bin for train, test_batch.bin otherwise. With limit > 0 only
// the first limit samples are kept.
func CIFAR10(dir string, train bool, limit int) (*Images, error) {
	names := []string{"test_batch.bin"}
	if train {
		names = []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"}
	}
	s := &Images{Channels: 3, Height: cifarSide, Width: cifarSide}
	for _, name := range names {
		if limit > 0 && s.Len() >= limit {
			break
		}
		if err := s.readCIFAR(filepath.Join(dir, name), limit); err != nil {
			return nil, err
		}
	}
	return s, s.countClasses(dir)
}

// readCIFAR appends the records of one CIFAR-10 batch file to s.
func (s *Images) readCIFAR(path string, limit int) error {
	data, err := regfile.ReadFile(path, maxCIFARBytes)
	if err != nil {
		return fmt.Errorf("datasets: %w", err)
	}
	if len(data)%cifarRecord != 0 {
		return fmt.Errorf("datasets: %s: %d bytes, not a whole number of %d-byte records", path, len(data), cifarRecord)
	}
	for rec := data; len(rec) > 0 && (limit <= 0 || s.Len() < limit); rec = rec[cifarRecord:] {
		if rec[0] > 9 {
			return fmt.Errorf("datasets: %s: record %d has label %d, want 0-9", path, s.Len(), rec[0])
		}
		s.Labels = append(s.Labels, rec[0])
		s.Pixels = append(s.Pixels, rec[1:cifarRecord]...)
	}
	return nil
}
