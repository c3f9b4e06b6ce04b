package vision

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tensorbatch/tensorbatch/engine"
)

// Fingerprint returns the parts of a dataset's engine.Fingerprint that
// the Pipeline decides (engine.Fingerprinter), so that a source decoding
// through it (a Dataset, a shard source) records them:
//
//   - vision.transform: "train" or "eval";
//   - vision.size, and for evaluation vision.resize_size; for training
//     vision.scale, vision.ratio and vision.flip (what an evaluation
//     transform does not draw is left out, so it changes nothing);
//   - vision.mean and vision.std, vision.output (dtype and layout),
//     vision.mode (Exact or Fast) and vision.fields (the image and label
//     field names);
//   - vision.decoder: the JPEG decoder, "libjpeg-turbo" or "go", whose
//     pixels differ (by about 1 of 255; a state saved where
//     libjpeg-turbo loads is refused where it does not).
//
// MaxPixels and MaxFileBytes are left out: they decide whether an image
// fails, not its pixels. So is the kernel path (AVX2 or Go), whose bits
// are the same.
func (p *Pipeline) Fingerprint() engine.Fingerprint {
	t := p.t
	f := engine.Fingerprint{
		"vision.transform": "eval",
		"vision.size":      strconv.Itoa(t.Size),
		"vision.mean":      float32s(t.Mean[:]),
		"vision.std":       float32s(t.Std[:]),
		"vision.output":    t.Output.String(),
		"vision.mode":      t.Mode.String(),
		"vision.fields":    p.o.image + "," + p.o.label,
		"vision.decoder":   p.dec.Name,
	}
	if t.Train {
		f["vision.transform"] = "train"
		f["vision.scale"] = float64s(t.Scale[:])
		f["vision.ratio"] = float64s(t.Ratio[:])
		f["vision.flip"] = strconv.FormatBool(!t.NoFlip)
	} else {
		f["vision.resize_size"] = strconv.Itoa(t.ResizeSize)
	}
	return f
}

// Fingerprint returns what determines the dataset's samples besides Len
// and Schema (engine.Fingerprinter): its Pipeline's parts (see
// Pipeline.Fingerprint) and
//
//   - vision.classes: the number of class names and a hash of them, in
//     label order;
//   - vision.files: the number of samples and a hash of each one's name,
//     label and file size, in index order. Names are relative to the
//     folder all the samples share (an ImageFolder's root, or below it),
//     so the same tree copied elsewhere, or a FileList under another
//     Root, keeps its fingerprint.
//
// Only the names and sizes identify the images: no image is read, so an
// image replaced by another of the same size, under the same name, is
// not told apart (a resumed job would load the new one). A file that is
// missing or not a regular file counts with size -1. The sizes are taken
// (one stat a file, several at once) at the first call, then kept.
func (d *Dataset) Fingerprint() engine.Fingerprint {
	d.filesOnce.Do(func() { d.files = filesIdentity(d.samples) })
	f := d.p.Fingerprint()
	f["vision.classes"] = strconv.Itoa(len(d.classes)) + " " + engine.FingerprintHash(d.classes...)
	f["vision.files"] = d.files
	return f
}

func float32s(v []float32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(float64(x), 'g', -1, 32)
	}
	return strings.Join(s, ",")
}

func float64s(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}

// identityChunk is how many samples are hashed together before their
// hash joins the list's: the memory of an identity stays bounded for a
// list of millions of files.
const identityChunk = 4096

// filesIdentity is "n hash" of samples: each one's name relative to the
// folder they share, its label and its file's size.
func filesIdentity(samples []Sample) string {
	names := relativeNames(samples)
	sizes := fileSizes(samples)
	var chunks []string
	parts := make([]string, 0, 3*min(len(samples), identityChunk))
	for i, s := range samples {
		parts = append(parts, names[i], strconv.Itoa(s.Label), strconv.FormatInt(sizes[i], 10))
		if len(parts) == cap(parts) || i == len(samples)-1 {
			chunks = append(chunks, engine.FingerprintHash(parts...))
			parts = parts[:0]
		}
	}
	return strconv.Itoa(len(samples)) + " " + engine.FingerprintHash(chunks...)
}

// relativeNames returns the samples' paths, cleaned and slash-separated,
// less the longest folder that all of them are in.
func relativeNames(samples []Sample) []string {
	names := make([]string, len(samples))
	for i, s := range samples {
		names[i] = filepath.ToSlash(filepath.Clean(s.Path))
	}
	if len(names) == 0 {
		return names
	}
	prefix := names[0][:strings.LastIndexByte(names[0], '/')+1]
	for _, n := range names[1:] {
		for !strings.HasPrefix(n, prefix) {
			prefix = prefix[:strings.LastIndexByte(prefix[:len(prefix)-1], '/')+1]
		}
	}
	for i, n := range names {
		names[i] = n[len(prefix):]
	}
	return names
}

// statWorkers bounds the stats made at once: a network file system
// answers many at a time.
const statWorkers = 16

// fileSizes returns the size of each sample's file (links followed), -1
// where it is missing or not a regular file.
func fileSizes(samples []Sample) []int64 {
	const batch = 256
	sizes := make([]int64, len(samples))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(statWorkers, (len(samples)+batch-1)/batch) {
		wg.Go(func() {
			for {
				i := int(next.Add(batch)) - batch
				if i >= len(samples) {
					return
				}
				for j := i; j < min(i+batch, len(samples)); j++ {
					sizes[j] = -1
					if fi, err := os.Stat(samples[j].Path); err == nil && fi.Mode().IsRegular() {
						sizes[j] = fi.Size()
					}
				}
			}
		})
	}
	wg.Wait()
	return sizes
}
