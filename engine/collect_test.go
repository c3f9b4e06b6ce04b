package engine_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tensorbatch/tensorbatch/engine"
)

// collectUntil runs the garbage collector until cond holds, or 10 s.
func collectUntil(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if cond() {
			return true
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}

func TestDroppedLoadersAreClosedByTheCollector(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	logs := captureLog(t)
	const loaders = 20
	func() { // the loaders are unreachable once it returns
		ds := engine.DatasetFunc(40, indexSchema, fillIndex)
		var held []*engine.Loader // reachable until the check below: a GC in the loop must not close them yet
		for i := range loaders {
			cfg := engine.Config{BatchSize: 4, Workers: 2, Shuffle: true}
			if i%4 == 3 {
				cfg.Workers = 0
			}
			l, err := engine.New(ds, cfg)
			require.NoError(t, err)
			held = append(held, l)
			switch i % 3 {
			case 0: // never iterated
			case 1: // dropped after one batch
				for b, err := range l.Epoch(context.Background(), 0) {
					require.NoError(t, err)
					require.Equal(t, 4, b.Len())
					break
				}
			case 2: // a whole epoch
				numbers, err := untilError(l, 0)
				require.NoError(t, err)
				require.Len(t, numbers, 10)
			}
		}
		assert.Positive(t, workerGoroutines())
		runtime.KeepAlive(held)
	}()
	assert.True(t, collectUntil(func() bool {
		return workerGoroutines() == 0 && strings.Count(logs.String(), "garbage-collected without Close") == loaders
	}), "%d worker goroutines left; log:\n%s", workerGoroutines(), logs.String())
	goleak.VerifyNone(t, ignore)
	assert.Equal(t, loaders, strings.Count(logs.String(), "level=WARN msg=\"tensorbatch: a Loader was garbage-collected without Close"))
}

func TestClosedLoadersAreNotWarnedAbout(t *testing.T) {
	logs := captureLog(t)
	func() {
		for range 5 {
			l, err := engine.New(engine.DatasetFunc(8, indexSchema, fillIndex), engine.Config{BatchSize: 4, Workers: 2})
			require.NoError(t, err)
			_, err = untilError(l, 0)
			require.NoError(t, err)
			require.NoError(t, l.Close())
		}
	}()
	for range 5 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	assert.NotContains(t, logs.String(), "garbage-collected")
}
