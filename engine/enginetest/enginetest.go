// Package enginetest provides a conformance suite for datasets, as
// testing/fstest does for file systems: TestDataset runs one battery of
// checks against any engine.Dataset, and a dataset is correct when it
// passes, not when its author's examples do. Every dataset the project
// ships runs it, and so can yours. NewSlot runs one Fill outside a
// Loader.
//
//	func TestMyDataset(t *testing.T) {
//		enginetest.TestDataset(t, enginetest.Case{
//			New:   func(t testing.TB) engine.Dataset { return newMyDataset(t, "corpus-a", 7) },
//			Other: func(t testing.TB) engine.Dataset { return newMyDataset(t, "corpus-a", 8) },
//		})
//	}
package enginetest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// NewSlot returns a standalone slot: sample index of epoch under seed, at
// position pos of buf, which is laid out by layout (engine.NewLayout: the
// schema's fields and the lengths of its Dynamic ones). It is how a Fill
// is tested or run outside a Loader, as httptest.NewRequest is a
// handler's request; the sample's RNG (Slot.Rand) is the one a Loader
// would give it.
func NewSlot(seed uint64, epoch, index int, layout *collate.Layout, buf []byte, pos int) *engine.Slot {
	return engine.NewSlot(seed, epoch, index, layout, buf, pos)
}

// Case is a dataset for TestDataset.
type Case struct {
	// New returns a new instance of the dataset. The suite calls it more
	// than once: every instance must deliver the same samples, as the
	// dataset made again by a resumed job would. A dataset that holds
	// resources (an io.Closer) is closed by the suite.
	New func(t testing.TB) engine.Dataset
	// Other returns the dataset configured otherwise (another seed, file,
	// weight, order...) but with the same Len and Schema where it can: a
	// State saved by a loader of New's must be refused by New for a loader
	// of Other's. Nil skips that check, saying so.
	Other func(t testing.TB) engine.Dataset
	// Config is the loaders' configuration; the suite sets Workers,
	// PrefetchFactor and Resume. Its zero value means BatchSize 4, with
	// Shuffle for a map-style dataset.
	Config engine.Config
	// Epochs is the epochs each run loads; 0 means 2.
	Epochs int
}

// TestDataset runs the conformance suite on c's dataset, each check a
// subtest:
//
//   - InRange: every batch's indices are in [0, Len), and a Fill of index
//     -1 or Len (for a map-style dataset) fails, by error or panic,
//     instead of reading out of bounds;
//   - Workers: the same batches, bit for bit, for Workers 0, 1 and 3;
//   - Resume: a State taken at random cuts, through JSON, resumes into the
//     same batches as the uninterrupted run, with other Workers;
//   - Refuse: a State of New's dataset is refused by a loader of Other's,
//     for its fingerprint when the two have the same Len and Schema;
//   - Leaks: an epoch cancelled or left early, and Close, leave no
//     goroutine and no pinned buffer behind.
func TestDataset(t *testing.T, c Case) {
	t.Helper()
	if c.New == nil {
		t.Fatal("enginetest: Case.New is nil")
	}
	ds := open(t, c.New)
	_, iterable := ds.(*engine.IterableDataset)
	cfg := c.Config
	if cfg.BatchSize == 0 && cfg.BatchSampler == nil {
		cfg.BatchSize = 4
		cfg.Shuffle = cfg.Sampler == nil && !iterable
	}
	epochs := c.Epochs
	if epochs == 0 {
		epochs = 2
	}
	s := &suite{c: c, cfg: cfg, epochs: epochs}
	want := s.run(t, ds, engine.Config{}, -1)
	if len(want) == 0 {
		t.Fatalf("enginetest: %T delivers no batch in %d epochs: give the suite a dataset with samples", ds, epochs)
	}
	t.Run("InRange", func(t *testing.T) { s.inRange(t, ds, iterable, want) })
	t.Run("Workers", func(t *testing.T) { s.workers(t, want) })
	t.Run("Resume", func(t *testing.T) { s.resume(t, want) })
	t.Run("Refuse", func(t *testing.T) { s.refuse(t) })
	t.Run("Leaks", func(t *testing.T) { s.leaks(t) })
}

type suite struct {
	c      Case
	cfg    engine.Config
	epochs int
}

// step is a delivered batch: where it is, its indices and a hash of its
// fields' bytes.
type step struct {
	epoch, number int
	indices       []int
	sum           [32]byte
}

func (s step) String() string {
	return fmt.Sprintf("epoch %d batch %d indices %v bytes %x", s.epoch, s.number, s.indices, s.sum[:6])
}

// open calls New and closes what it returns at the test's end.
func open(t testing.TB, fn func(testing.TB) engine.Dataset) engine.Dataset {
	t.Helper()
	ds := fn(t)
	if ds == nil {
		t.Fatal("enginetest: the Case returned a nil Dataset")
	}
	if c, ok := ds.(io.Closer); ok {
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Errorf("enginetest: closing %T: %v", ds, err)
			}
		})
	}
	return ds
}

// loader returns a loader of ds with the suite's Config and over's
// Workers, PrefetchFactor and Resume, closed at the test's end.
func (s *suite) loader(t testing.TB, ds engine.Dataset, over engine.Config) *engine.Loader {
	t.Helper()
	cfg := s.cfg
	cfg.Workers, cfg.PrefetchFactor, cfg.Resume = over.Workers, over.PrefetchFactor, over.Resume
	l, err := engine.New(ds, cfg)
	if err != nil {
		t.Fatalf("enginetest: engine.New(%T): %v", ds, err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("enginetest: Close: %v", err)
		}
	})
	return l
}

// run loads epochs from..s.epochs-1 (from Resume.Epoch when resuming) and
// returns their batches, stopping after cut batches (cut < 0: never).
func (s *suite) run(t testing.TB, ds engine.Dataset, over engine.Config, cut int) []step {
	t.Helper()
	steps, _ := s.runState(t, ds, over, cut)
	return steps
}

// runState is run, with the State taken in the body of the last batch.
func (s *suite) runState(t testing.TB, ds engine.Dataset, over engine.Config, cut int) ([]step, engine.State) {
	t.Helper()
	l := s.loader(t, ds, over)
	from := 0
	if over.Resume != nil {
		from = over.Resume.Epoch
	}
	var steps []step
	var st engine.State
	schema := ds.Schema()
	for e := from; e < s.epochs; e++ {
		for b, err := range l.Epoch(context.Background(), e) {
			if err != nil {
				t.Fatalf("enginetest: epoch %d after %d batches: %v", e, len(steps), err)
			}
			h := sha256.New()
			for _, f := range schema {
				h.Write(b.Tensor(f.Name).Bytes())
			}
			one := step{epoch: b.Epoch(), number: b.IndexInEpoch(), indices: b.Indices()}
			h.Sum(one.sum[:0])
			steps = append(steps, one)
			st = l.State()
			if len(steps) == cut {
				return steps, st
			}
		}
	}
	return steps, st
}

func (s *suite) inRange(t *testing.T, ds engine.Dataset, iterable bool, steps []step) {
	n := ds.Len()
	for _, st := range steps {
		for _, i := range st.indices {
			if i < 0 || i >= n {
				t.Fatalf("%v: index %d out of [0, %d)", st, i, n)
			}
		}
	}
	if iterable { // its Fill takes records of the loader's epoch, by id
		return
	}
	layout, err := engine.NewLayout(ds.Schema(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{-1, n, n + 1} {
		slot := NewSlot(s.cfg.Seed, 0, i, layout, make([]byte, layout.Size()), 0)
		if err, panicked := fill(ds, slot); err == nil && !panicked {
			t.Errorf("Fill of index %d (Len %d) succeeded: want an error", i, n)
		}
	}
}

// fill runs ds.Fill, turning a panic into panicked.
func fill(ds engine.Dataset, s *engine.Slot) (err error, panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			panicked = true
		}
	}()
	return ds.Fill(context.Background(), s), false
}

func (s *suite) workers(t *testing.T, want []step) {
	for _, w := range []int{0, 1, 3} {
		got := s.run(t, open(t, s.c.New), engine.Config{Workers: w, PrefetchFactor: 1 + w%2}, -1)
		if !slices.EqualFunc(got, want, equal) {
			t.Errorf("Workers %d: %s", w, firstDiff(got, want))
		}
	}
}

func equal(a, b step) bool {
	return a.epoch == b.epoch && a.number == b.number && a.sum == b.sum && slices.Equal(a.indices, b.indices)
}

// firstDiff describes where got and want part.
func firstDiff(got, want []step) string {
	for i := range min(len(got), len(want)) {
		if !equal(got[i], want[i]) {
			return fmt.Sprintf("batch %d is %v, want %v", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("%d batches, want %d", len(got), len(want))
}

func (s *suite) resume(t *testing.T, want []step) {
	r := rand.New(rand.NewPCG(uint64(len(want)), 7))
	cuts := []int{1, len(want) / 2, len(want) - 1}
	for range 3 {
		cuts = append(cuts, 1+r.IntN(len(want)))
	}
	for _, cut := range cuts {
		head, st := s.runState(t, open(t, s.c.New), engine.Config{Workers: 2}, cut)
		data, err := json.Marshal(st)
		if err != nil {
			t.Fatalf("State to JSON: %v", err)
		}
		var back engine.State
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("State from JSON: %v", err)
		}
		tail := s.run(t, open(t, s.c.New), engine.Config{Workers: 1, Resume: &back}, -1)
		if got := append(head, tail...); !slices.EqualFunc(got, want, equal) {
			t.Errorf("resumed after %d batches (State %s): %s", cut, data, firstDiff(got, want))
		}
	}
}

func (s *suite) refuse(t *testing.T) {
	if s.c.Other == nil {
		t.Skip("Case.Other is nil: no differently configured dataset to refuse a State for")
	}
	ds := open(t, s.c.New)
	_, st := s.runState(t, ds, engine.Config{}, 1)
	other := open(t, s.c.Other)
	cfg := s.cfg
	cfg.Resume = &st
	l, err := engine.New(other, cfg)
	if err == nil {
		l.Close()
		t.Fatalf("a State of %T resumed on the Other dataset: want an error naming Config.Resume; the fingerprints are %v and %v", other, st.Dataset, engine.FingerprintOf(other))
	}
	// With the same Len and Schema, only the fingerprint tells them apart.
	if other.Len() == ds.Len() && slices.EqualFunc(other.Schema(), ds.Schema(), func(a, b collate.Field) bool { return a.String() == b.String() }) &&
		!strings.Contains(err.Error(), "Config.Resume: Dataset") {
		t.Fatalf("refused, but not for its fingerprint (want an error naming Config.Resume: Dataset): %v", err)
	}
	t.Logf("refused: %v", err)
}

func (s *suite) leaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	ds := s.c.New(t)
	for _, w := range []int{0, 2} {
		cfg := s.cfg
		cfg.Workers = w
		l, err := engine.New(ds, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		for _, err := range l.Epoch(ctx, 0) { // cancelled after the first batch
			cancel()
			if err != nil {
				break
			}
		}
		cancel()
		for range l.Epoch(context.Background(), 1) { // left early
			break
		}
		if err := l.Close(); err != nil {
			t.Errorf("Workers %d: Close: %v", w, err)
		}
		if st := l.Stats().Pool; st.InUse != 0 || st.Allocated != 0 {
			t.Errorf("Workers %d: after Close the pool holds %d bytes, %d in use", w, st.Allocated, st.InUse)
		}
	}
	if c, ok := ds.(io.Closer); ok {
		if err := c.Close(); err != nil {
			t.Errorf("closing %T: %v", ds, err)
		}
	}
	goleak.VerifyNone(t, ignore)
}
