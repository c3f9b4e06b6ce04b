package engine

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tensorbatch/tensorbatch/internal/ident"
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
// would be long written out (a list of files, of weights, of indices).
func FingerprintHash(values ...string) string { return ident.Of(values...) }

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
