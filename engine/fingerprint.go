package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Fingerprint is what determines a dataset's samples besides its Len and
// Schema, as named parts: its configuration, seeds and weights, and the
// identity of the data it reads (a file's size and sampled content, an
// object's ETag). Keys are dotted paths ("megatron.seed"); a wrapped
// dataset's parts are nested under its wrapper's ("blend.1.megatron.seed").
//
// A loader records its dataset's Fingerprint, and its order's (Shuffle,
// the Sampler or BatchSampler), in every State (State.Dataset), and New
// refuses to resume a State whose parts differ, naming each part that
// does: a state resumed into another dataset would deliver other batches
// with no error. Config.ResumeChanged resumes anyway, for a dataset
// changed on purpose.
type Fingerprint map[string]string

// FingerprintOf returns v's Fingerprint when v is a Fingerprinter, else
// nil.
func FingerprintOf(v any) Fingerprint {
	if f, ok := v.(Fingerprinter); ok && !isNil(v) {
		return f.Fingerprint()
	}
	return nil
}

// Nest adds inner's parts to f under prefix ("prefix.key") and returns f
// (a new one when f is nil).
func (f Fingerprint) Nest(prefix string, inner Fingerprint) Fingerprint {
	if f == nil {
		f = Fingerprint{}
	}
	for k, v := range inner {
		f[prefix+"."+k] = v
	}
	return f
}

// FingerprintHash is a short hash of values, in order, for a part that
// would be long written out (a list of files, of weights, of indices):
// 16 hex digits of their SHA-256.
func FingerprintHash(values ...string) string {
	h := sha256.New()
	for _, v := range values {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(v)))
		h.Write(n[:])
		io.WriteString(h, v)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// How much of large data FingerprintData hashes: all of it up to
// fingerprintBlocks×fingerprintBlock bytes, else that many blocks spread
// evenly over it.
const (
	fingerprintBlocks = 64
	fingerprintBlock  = 4 << 10
)

// FingerprintData returns "size:hash" of the size bytes r holds (a
// file, bytes in memory): all of them up to 256 KiB, else their size and
// 64 blocks of 4 KiB spread evenly over them, so that an identity costs
// 256 KiB of reading at most, yet two different corpora, or a file
// rewritten with other content, differ. Content rather than a
// modification time: data copied to another node (cp, rsync, a
// download) keeps its identity, so a job resumed there is not refused.
func FingerprintData(r io.ReaderAt, size int64) (string, error) {
	h := sha256.New()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(size))
	h.Write(n[:])
	if size <= fingerprintBlocks*fingerprintBlock {
		if _, err := io.Copy(h, io.NewSectionReader(r, 0, size)); err != nil {
			return "", err
		}
	} else {
		buf := make([]byte, fingerprintBlock)
		step := (size - fingerprintBlock) / (fingerprintBlocks - 1)
		for i := range int64(fingerprintBlocks) {
			if _, err := r.ReadAt(buf, i*step); err != nil && err != io.EOF {
				return "", err
			}
			h.Write(buf)
		}
	}
	return fmt.Sprintf("%d:%s", size, hex.EncodeToString(h.Sum(nil)[:8])), nil
}

// FingerprintBytes is FingerprintData of bytes in memory.
func FingerprintBytes(b []byte) string {
	s, _ := FingerprintData(bytes.NewReader(b), int64(len(b)))
	return s
}

// fingerprintInts is FingerprintHash of a list of integers.
func fingerprintInts(v []int) string {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return FingerprintHash(string(b))
}

// diff returns the parts of f that differ from was, one "key: was A, now
// B" each, sorted by key.
func (f Fingerprint) diff(was Fingerprint) []string {
	keys := slices.Sorted(maps.Keys(f))
	for k := range was {
		if _, ok := f[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		a, inA := was[k]
		b, inB := f[k]
		switch {
		case !inA:
			out = append(out, fmt.Sprintf("%s: not in the state, now %q", k, b))
		case !inB:
			out = append(out, fmt.Sprintf("%s: %q in the state, not in this dataset", k, a))
		case a != b:
			out = append(out, fmt.Sprintf("%s: %q in the state, now %q", k, a, b))
		}
	}
	return out
}

// fingerprint returns what the loader records in State.Dataset: its
// dataset's Fingerprint and its order's ("order.*").
func (l *loader) fingerprint() Fingerprint {
	f := Fingerprint{}.Nest("dataset", FingerprintOf(l.ds))
	switch c := l.cfg; {
	case c.BatchSampler != nil:
		f["order"] = "batch_sampler " + fmt.Sprintf("%T", c.BatchSampler)
		f.Nest("order", FingerprintOf(c.BatchSampler))
	case c.Sampler != nil:
		f["order"] = "sampler " + fmt.Sprintf("%T", c.Sampler)
		f.Nest("order", FingerprintOf(c.Sampler))
	case c.Shuffle:
		f["order"] = shuffledOrderName
	default:
		f["order"] = "sequential"
	}
	return f
}

// fingerprintOnce is fingerprint, with a panic of a Fingerprint method
// turned into an error.
func (l *loader) fingerprintOnce() (f Fingerprint, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("engine: the dataset's Fingerprint: %w", panicError(v))
		}
	}()
	return l.fingerprint(), nil
}

// shuffledOrderName names Shuffled's permutations in a Fingerprint: a
// change of the permutations changes it, so that a state saved under the
// old ones is refused rather than resumed into other samples.
const shuffledOrderName = "shuffled v2"

// Fingerprint: N, Seed, NumSamples and the permutations' version.
func (s Shuffled) Fingerprint() Fingerprint {
	return Fingerprint{"kind": shuffledOrderName, "n": strconv.Itoa(s.N), "seed": strconv.FormatUint(s.Seed, 10), "num_samples": strconv.Itoa(s.NumSamples)}
}

// Fingerprint: N.
func (s Sequential) Fingerprint() Fingerprint { return Fingerprint{"n": strconv.Itoa(s.N)} }

// Fingerprint: N, NumSamples and Seed.
func (s RandomWithReplacement) Fingerprint() Fingerprint {
	return Fingerprint{"n": strconv.Itoa(s.N), "num_samples": strconv.Itoa(s.NumSamples), "seed": strconv.FormatUint(s.Seed, 10)}
}

// Fingerprint: the weights (hashed), NumSamples, Replacement and Seed.
func (s WeightedRandom) Fingerprint() Fingerprint {
	w := make([]string, len(s.Weights))
	for i, x := range s.Weights {
		w[i] = strconv.FormatUint(math.Float64bits(x), 16)
	}
	return Fingerprint{"weights": FingerprintHash(strings.Join(w, ",")), "num_samples": strconv.Itoa(s.NumSamples),
		"replacement": strconv.FormatBool(s.Replacement), "seed": strconv.FormatUint(s.Seed, 10)}
}

// Fingerprint: Size, DropLast and the sampler's parts.
func (b Batched) Fingerprint() Fingerprint {
	f := Fingerprint{"size": strconv.Itoa(b.Size), "drop_last": strconv.FormatBool(b.DropLast), "sampler": fmt.Sprintf("%T", b.Sampler)}
	return f.Nest("sampler", FingerprintOf(b.Sampler))
}
