package filltest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// partial writes x but its last byte; it says it writes every byte when full.
type partial struct{ full bool }

func (partial) Len() int { return 4 }
func (partial) Schema() collate.Schema {
	return collate.Schema{{Name: "x", DType: collate.Uint8, Shape: []int{8}}}
}
func (p partial) WritesEveryByte() bool { return p.full }
func (partial) Fill(_ context.Context, s *engine.Slot) error {
	x := s.Tensor("x").Bytes()
	for i := range x[:len(x)-1] {
		x[i] = byte(s.Index())
	}
	return nil
}

type whole struct{ partial }

func (whole) Fill(_ context.Context, s *engine.Slot) error {
	clear(s.Tensor("x").Bytes())
	return nil
}

func TestEveryByte(t *testing.T) {
	assert.EqualError(t, EveryByte(partial{full: true}, 0, 0, 2), `sample 2, field "x": byte 7 is 0x00 over zeros, 0xa5 over 0xa5: not written`)
	assert.ErrorContains(t, EveryByte(partial{}, 0, 0, 2), "does not say it writes every byte")
	assert.NoError(t, EveryByte(whole{partial{full: true}}, 0, 0, 2))
}
