// Package filltest checks, for tests, that a dataset which says it
// writes every byte of a sample (engine.FullWriter) does.
package filltest

import (
	"bytes"
	"context"
	"fmt"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
)

// EveryByte fills sample index of ds (epoch, seed as a loader's) twice,
// over zeros and over 0xA5 bytes, and returns an error unless ds says it
// writes every byte and every field came out the same both times.
func EveryByte(ds engine.Dataset, seed uint64, epoch, index int) error {
	if f, ok := ds.(engine.FullWriter); !ok || !f.WritesEveryByte() {
		return fmt.Errorf("%T does not say it writes every byte", ds)
	}
	layout, err := collate.NewLayout(ds.Schema(), 1)
	if err != nil {
		return err
	}
	var got [2]*engine.Slot
	for k, fill := range []byte{0, 0xA5} {
		got[k] = enginetest.NewSlot(seed, epoch, index, layout, bytes.Repeat([]byte{fill}, layout.Size()), 0)
		if err := ds.Fill(context.Background(), got[k]); err != nil {
			return fmt.Errorf("sample %d: %w", index, err)
		}
	}
	for f, field := range ds.Schema() {
		if a, b := got[0].TensorAt(f).Bytes(), got[1].TensorAt(f).Bytes(); !bytes.Equal(a, b) {
			at := 0
			for a[at] == b[at] {
				at++
			}
			return fmt.Errorf("sample %d, field %q: byte %d is %#02x over zeros, %#02x over 0xa5: not written", index, field.Name, at, a[at], b[at])
		}
	}
	return nil
}
