package corpus_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/corpus"
	"github.com/tensorbatch/tensorbatch/engine"
)

// A nanoGPT-style token file (uint16 tokens, no header) served as sequences
// of Context+1 tokens: inputs [:, :Context], targets [:, 1:].
func ExampleTokens() {
	f, _ := os.CreateTemp("", "train-*.bin")
	defer os.Remove(f.Name())
	for tok := range uint16(20) {
		binary.Write(f, binary.LittleEndian, tok)
	}
	f.Close()

	ds, err := corpus.Tokens(f.Name(), corpus.TokenConfig{Context: 4, Out: collate.Int64})
	if err != nil {
		panic(err)
	}
	l, err := engine.New(ds, engine.Config{BatchSize: 2})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			panic(err)
		}
		fmt.Println(b.Tensor("tokens").Shape(), collate.As[int64](b.Tensor("tokens")))
	}
	// Output:
	// [2 5] [0 1 2 3 4 4 5 6 7 8]
	// [2 5] [8 9 10 11 12 12 13 14 15 16]
}
