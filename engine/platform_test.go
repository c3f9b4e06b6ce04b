package engine_test

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/csrc"
)

// platformDigests is the one recorded list of the platform workload's batch
// digests, "epoch batch sha256" a line. Every platform, build (cgo or not)
// and kernel path must reproduce it bit for bit: linux/amd64 on every path
// its CPU has, CGO_ENABLED=0, Windows under wine and linux/arm64 under qemu
// (make test-platforms; make test runs this test on each of them).
//
//go:embed testdata/platform-digests.txt
var platformDigests string

var recordDigests = flag.Bool("record-digests", false, "rewrite testdata/platform-digests.txt from this run (linux/amd64, the go path)")

// platformSchema covers the kernels a sample or a batch goes through: a
// uint8 HWC image normalized to float32 CHW, randn from Philox, the same
// noise in float16, and a variable-length field the batch pads. 7x9 pixels
// and 189 values are not multiples of any SIMD width, so every path runs
// its vector loop and its tail.
var platformSchema = collate.Schema{
	{Name: "image", DType: collate.Float32, Shape: []int{3, 7, 9}},
	{Name: "noise", DType: collate.Float32, Shape: []int{3, 7, 9}},
	{Name: "half", DType: collate.Float16, Shape: []int{3, 7, 9}},
	{Name: "frames", DType: collate.Float32, Shape: []int{collate.Dynamic, 5}, MaxLen: 7, Pad: -1},
	{Name: "label", DType: collate.Int64},
}

// platformFields are the batch's tensors in hashing order.
var platformFields = []string{"image", "noise", "half", "frames", "frames_len", "label"}

func fillPlatform(_ context.Context, s *engine.Slot) error {
	key, stream := s.Seed()
	px := make([]uint8, 7*9*3)
	for i := range px {
		px[i] = uint8(s.Rand().Uint32())
	}
	image := collate.As[float32](s.Tensor("image"))
	if err := collate.U8HWCToCHW(image, px, 7, 9, 3, []float32{0.485, 0.456, 0.406}, []float32{0.229, 0.224, 0.225}); err != nil {
		return err
	}
	noise := collate.As[float32](s.Tensor("noise"))
	collate.FillNormal(noise, key, stream)
	collate.F32ToF16(collate.As[collate.F16](s.Tensor("half")), noise)
	collate.FillUniform(collate.As[float32](s.Sequence("frames", s.Rand().IntN(8))), key, stream+1)
	collate.As[int64](s.Tensor("label"))[0] = int64(s.Index())
	return nil
}

// platformRun loads two epochs of the workload (100 samples, batches of 16,
// the last one short, shuffled, 4 workers) and returns a line per batch.
func platformRun(t *testing.T) []string {
	ds := engine.DatasetFunc(100, platformSchema, fillPlatform)
	l := newLoader(t, ds, engine.Config{BatchSize: 16, Shuffle: true, Seed: 2024, Workers: 4, Backend: "cpu"})
	var lines []string
	for epoch := range 2 {
		n := 0
		for b, err := range l.Epoch(context.Background(), epoch) {
			require.NoError(t, err)
			h := sha256.New()
			for _, i := range b.Indices() {
				require.NoError(t, binary.Write(h, binary.LittleEndian, int64(i)))
			}
			for _, name := range platformFields {
				x := b.Tensor(name)
				fmt.Fprint(h, name, x.Shape())
				h.Write(x.Bytes())
			}
			lines = append(lines, fmt.Sprintf("%d %d %s", epoch, n, hex.EncodeToString(h.Sum(nil))))
			n++
		}
	}
	return lines
}

// useKernels makes k the kernels that run and returns the restore
// function; it fails t if this CPU cannot run k.
func useKernels(t testing.TB, k collate.Kernels) (restore func()) {
	t.Helper()
	restore, err := csrc.SetKernels(csrc.Kernels(k))
	require.NoError(t, err)
	return restore
}

func TestPlatformDigests(t *testing.T) {
	want := strings.Split(strings.TrimSpace(platformDigests), "\n")
	if *recordDigests {
		require.Equal(t, "linux/amd64", runtime.GOOS+"/"+runtime.GOARCH, "record on linux/amd64")
		defer useKernels(t, collate.KernelsGo)()
		got := platformRun(t)
		require.NoError(t, os.WriteFile("testdata/platform-digests.txt", []byte(strings.Join(got, "\n")+"\n"), 0o644))
		t.Logf("recorded %d digests", len(got))
		return
	}
	require.Len(t, want, 14, "testdata/platform-digests.txt")
	paths := collate.AvailableKernels()
	if !csrc.Cgo {
		require.Equal(t, []collate.Kernels{collate.KernelsGo}, paths)
	}
	for _, p := range paths {
		t.Run(p.String(), func(t *testing.T) {
			defer useKernels(t, p)()
			assert.Equal(t, want, platformRun(t), "%s/%s, cgo %v, kernels %s", runtime.GOOS, runtime.GOARCH, csrc.Cgo, p)
		})
	}
}
