package enginetest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
)

var schema = collate.Schema{{Name: "v", DType: collate.Int64}}

// broken are datasets that break one rule each, and the subtest of the
// suite that must catch it.
var broken = map[string]struct {
	check string
	c     enginetest.Case
}{
	"unchecked index": {"InRange", enginetest.Case{New: func(testing.TB) engine.Dataset { return unchecked{} }}},
	"varies by worker": {"Workers", enginetest.Case{New: func(testing.TB) engine.Dataset {
		return engine.DatasetFunc(20, schema, func(_ context.Context, s *engine.Slot) error {
			collate.As[int64](s.Tensor("v"))[0] = int64(s.Worker())
			return nil
		})
	}}},
	"varies by instance": {"Resume", enginetest.Case{New: func(testing.TB) engine.Dataset {
		start := time.Now().UnixNano()
		return engine.DatasetFunc(20, schema, func(_ context.Context, s *engine.Slot) error {
			collate.As[int64](s.Tensor("v"))[0] = start + int64(s.Index())
			return nil
		})
	}}},
	"other not refused": {"Refuse", enginetest.Case{
		New:   func(testing.TB) engine.Dataset { return offset(0) },
		Other: func(testing.TB) engine.Dataset { return offset(1) }, // no Fingerprint tells them apart
	}},
	"leaks a goroutine": {"Leaks", enginetest.Case{New: func(testing.TB) engine.Dataset {
		return engine.DatasetFunc(20, schema, func(_ context.Context, s *engine.Slot) error {
			go func() { select {} }() // every Fill leaves one behind
			collate.As[int64](s.Tensor("v"))[0] = int64(s.Index())
			return nil
		})
	}}},
}

// unchecked fills any index it is given.
type unchecked struct{}

func (unchecked) Len() int               { return 10 }
func (unchecked) Schema() collate.Schema { return schema }
func (unchecked) Fill(_ context.Context, s *engine.Slot) error {
	collate.As[int64](s.Tensor("v"))[0] = int64(s.Index())
	return nil
}

// offset adds its value to every index.
type offset int64

func (offset) Len() int               { return 10 }
func (offset) Schema() collate.Schema { return schema }
func (o offset) Fill(_ context.Context, s *engine.Slot) error {
	if s.Index() < 0 || s.Index() >= 10 {
		return fmt.Errorf("index %d out of range", s.Index())
	}
	collate.As[int64](s.Tensor("v"))[0] = int64(s.Index()) + int64(o)
	return nil
}

// TestBroken runs the suite on the dataset $ENGINETEST_BROKEN names; it is
// run by TestSuiteCatchesBrokenDatasets in a child process, and must fail.
func TestBroken(t *testing.T) {
	name := os.Getenv("ENGINETEST_BROKEN")
	if name == "" {
		t.Skip("run by TestSuiteCatchesBrokenDatasets")
	}
	enginetest.TestDataset(t, broken[name].c)
}

// Each rule of the suite fails the dataset that breaks it, in the
// subtest that checks it, and passes a dataset that keeps them all.
func TestSuiteCatchesBrokenDatasets(t *testing.T) {
	for name, b := range broken {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestBroken$", "-test.v")
		cmd.Env = append(os.Environ(), "ENGINETEST_BROKEN="+name)
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "%s: the suite passed:\n%s", name, out)
		assert.Contains(t, string(out), "--- FAIL: TestBroken/"+b.check+" ", "%s:\n%s", name, out)
	}
	enginetest.TestDataset(t, enginetest.Case{
		New:   func(testing.TB) engine.Dataset { return engine.DatasetFunc(20, schema, fillIndex) },
		Other: func(testing.TB) engine.Dataset { return engine.DatasetFunc(21, schema, fillIndex) },
	})
}

func fillIndex(_ context.Context, s *engine.Slot) error {
	if s.Index() < 0 || s.Index() >= 20 {
		return fmt.Errorf("index %d out of range", s.Index())
	}
	collate.As[int64](s.Tensor("v"))[0] = int64(s.Index()) * int64(s.Rand().IntN(100))
	return nil
}
