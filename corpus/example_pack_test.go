package corpus_test

import (
	"context"
	"fmt"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/corpus"
	"github.com/tensorbatch/tensorbatch/engine"
)

// Five documents packed first-fit into sequences of 8 tokens, with an
// end-of-document token 9 appended: document 0 (4 tokens and its EOD)
// opens sequence 0, document 1 (7 and EOD) fills sequence 1, document 2
// (2 and EOD) joins sequence 0, document 3 (11 and EOD) is split into 8
// and 4, and document 4 (1 and EOD) goes where the last piece left room.
// position_ids restart at each cu_seqlens boundary; the padding (0) is a
// segment of its own, and loss_mask is 0 on it and on each document's
// first token.
func ExamplePack() {
	docs := corpus.DocumentSlice{
		{1, 2, 3, 4},
		{11, 12, 13, 14, 15, 16, 17},
		{21, 22},
		{31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41},
		{51},
	}
	ds, err := corpus.Pack(docs, corpus.PackConfig{SeqLen: 8, AddEOD: true, EOD: 9})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d sequences, efficiency %.3f\n", ds.Len(), ds.Efficiency())
	l, err := engine.New(ds, engine.Config{BatchSize: ds.Len(), Backend: "cpu", WorldSize: 1})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			panic(err)
		}
		for _, name := range []string{"tokens", "position_ids", "cu_seqlens", "loss_mask", "num_docs"} {
			t := b.Tensor(name)
			fmt.Println(name, t.Shape())
			row := len(t.Bytes()) / b.Len() / t.DType().Size()
			for i := range b.Len() {
				switch t.DType() {
				case collate.Int64:
					fmt.Println(" ", collate.As[int64](t)[i*row:(i+1)*row])
				case collate.Int32:
					fmt.Println(" ", collate.As[int32](t)[i*row:(i+1)*row])
				case collate.Float32:
					fmt.Println(" ", collate.As[float32](t)[i*row:(i+1)*row])
				}
			}
		}
	}
	// Output:
	// 4 sequences, efficiency 0.938
	// tokens [4 8]
	//   [1 2 3 4 9 21 22 9]
	//   [11 12 13 14 15 16 17 9]
	//   [31 32 33 34 35 36 37 38]
	//   [39 40 41 9 51 9 0 0]
	// position_ids [4 8]
	//   [0 1 2 3 4 0 1 2]
	//   [0 1 2 3 4 5 6 7]
	//   [0 1 2 3 4 5 6 7]
	//   [0 1 2 3 0 1 0 1]
	// cu_seqlens [4 9]
	//   [0 5 8 8 8 8 8 8 8]
	//   [0 8 8 8 8 8 8 8 8]
	//   [0 8 8 8 8 8 8 8 8]
	//   [0 4 6 8 8 8 8 8 8]
	// loss_mask [4 8]
	//   [0 1 1 1 1 0 1 1]
	//   [0 1 1 1 1 1 1 1]
	//   [0 1 1 1 1 1 1 1]
	//   [0 1 1 1 0 1 0 0]
	// num_docs [4]
	//   [2]
	//   [1]
	//   [1]
	//   [2]
}
