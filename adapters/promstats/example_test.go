package promstats_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tensorbatch/tensorbatch/adapters/promstats"
	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
)

// Register a loader's Stats with a Prometheus registry; serve it with
// promhttp.HandlerFor(reg, promhttp.HandlerOpts{}) as usual.
func ExampleRegister() {
	schema := collate.Schema{{Name: "x", DType: collate.Float32, Shape: []int{2}}}
	ds := engine.DatasetFunc(10, schema, func(ctx context.Context, s *engine.Slot) error {
		collate.As[float32](s.Tensor("x"))[0] = float32(s.Index())
		return nil
	})
	l, err := engine.New(ds, engine.Config{BatchSize: 4, Workers: 2, Backend: "cpu"})
	if err != nil {
		panic(err)
	}
	defer l.Close()

	reg := prometheus.NewRegistry()
	if err := promstats.Register(reg, "train", l); err != nil {
		panic(err)
	}
	for _, err := range l.Epoch(context.Background(), 0) {
		if err != nil {
			panic(err)
		}
	}

	mfs, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "tensorbatch_batches_total", "tensorbatch_samples_total":
			m := mf.GetMetric()[0]
			fmt.Println(mf.GetName(), m.GetLabel()[0].GetName(), m.GetLabel()[0].GetValue(), m.GetCounter().GetValue())
		}
	}
	// Output:
	// tensorbatch_batches_total loader train 3
	// tensorbatch_samples_total loader train 10
}
