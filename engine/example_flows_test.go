package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// counting is a dataset of n samples whose one field holds the index.
func counting(n int) engine.Dataset {
	schema := collate.Schema{{Name: "i", DType: collate.Int64}}
	return engine.DatasetFunc(n, schema, func(ctx context.Context, s *engine.Slot) error {
		collate.As[int64](s.Tensor("i"))[0] = int64(s.Index())
		return nil
	})
}

// A batch is recycled when the loop body returns; Retain keeps it (host and
// device memory) until Release, for example to read it after the next
// batch arrived.
func ExampleBatch_Retain() {
	l, err := engine.New(counting(6), engine.Config{BatchSize: 2, Workers: 2})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	var prev *engine.Batch
	for b, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			panic(err)
		}
		if prev != nil {
			fmt.Println("previous", collate.As[int64](prev.Tensor("i")), "current", collate.As[int64](b.Tensor("i")))
			prev.Release()
		}
		b.Retain()
		prev = b
	}
	prev.Release()
	// Output:
	// previous [0 1] current [2 3]
	// previous [2 3] current [4 5]
}

// Checkpoint the loader with the model: State after a batch is a small JSON
// value, and a new loader with Config.Resume continues right after that
// batch, whatever Workers are.
func ExampleLoader_State() {
	cfg := engine.Config{BatchSize: 2, Shuffle: true, Seed: 7, Workers: 2}
	l, err := engine.New(counting(8), cfg)
	if err != nil {
		panic(err)
	}
	var saved []byte
	for b, err := range l.Epoch(context.Background(), 3) {
		if err != nil {
			panic(err)
		}
		fmt.Println("before", b.Indices())
		if len(saved) == 0 {
			saved, _ = json.Marshal(l.State()) // beside the model's weights
			break                              // the job stops here
		}
	}
	l.Close()

	var st engine.State
	if err := json.Unmarshal(saved, &st); err != nil {
		panic(err)
	}
	cfg.Resume, cfg.Workers = &st, 0
	l, err = engine.New(counting(8), cfg)
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for b, err := range l.Epoch(context.Background(), st.Epoch) {
		if err != nil {
			panic(err)
		}
		fmt.Println("after", b.Indices())
	}
	// Output:
	// before [6 7]
	// after [2 4]
	// after [1 3]
	// after [0 5]
}

// A sample that fails is an error naming its index; Config.OnError skips
// up to a budget of them instead, each batch delivered short.
func ExampleErrorPolicy() {
	schema := collate.Schema{{Name: "i", DType: collate.Int64}}
	ds := engine.DatasetFunc(6, schema, func(ctx context.Context, s *engine.Slot) error {
		if s.Index() == 3 {
			return errors.New("corrupt record")
		}
		collate.As[int64](s.Tensor("i"))[0] = int64(s.Index())
		return nil
	})
	for _, policy := range []engine.ErrorPolicy{{}, {Skip: 1}} {
		l, err := engine.New(ds, engine.Config{BatchSize: 2, OnError: policy})
		if err != nil {
			panic(err)
		}
		for b, err := range l.Epoch(context.Background(), 0) {
			var se *engine.SampleError
			if errors.As(err, &se) {
				fmt.Println("error at sample", se.Index, ":", se.Err)
				break
			}
			fmt.Println(b.Indices())
		}
		fmt.Println("skipped", l.Stats().Skipped)
		l.Close()
	}
	// Output:
	// [0 1]
	// error at sample 3 : corrupt record
	// skipped 0
	// [0 1]
	// [2]
	// [4 5]
	// skipped 1
}

// Stats counts batches and samples and times each stage; DataBound is the
// share of the training loop's time spent waiting for data.
func ExampleLoader_Stats() {
	l, err := engine.New(counting(100), engine.Config{BatchSize: 10, Workers: 2})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	for _, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			panic(err)
		}
	}
	st := l.Stats()
	fmt.Println(st.Batches, "batches,", st.Samples, "samples,", st.BytesCopied, "bytes copied by the loader")
	fmt.Println(st.DataBound >= 0 && st.DataBound <= 1, st.Wait.Count)
	// Output:
	// 10 batches, 100 samples, 0 bytes copied by the loader
	// true 10
}
