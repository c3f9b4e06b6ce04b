package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestTunerAddsWorkersBeforePrefetch(t *testing.T) {
	t.Parallel()
	tu := newTuner(Config{Workers: 3, PrefetchFactor: DefaultPrefetchFactor}, true, true)
	tu.epoch()
	tu.observe(time.Second) // the epoch's first batch: not measured
	var got [][2]int
	for range 40 {
		if !tu.start.IsZero() {
			tu.start = tu.start.Add(-100 * time.Millisecond) // 100 ms pass, all of them waited
		}
		if tu.observe(100 * time.Millisecond) {
			got = append(got, [2]int{tu.active, tu.pf})
		}
	}
	assert.Equal(t, [][2]int{{2, 1}, {3, 1}, {3, 2}}, got, "(workers, prefetch) after each change")
}
