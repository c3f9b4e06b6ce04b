package engine

import (
	"fmt"
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
type State struct {
	Epoch    int `json:"epoch"`
	Position int `json:"position"` // units of the epoch's global order consumed by all ranks
	// Batches is the number of batches this rank delivered in the epoch,
	// in order; with OutOfOrder, Done lists the ones delivered after them.
	Batches int   `json:"batches"`
	Done    []int `json:"done,omitempty"`

	// What the position is valid for; New refuses a State that does not
	// match, naming the field.
	Seed      uint64 `json:"seed"`
	Len       int    `json:"len"`
	Schema    string `json:"schema"`
	BatchSize int    `json:"batch_size"`
	WorldSize int    `json:"world_size"`
}

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

// checkResume checks st against the loader's dataset and config.
func (l *Loader) checkResume(st *State, n int) error {
	bad := func(field, format string, args ...any) error {
		return configError("Resume", "%s: %s", field, fmt.Sprintf(format, args...))
	}
	switch schema := fingerprint(l.ds.Schema()); {
	case st.Len != n:
		return bad("Len", "the state is of a dataset of %d samples, this one has %d", st.Len, n)
	case st.Schema != schema:
		return bad("Schema", "the state is of a dataset of schema %q, this one is %q", st.Schema, schema)
	case st.Seed != l.cfg.Seed:
		return bad("Seed", "the state was saved with Seed %d, this loader has %d", st.Seed, l.cfg.Seed)
	case st.Epoch < 0 || st.Position < 0 || st.Batches < 0:
		return bad("Epoch", "epoch %d, position %d, batches %d: want >= 0", st.Epoch, st.Position, st.Batches)
	case len(st.Done) > 0 && (st.WorldSize != l.shard.WorldSize || st.BatchSize != l.cfg.BatchSize):
		return bad("Done", "an out-of-order state resumes only with its WorldSize (%d) and BatchSize (%d)", st.WorldSize, st.BatchSize)
	}
	return nil
}

// position is where the loader stands: the epoch in progress (or last
// run), the global units consumed before the epoch's first batch on this
// run (nonzero after a resume), and the batches delivered since.
type position struct {
	epoch     int
	base      int    // global units consumed before this run's first batch
	offset    int    // batch number of this run's first batch
	unit      int    // global units a delivered batch consumes: BatchSize×WorldSize, or WorldSize
	delivered []bool // by batch number from offset
	prefix    int    // delivered[:prefix] are all true
	batches   int    // batches in the epoch on this run
	ran       bool
}

// deliver records batch number k as delivered.
func (p *position) deliver(k int) {
	p.delivered[k-p.offset] = true
	for p.prefix < len(p.delivered) && p.delivered[p.prefix] {
		p.prefix++
	}
}

// State returns the loader's position after the last batch delivered: a
// new Loader with it as Config.Resume continues right after that batch.
// After an epoch's last batch it is the start of the next epoch.
func (l *Loader) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, _ := datasetLen(l.ds)
	st := State{Seed: l.cfg.Seed, Len: n, Schema: fingerprint(l.ds.Schema()), BatchSize: l.cfg.BatchSize, WorldSize: l.shard.WorldSize}
	p := &l.pos
	switch {
	case !p.ran:
		if r := l.cfg.Resume; r != nil { // not started yet: still where the saved state was
			st.Epoch, st.Position, st.Batches, st.Done = r.Epoch, r.Position, r.Batches, slices.Clone(r.Done)
		}
		return st
	case p.prefix == len(p.delivered):
		st.Epoch = p.epoch + 1
		return st
	}
	st.Epoch = p.epoch
	st.Batches = p.offset + p.prefix
	st.Position = p.base + p.prefix*p.unit
	for i := p.prefix; i < len(p.delivered); i++ {
		if p.delivered[i] {
			st.Done = append(st.Done, p.offset+i)
		}
	}
	return st
}
