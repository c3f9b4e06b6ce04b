package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// logWriter sends the soak's violations to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestSoak runs the soak for a few seconds with a fixed seed (make soak
// explores new seeds) and fails on any violated invariant or leak.
func TestSoak(t *testing.T) {
	d := 5 * time.Second
	if race || testing.Short() {
		d = 2 * time.Second
	}
	rep := run(options{duration: d, seed: 7, cuda: true, log: logWriter{t}})
	var table strings.Builder
	rep.print(&table)
	t.Log("\n" + table.String())
	require.NoError(t, rep.err())
	assert.Positive(t, rep.loaders)
	assert.Positive(t, rep.batches)
	assert.Zero(t, rep.stuckLeft)
	assert.LessOrEqual(t, rep.goroutinesEnd, rep.goroutinesStart+goroutineSlack)
	injected, reported := 0, 0
	for k := fillError; k < nKinds; k++ {
		injected += rep.injected[k]
		reported += rep.reported[k]
	}
	assert.Positive(t, injected, "faults injected")
	assert.Positive(t, reported, "faults reported")
}

// TestSoakCatchesAWrongBatch checks the checks: a batch the consumer
// scribbles on must count as a violation and fail the run.
func TestSoakCatchesAWrongBatch(t *testing.T) {
	rep := run(options{duration: 100 * time.Millisecond, seed: 1, corrupt: true})
	assert.Positive(t, rep.violations)
	assert.ErrorContains(t, rep.err(), "holds other data")
}
