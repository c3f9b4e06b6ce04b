package corpus_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/corpus"
	"github.com/tensorbatch/tensorbatch/engine"
)

// A Megatron-LM indexed dataset (my-corpus_text_document.idx and .bin, as
// preprocess_data.py writes them) served as samples of SeqLength+1
// tokens that run across document boundaries. The documents here are
// written by WriteMegatron: document d holds tokens 100(d+1), 100(d+1)+1,
// and so on. In epoch 0 the documents run in the order 0 2 1, one stream
// of 13 tokens cut into (13-1)/4 = 3 samples of 5, each starting on the
// last token of the one before; the loader's index i is sample
// Shuffle[i].
func ExampleMegatron() {
	dir, err := os.MkdirTemp("", "megatron")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	prefix := filepath.Join(dir, "my-corpus_text_document")
	docs := [][]int64{{100, 101, 102, 103, 104, 105}, {200, 201}, {300, 301, 302, 303, 304}}
	if err := corpus.WriteMegatron(prefix, collate.Uint16, docs); err != nil {
		panic(err)
	}

	ds, err := corpus.Megatron(prefix, corpus.MegatronConfig{SeqLength: 4, Seed: 1234, Out: collate.Int64})
	if err != nil {
		panic(err)
	}
	defer ds.Close()
	fmt.Println("samples:", ds.Len(), "schema:", ds.Schema())
	o, err := ds.Order(0) // epoch 0's document order and sample order
	if err != nil {
		panic(err)
	}
	fmt.Println("documents:", o.Documents, "samples:", o.Shuffle)

	// The dataset shuffles its samples itself: leave Config.Shuffle off.
	l, err := engine.New(ds, engine.Config{BatchSize: 2, Backend: "cpu", WorldSize: 1})
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
	// samples: 3 schema: [tokens int64[5]]
	// documents: [0 2 1] samples: [2 0 1]
	// [2 5] [302 303 304 200 201 100 101 102 103 104]
	// [1 5] [104 105 300 301 302]
}
