package engine

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/tensorbatch/tensorbatch/collate"
)

// State is a loader's position in its epochs: what the next batch is built
// from, bit for bit. It marshals to JSON. Take it with Loader.State after
// a batch (it says "right after the last batch delivered"), save it with
// the checkpoint, and hand it to a new Loader as Config.Resume.
//
// Position counts the epoch's global order, before it is split across
// ranks: samples, or whole batches with a BatchSampler. Every rank of a
// job delivers the same number of batches, so ranks that save their State
// at the same step save the same Position; a job resumed with another
// world size splits the rest of the order over its ranks (a map-style
// dataset: nothing repeated or lost beyond the usual padding). The State
// does not depend on Workers or PrefetchFactor.
//
// A State resumes with another BatchSize (or, for a map-style dataset,
// another world size): Position counts samples, not batches, so the epoch
// goes on at the same sample of its order, in batches of the new size,
// nothing repeated or lost; the first batch's IndexInEpoch is then
// Position ÷ (BatchSize × WorldSize), rounded down
// (TestResumeWithAnotherBatchSize). An out-of-order state (Done) resumes
// only with its own BatchSize and WorldSize.
//
// New refuses, naming the field, every State that does not fit the
// loader: another Kind, dataset, length, schema or seed; a negative
// field; a Position at or past the end of its epoch's order (a State taken
// after an epoch's last batch names the next epoch, at Position 0); a Done
// list that is not increasing, repeats a batch, or names a batch outside
// the rest of the epoch. Resuming costs time linear in the epoch's length
// and the Done list.
type State struct {
	// Kind is the kind of dataset the state was saved from, KindMap or
	// KindIterable: the two count positions differently, so a state of
	// one never resumes the other. (States saved before it existed lack
	// it; they resume the dataset they are given, as they did then. States
	// saved while it was named Source, JSON "source", read as Kind.)
	Kind string `json:"kind"`

	Epoch    int `json:"epoch"`
	Position int `json:"position"` // units of the epoch's global order consumed by all ranks
	// Batches is the number of batches this rank delivered in the epoch,
	// in order; with OutOfOrder, Done lists the ones delivered after them.
	Batches int   `json:"batches"`
	Done    []int `json:"done,omitempty"`
	// Skipped is the samples skipped (Config.OnError) in the epoch's
	// batches delivered before the state: a resumed epoch charges the
	// epoch's budget from there, as the uninterrupted one would have. It
	// is kept with WorldSize 1 only: the ranks of a job save the same
	// state, and each rank's budget is its own, so a resumed rank starts
	// its count again (its budget still the whole epoch's).
	Skipped int `json:"skipped,omitempty"`

	// What the position is valid for; New refuses a State that does not
	// match, naming the field.
	Seed      uint64 `json:"seed"`
	Len       int    `json:"len"`
	Schema    string `json:"schema"`
	BatchSize int    `json:"batch_size"`
	WorldSize int    `json:"world_size"`
	// Dataset is the fingerprint of the dataset and its order (see
	// Fingerprint): New refuses a state whose parts differ from the
	// loader's, naming them, unless Config.ResumeChanged. States saved
	// before it existed lack it; they resume unchecked, as before.
	Dataset Fingerprint `json:"dataset,omitempty"`
}

// UnmarshalJSON reads a State, and the "source" of states saved when Kind
// was named Source.
func (st *State) UnmarshalJSON(data []byte) error {
	type plain State
	var v struct {
		plain
		Source string `json:"source"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*st = State(v.plain)
	if st.Kind == "" {
		st.Kind = v.Source
	}
	return nil
}

// State.Kind values.
const (
	KindMap      = "map"      // a map-style Dataset: Position counts the epoch's global order
	KindIterable = "iterable" // an IterableDataset: Position counts this rank's own samples
)

// fingerprint is a schema's State.Schema.
func fingerprint(s collate.Schema) string {
	parts := make([]string, len(s))
	for i, f := range s {
		parts[i] = f.String()
		if f.IsDynamic() {
			parts[i] += fmt.Sprintf(" maxlen=%d pad=%v", f.MaxLen, f.Pad)
		}
	}
	return strings.Join(parts, "; ")
}

// kind returns the loader's State.Kind.
func (l *loader) kind() string {
	kind, _ := l.access.position(l.cfg, l.rank)
	return kind
}

// unit returns the units of the epoch's order one batch of this rank
// consumes: BatchSize×WorldSize samples of the global order, WorldSize
// batches with a BatchSampler, or BatchSize of the rank's own samples of
// an IterableDataset (see the accesses' position).
func (l *loader) unit() int {
	_, unit := l.access.position(l.cfg, l.rank)
	return unit
}

// epochUnits returns the length of epoch's order in the units Position
// counts: samples of the global order, batches of a BatchSampler, or the
// rank's own samples of an IterableDataset (see the accesses' units).
func (l *loader) epochUnits(epoch, n int) (units int, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the sampler of epoch %d: %w", epoch, panicError(v))
		}
	}()
	return l.access.units(l.cfg, l.rank, epoch, n), nil
}

// checkResume checks st against the loader's dataset and config. It takes
// time linear in the epoch and in st.Done.
func (l *loader) checkResume(st *State, n int) error {
	bad := func(field, format string, args ...any) error {
		return configError("Resume", "%s: %s", field, fmt.Sprintf(format, args...))
	}
	switch schema, kind := fingerprint(l.ds.Schema()), l.kind(); {
	case st.Kind != "" && st.Kind != KindMap && st.Kind != KindIterable:
		return bad("Kind", "%q, want %q or %q", st.Kind, KindMap, KindIterable)
	case st.Kind != "" && st.Kind != kind:
		return bad("Kind", "the state was saved from a %q dataset, this one is a %q dataset: its position would repeat or lose samples", st.Kind, kind)
	case st.Len != n:
		return bad("Len", "the state is of a dataset of %d samples, this one has %d", st.Len, n)
	case st.Schema != schema:
		return bad("Schema", "the state is of a dataset of schema %q, this one is %q", st.Schema, schema)
	case st.Seed != l.cfg.Seed:
		return bad("Seed", "the state was saved with Seed %d, this loader has %d", st.Seed, l.cfg.Seed)
	case st.Epoch < 0:
		return bad("Epoch", "%d, want >= 0", st.Epoch)
	case st.Position < 0:
		return bad("Position", "%d, want >= 0", st.Position)
	case st.Batches < 0:
		return bad("Batches", "%d, want >= 0", st.Batches)
	case st.Skipped < 0 || st.Skipped > n:
		return bad("Skipped", "%d, want 0 to the dataset's %d samples", st.Skipped, n)
	case st.BatchSize < 1:
		return bad("BatchSize", "%d, want > 0", st.BatchSize)
	case st.WorldSize < 1:
		return bad("WorldSize", "%d, want > 0", st.WorldSize)
	case len(st.Done) > 0 && (st.WorldSize != l.rank.WorldSize || st.BatchSize != l.cfg.BatchSize):
		return bad("Done", "an out-of-order state resumes only with its WorldSize (%d) and BatchSize (%d)", st.WorldSize, st.BatchSize)
	}
	if err := l.checkDataset(st, n); err != nil {
		return err
	}
	units, err := l.epochUnits(st.Epoch, n)
	if err != nil {
		return bad("Epoch", "%v", err)
	}
	if st.Position > 0 && st.Position >= units {
		return bad("Position", "%d is at or past the end of epoch %d, whose order has %d (a state taken after an epoch's last batch names the next epoch, at position 0)", st.Position, st.Epoch, units)
	}
	if len(st.Done) == 0 {
		return nil
	}
	batches, err := l.epochBatches(st.Epoch, st.Position)
	if err != nil {
		return bad("Epoch", "%v", err)
	}
	first := st.Position / l.unit() // the first batch not delivered
	end := first + batches.count()
	for i, k := range st.Done {
		switch {
		case k <= first || k >= end:
			return bad("Done", "entry %d is batch %d, want one after the first batch not delivered (%d) and before the end of the epoch (%d)", i, k, first, end)
		case i > 0 && k <= st.Done[i-1]:
			return bad("Done", "entry %d is batch %d after batch %d: want increasing batch numbers, each once", i, k, st.Done[i-1])
		}
	}
	return nil
}

// checkDataset refuses a state whose Dataset fingerprint differs from the
// loader's, unless Config.ResumeChanged, which logs the differences.
// A state saved before fingerprints existed resumes unchecked, with a
// warning, but for a position in a shuffled order of at most
// smallShuffle samples, whose permutations changed since
// (TestShuffledIsUniform).
func (l *loader) checkDataset(st *State, n int) error {
	if st.Dataset == nil {
		if (st.Position > 0 || len(st.Done) > 0) && l.smallShuffle(n) {
			return configError("Resume", "Dataset: the state has no dataset fingerprint, so it was saved before the shuffled orders of at most %d samples changed (to uniform permutations): its position would name other samples of this %d-sample dataset; resume from the start of epoch %d (Position 0)", smallShuffle, n, st.Epoch)
		}
		slog.Warn("engine: Config.Resume has no dataset fingerprint (saved before they existed, or edited): resuming without checking that it is the same dataset", "epoch", st.Epoch, "position", st.Position)
		return nil
	}
	diff := l.fp.diff(st.Dataset)
	switch {
	case len(diff) == 0:
		return nil
	case l.cfg.ResumeChanged:
		l.logger.Warn("tensorbatch: resuming a state saved from another dataset or order (Config.ResumeChanged)", "differences", diff)
		return nil
	}
	shown := diff[:min(len(diff), 5)]
	more := ""
	if len(diff) > len(shown) {
		more = fmt.Sprintf("; and %d more", len(diff)-len(shown))
	}
	return configError("Resume", "Dataset: the state was saved from another dataset or order, and would resume into other batches: %s%s (Config.ResumeChanged resumes anyway)", strings.Join(shown, "; "), more)
}

// smallShuffle reports whether the loader's order is a shuffle of at most
// smallShuffle samples, whose permutations changed with fingerprints.
func (l *loader) smallShuffle(n int) bool {
	if s, ok := l.cfg.Sampler.(Shuffled); ok {
		return s.N <= smallShuffle
	}
	return l.cfg.Shuffle && l.cfg.Sampler == nil && l.cfg.BatchSampler == nil && n <= smallShuffle && l.kind() == KindMap
}

// position is where the loader stands: the epoch in progress (or last
// run), the global units consumed before the epoch's first batch on this
// run (nonzero after a resume), and the batches delivered since. It takes
// memory for the batches delivered out of order only, not for the epoch.
type position struct {
	epoch   int
	base    int          // global units consumed before this run's first batch
	offset  int          // batch number of this run's first batch
	unit    int          // global units a delivered batch consumes: BatchSize×WorldSize, or WorldSize
	prefix  int          // the batches from offset delivered in a row
	skipped int          // samples skipped in the batches delivered, the resumed state's included
	ahead   map[int]bool // the batches delivered after prefix, by number from offset
	batches int          // batches in the epoch on this run
	ran     bool
}

// deliver records batch number k as delivered.
func (p *position) deliver(k int) {
	if i := k - p.offset; i != p.prefix {
		if p.ahead == nil {
			p.ahead = map[int]bool{}
		}
		p.ahead[i] = true
		return
	}
	p.prefix++
	for p.ahead[p.prefix] {
		delete(p.ahead, p.prefix)
		p.prefix++
	}
}

// State returns the loader's position after the last batch delivered: a
// new Loader with it as Config.Resume continues right after that batch.
// After an epoch's last batch it is the start of the next epoch.
func (l *loader) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, _ := datasetLen(l.ds)
	st := State{Kind: l.kind(), Seed: l.cfg.Seed, Len: n, Schema: fingerprint(l.ds.Schema()), BatchSize: l.cfg.BatchSize, WorldSize: l.rank.WorldSize,
		Dataset: maps.Clone(l.fp)}
	p := &l.pos
	switch {
	case !p.ran:
		if r := l.cfg.Resume; r != nil { // not started yet: still where the saved state was
			st.Epoch, st.Position, st.Batches, st.Done, st.Skipped = r.Epoch, r.Position, r.Batches, slices.Clone(r.Done), r.Skipped
		}
		return st
	case p.prefix == p.batches:
		st.Epoch = p.epoch + 1
		return st
	}
	st.Epoch = p.epoch
	st.Batches = p.offset + p.prefix
	if l.rank.WorldSize == 1 {
		st.Skipped = p.skipped
	}
	st.Position = p.base + p.prefix*p.unit
	for i := range p.ahead {
		st.Done = append(st.Done, p.offset+i)
	}
	slices.Sort(st.Done)
	return st
}
