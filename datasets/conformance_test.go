package datasets_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/datasets"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
)

// Every split's Dataset passes the conformance suite: MNIST's and
// CIFAR-10's layouts from files the test writes, and Fashion-MNIST where
// Debian's dataset-fashion-mnist is installed. Each Other has New's Len
// and Schema, so only its fingerprint refuses New's state: other images
// (MNIST), Flip on (CIFAR-10), the other split (Fashion-MNIST).
func TestImagesConform(t *testing.T) {
	n := 12
	if testing.Short() {
		n = 8
	}
	mnist := func(first int) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			s, err := datasets.MNIST(tinyFrom(t, first, n, first%2 == 1), "train", 0)
			require.NoError(t, err)
			return s.Dataset(datasets.Config{Flip: true})
		}
	}
	cifar10 := func(flip bool) func(testing.TB) engine.Dataset {
		return func(t testing.TB) engine.Dataset {
			dir := t.TempDir()
			cifar(t, dir, "test_batch.bin", 0, n)
			s, err := datasets.CIFAR10(dir, false, 0)
			require.NoError(t, err)
			return s.Dataset(datasets.Config{Flip: flip})
		}
	}
	t.Run("MNIST", func(t *testing.T) {
		enginetest.TestDataset(t, enginetest.Case{New: mnist(0), Other: mnist(1)})
	})
	t.Run("CIFAR10", func(t *testing.T) {
		enginetest.TestDataset(t, enginetest.Case{New: cifar10(false), Other: cifar10(true)})
	})
	t.Run("FashionMNIST", func(t *testing.T) {
		if _, err := os.Stat(datasets.FashionMNISTDir); err != nil {
			t.Skipf("Fashion-MNIST is not installed (%v): apt-get install dataset-fashion-mnist", err)
		}
		fashion := func(split string) func(testing.TB) engine.Dataset {
			return func(t testing.TB) engine.Dataset {
				s, err := datasets.MNIST(datasets.FashionMNISTDir, split, 5*n)
				require.NoError(t, err)
				return s.Dataset(datasets.Config{Flat: true, Flip: true})
			}
		}
		enginetest.TestDataset(t, enginetest.Case{New: fashion("t10k"), Other: fashion("train")})
	})
}

// resumeOn returns engine.New's error for b resuming a state of a.
func resumeOn(t *testing.T, a, b engine.Dataset) error {
	t.Helper()
	cfg := engine.Config{BatchSize: 2, Backend: "cpu"}
	l, err := engine.New(a, cfg)
	require.NoError(t, err)
	st := l.State()
	require.NoError(t, l.Close())
	cfg.Resume = &st
	l, err = engine.New(b, cfg)
	if err == nil {
		require.NoError(t, l.Close())
	}
	return err
}

// A state is refused for a split that differs in any part of its
// fingerprint, naming the part, and resumes the same split read again,
// from gzipped files or plain ones.
func TestImagesFingerprint(t *testing.T) {
	images := func(edit func(s *datasets.Images)) *datasets.Images {
		s := &datasets.Images{Pixels: make([]byte, 6*784), Labels: make([]byte, 6), Channels: 1, Height: 28, Width: 28, Classes: 10}
		for i := range s.Pixels {
			s.Pixels[i] = byte(i * 7)
		}
		for i := range s.Labels {
			s.Labels[i] = byte(i)
		}
		if edit != nil {
			edit(s)
		}
		return s
	}
	flat := datasets.Config{Flat: true}
	base := images(nil).Dataset(flat)
	for _, tc := range []struct {
		key   string
		other engine.Dataset
	}{
		{"images.pixels", images(func(s *datasets.Images) { s.Pixels[5*784+783]++ }).Dataset(flat)}, // the last pixel
		{"images.labels", images(func(s *datasets.Images) { s.Labels[5] = 9 }).Dataset(flat)},
		{"images.shape", images(func(s *datasets.Images) { s.Height, s.Width = 14, 56 }).Dataset(flat)}, // the same [784] schema
		{"images.flip", images(nil).Dataset(datasets.Config{Flat: true, Flip: true})},
	} {
		err := resumeOn(t, base, tc.other)
		require.Error(t, err, tc.key)
		assert.ErrorContains(t, err, "Config.Resume: Dataset", tc.key)
		assert.ErrorContains(t, err, "dataset."+tc.key, tc.key)
	}
	assert.NoError(t, resumeOn(t, base, images(nil).Dataset(flat)), "the same images made again")

	plain, err := datasets.MNIST(tiny(t, 5, false), "train", 0)
	require.NoError(t, err)
	gz, err := datasets.MNIST(tiny(t, 5, true), "train", 0)
	require.NoError(t, err)
	assert.NoError(t, resumeOn(t, plain.Dataset(datasets.Config{}), gz.Dataset(datasets.Config{})), "the same split, gzipped")
	limited, err := datasets.MNIST(tiny(t, 6, false), "train", 5)
	require.NoError(t, err)
	assert.NoError(t, resumeOn(t, plain.Dataset(datasets.Config{}), limited.Dataset(datasets.Config{})), "the same first 5 images of a longer split")
}
