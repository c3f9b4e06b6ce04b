package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
)

// snake is a Go field name in snake_case: MaxPinnedBytes → max_pinned_bytes.
func snake(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// logConfig returns cfg as logged by slog's JSON handler.
func logConfig(t *testing.T, cfg engine.Config) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("loader", "config", cfg)
	var line struct{ Config map[string]any }
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), buf.String())
	return line.Config
}

// Every field of Config is logged under its snake_case name, set or not: a
// field added to Config without a line in LogValue fails here.
func TestConfigLogValueCoversEveryField(t *testing.T) {
	t.Parallel()
	full := engine.Config{
		BatchSize: 4, Shuffle: true, Seed: 7, DropLast: true, DropUneven: true,
		Workers: 3, PrefetchFactor: 5, RestartWorkers: true, Timeout: time.Second,
		WorkerInit: engine.WorkerInitFunc(func(context.Context, int) error { return nil }),
		OutOfOrder: true, OnError: engine.ErrorPolicy{Skip: 2, Retries: 1},
		Resume: &engine.State{Kind: engine.KindMap, Epoch: 2, Position: 8, Batches: 2, Done: []int{4}}, ResumeChanged: true,
		LogEvery: 10, Sampler: engine.WeightedRandom{Weights: []float64{1, 2}, NumSamples: 2},
		BatchSampler: engine.Batched{Sampler: engine.Sequential{N: 2}, Size: 1}, SkipZeroing: true,
		MaxPinnedBytes: 1 << 20, Rank: 1, WorldSize: 2, WriteCombined: true, Stream: 0x10, CheckReleased: true, Backend: "cpu",
	}
	fields := reflect.VisibleFields(reflect.TypeFor[engine.Config]())
	v := reflect.ValueOf(full)
	for _, f := range fields {
		require.False(t, v.FieldByIndex(f.Index).IsZero(), "the test's full Config leaves %s unset: set it", f.Name)
	}
	for name, cfg := range map[string]engine.Config{"zero": {}, "full": full} {
		logged := logConfig(t, cfg)
		for _, f := range fields {
			_, ok := logged[snake(f.Name)]
			assert.True(t, ok, "%s Config: field %s is not logged as %q: %v", name, f.Name, snake(f.Name), logged)
		}
	}

	logged := logConfig(t, full)
	assert.Equal(t, "engine.WeightedRandom", logged["sampler"])
	assert.Equal(t, "engine.WorkerInitFunc", logged["worker_init"])
	assert.Equal(t, "0x10", logged["stream"])
	assert.Equal(t, map[string]any{"source": "map", "epoch": 2.0, "position": 8.0, "batches": 2.0, "done": 1.0}, logged["resume"])
	assert.Equal(t, 15.0, logged["window"], "Workers × PrefetchFactor")
	zero := logConfig(t, engine.Config{})
	assert.Nil(t, zero["sampler"])
	assert.Nil(t, zero["resume"])
}

// Config is not comparable in general, and the engine never compares
// Configs: a Config whose Sampler holds a slice makes == panic, yet the
// loader takes it, runs it, reports it and logs it.
func TestConfigIsNotComparable(t *testing.T) {
	cfg := engine.Config{BatchSize: 2, Sampler: engine.WeightedRandom{Weights: []float64{1, 1, 1, 1}, NumSamples: 4, Seed: 1}}
	other := cfg
	assert.Panics(t, func() { _ = cfg == other }, "== on a Config with a WeightedRandom panics: the documented reason not to compare Configs")

	var logs bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })

	l, err := engine.New(engine.DatasetFunc(4, indexSchema, fillIndex), cfg)
	require.NoError(t, err)
	defer l.Close()
	assert.Equal(t, cfg.Sampler, l.Config().Sampler)
	got, _ := collect(t, l, 0)
	assert.Len(t, got, 2)
	st := l.State()
	l2, err := engine.New(engine.DatasetFunc(4, indexSchema, fillIndex), engine.Config{BatchSize: 2, Sampler: cfg.Sampler, Resume: &st})
	require.NoError(t, err)
	require.NoError(t, l2.Close())
	assert.Contains(t, logs.String(), "config.sampler=engine.WeightedRandom")
}
